"""Soak of engine v2: millions of beats of random configurations on the IP (``ZipsgdEngine2``:
every setting, level table and model word through its registers, each epoch one AXI4-Stream
packet), bit-exact against the golden model of engine v2 after every epoch, every
configuration logged with its seed so that a failure is replayed alone.

    python -m zipsgd.sim.soak2 --beats 10000000 --seed 1     # `make soak2`
    python -m zipsgd.sim.soak2 --replay SEED                 # one configuration again
    python -m zipsgd.sim.soak2 --summarize                   # figures of the last soak's log
    python -m zipsgd.sim.soak2 --beats 10000000 --seed 1 --resume   # go on with a stopped soak

A configuration is a pure function of its seed (:func:`soak_run2`): encoding and bits, feature
count, batch size, samples (1,000 to 16,000 beats an epoch), epochs, update and rounding
modes, step, decay, threshold, the level tables (uniform, random per feature, variance-optimal
per feature or shared), the initial model and the input's idle cycles.  The orchestration is
engine v1's (``zipsgd/sim/soak.py``); the cocotb side is ``soak2_runs`` in
``zipsgd/sim/engine2_bench.py``, which appends one JSON line per configuration to the log
(``build/soak2/log.jsonl``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..hw.v2.top import TOP_NAME2, ZipsgdEngine2
from ..spec.engine2 import TABLE_BITS, EngineParams2, lane_plan
from ..spec.errors import ConfigError
from ..spec.stream import StreamLayout
from .core2_sim import run_config
from .soak import SoakTarget, bench_simulator, last_soak, verilog_digest
from .soak import main as soak_main

__all__ = ["SOAK2_PARAMS", "SOAK2", "soak_run2", "run_beats2", "summarize_log2", "main"]

#: The engine build of the soak: the test suite's engine v2 build (cached).
SOAK2_PARAMS = EngineParams2(64, 4096, 512)
DEFAULT_LOG2 = Path("build/soak2/log.jsonl")
_PRECISIONS = [("double", b) for b in range(1, 9)] + [("single", b) for b in (1, 2, 4, 8)] \
    + [("raw32", 32)]
_ROUNDINGS = ("stochastic", "half_even", "truncate")


def soak_run2(seed: int, params: EngineParams2 = SOAK2_PARAMS) -> dict:
    """The run of configuration ``seed`` (the ``runs`` entry format of
    ``zipsgd/sim/engine2_bench.py``)."""
    rng = np.random.default_rng([seed, 0x50A2])
    encoding, bits = _PRECISIONS[int(rng.integers(len(_PRECISIONS)))]
    # (Up to 3000: samples of more than 512 fields are padded on the wire, ``sample_fields``.)
    n = int(min(params.max_features, np.exp(rng.uniform(0, np.log(3000)))))
    batch = int(rng.choice([1, 2, 4, 8, 16, 32, 64, 256],
                           p=[.03, .07, .12, .18, .2, .18, .12, .1]))
    batch = min(batch, params.max_batch)
    levels = "uniform"
    if encoding != "raw32":
        levels = str(rng.choice(["uniform", "random", "optimal", "shared-optimal"],
                                p=[.4, .25, .15, .2]))
        if levels in ("random", "optimal") and bits > TABLE_BITS:
            levels = "shared-optimal"            # per-feature tables hold b <= TABLE_BITS
    layout = StreamLayout.make(encoding, bits, params.bus_width)
    beats = int(rng.integers(1_000, 16_000))
    samples = max(batch + 1, beats * params.bus_width // (layout.field_width * (n + 1)))
    run = {"encoding": encoding, "bits": bits, "n": n, "batch": batch,
           "mode": str(rng.choice(["delayed", "exact"])),
           "rounding": _ROUNDINGS[int(rng.integers(3))],
           "alpha": float(np.exp(rng.uniform(np.log(0.005), np.log(0.4)))),
           "seed": int(rng.integers(1, 1 << 31)),
           "decay": int(rng.integers(1, 1 << 16)) if rng.random() < .3 else 0,
           "threshold": int(rng.integers(1, 1 << 8)) if rng.random() < .2 else 0,
           "samples": samples, "epochs": int(rng.integers(1, 4)),
           "data_seed": int(rng.integers(1 << 31)), "levels": levels,
           "idle": float(rng.uniform(0.05, 0.6)) if rng.random() < .35 else 0.0}
    if levels in ("random", "optimal"):
        try:
            lane_plan(run_config(run), params, samples, True)
        except ConfigError:
            run["levels"] = "shared-optimal"     # more features a lane than its tables hold
    # (A configuration the engine accepts: its lane plan exists.)
    lane_plan(run_config(run), params, samples, run["levels"] in ("random", "optimal"))
    return run


def run_beats2(run: dict, params: EngineParams2 = SOAK2_PARAMS) -> int:
    """Beats a run streams (all epochs)."""
    layout = StreamLayout.make(run["encoding"], run["bits"], params.bus_width,
                               tables=run.get("levels") in ("random", "optimal"))
    return layout.stream_beats(run["n"], run["samples"]) * run["epochs"]


#: Engine v2's soak.
SOAK2 = SoakTarget("engine v2", SOAK2_PARAMS, soak_run2, run_beats2,
                   bench_simulator(ZipsgdEngine2, TOP_NAME2, "zipsgd.sim.engine2_bench",
                                   "soak2_runs"),
                   "python -m zipsgd.sim.soak2", verilog_digest(ZipsgdEngine2, TOP_NAME2))


def summarize_log2(log: Path) -> dict:
    """Figures of the last soak in ``log`` (the entries after its last header), also when the
    soak was stopped before its budget."""
    header, entries = last_soak(log)
    done = [e for e in entries if e["ok"]]
    runs = [e["run"] for e in done]
    return {"master_seed": header and header["master_seed"],
            "planned_beats": header and header["beats"], "configs": len(done),
            "epochs": sum(r["epochs"] for r in runs), "beats": sum(e["beats"] for e in done),
            "cycles": sum(e["cycles"] for e in done),
            "sim_wall_s": round(sum(e["wall_s"] for e in done), 1),
            "precisions": len({(r["encoding"], r["bits"]) for r in runs}),
            "batch_sizes": sorted({r["batch"] for r in runs}),
            "level_tables": sorted({r["levels"] for r in runs}),
            "idle_configs": sum(r["idle"] > 0 for r in runs),
            "mismatches": sum(not e["ok"] for e in entries),
            "failed_seeds": [e["seed"] for e in entries if not e["ok"]]}


def main(argv=None) -> int:
    return soak_main(argv, target=SOAK2, summarize=summarize_log2, doc=__doc__,
                     default_log=DEFAULT_LOG2)


if __name__ == "__main__":
    sys.exit(main())
