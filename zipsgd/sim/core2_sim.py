"""Running engine v2's core under Verilator and cocotb (``zipsgd/sim/core2_bench.py``)."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

from ..hw.v2.core import Core2
from ..spec.engine2 import EngineParams2
from . import runner

__all__ = ["run_core2", "TOP", "SWEEP_FEATURES", "sweep_runs", "codebook_runs"]

#: The Verilog top module's name.
TOP = "core2"


ROUNDINGS = ("stochastic", "half_even", "truncate")


#: Feature counts of the sweep by bus width, quantized and raw32.  L = 32: n + 1 = 8, 16, 32
#: divide the lanes (bypass); 9, 101, 301 odd (one feature per update cycle); 34 and 64 even
#: (two); 2, 4, 7 shorter than a group (a pass per sample).  L = 64 (U = 4, R = 8): 10 and 22
#: even but not multiples of 4 (one feature per cycle).
SWEEP_FEATURES = {
    64: ((7, 8, 1, 15, 31, 3, 33, 63, 6, 100, 300), (1, 7, 9, 40)),
    128: ((7, 9, 2, 15, 21, 63, 5, 64, 127, 200), (1, 15, 16, 50)),
}


def sweep_runs(params: EngineParams2, batches=(1, 4, 16, 64)) -> list[dict]:
    """Every precision twice (two seeds); feature counts, batch sizes, update and rounding
    modes, steps, decay, threshold, idle cycles and random level tables rotate through the
    runs."""
    feature_counts, raw_counts = SWEEP_FEATURES[params.bus_width]
    precisions = [("double", b) for b in range(1, 9)] + [("single", 1), ("single", 4),
                                                         ("single", 8), ("raw32", 32)]
    cycle = itertools.count()
    runs = []
    for (encoding, bits), seed in itertools.product(precisions, (1, 2)):
        k = next(cycle)
        counts = raw_counts if encoding == "raw32" else feature_counts
        n = counts[k % len(counts)]
        batch = batches[k % len(batches)]
        runs.append({
            "encoding": encoding, "bits": bits, "n": n, "batch": batch,
            "mode": "delayed" if k % 2 else "exact", "rounding": ROUNDINGS[k % 3],
            "alpha": 0.05 if k % 4 else 0.4, "seed": seed + 10 * k,
            "decay": (1 << 10) if k % 4 == 3 else 0, "threshold": 64 if k % 5 == 4 else 0,
            "samples": min(2 * batch + 3, 60) if batch > 1 else 9, "epochs": 2,
            "data_seed": seed + k, "idle": 0.3 if k % 2 else 0.0,
            "levels": "random" if encoding != "raw32" and bits <= 4 and k % 3 == 1
            and n < 120 else "uniform",
        })
    return runs


def codebook_runs() -> list[dict]:
    """The decode stage with the host's variance-optimal levels and random ones, per feature
    at b = 1..4, and one shared optimal table for more features than a lane's tables hold
    (n + 1 = 301 odd: every lane holds all 301 features)."""
    runs = []
    for k, (bits, kind) in enumerate(itertools.product((1, 2, 3, 4), ("optimal", "random"))):
        runs.append({"encoding": "double" if k % 3 else "single", "bits": bits,
                     "n": (9, 30, 64, 100)[k % 4], "batch": (4, 16)[k % 2],
                     "mode": ("delayed", "exact")[k % 2], "rounding": ROUNDINGS[k % 3],
                     "samples": 40, "epochs": 2, "data_seed": 50 + k, "levels": kind})
    for bits in (1, 3, 6, 8):
        runs.append({"encoding": "double", "bits": bits, "n": 300, "batch": 8,
                     "mode": "delayed", "samples": 20, "epochs": 1, "data_seed": 60 + bits,
                     "levels": "shared-optimal"})
    return runs


def run_core2(params: EngineParams2, runs: list[dict], report_dir=None, **kwargs) -> list[dict]:
    """Build (cached by the Verilog's hash) and run ``runs`` in one simulation; every epoch is
    checked bit for bit against the golden model.  Returns each epoch's ``beats`` and
    ``cycles`` (start to done)."""
    with tempfile.TemporaryDirectory(prefix="zipsgd-core2-") as tmp:
        report = Path(report_dir or tmp) / "report.json"
        runner.build_and_test(Core2(params), TOP, "zipsgd.sim.core2_bench",
                              testcase="core2_matches_golden",
                              test_params={"params": params.__dict__, "runs": runs},
                              extra_env={"ZIPSGD_SIM_REPORT": str(report)}, **kwargs)
        return json.loads(report.read_text())
