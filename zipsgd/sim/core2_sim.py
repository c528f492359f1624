"""Running engine v2's core under Verilator and cocotb (``zipsgd/sim/core2_bench.py``)."""

from __future__ import annotations

import itertools
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..golden.engine2 import GoldenEngine2
from ..host.levels import LevelStats, optimal_levels, table_words
from ..hw.v2.core import Core2
from ..spec.engine2 import (
    TABLE_BITS,
    EngineParams2,
    LanePlan,
    RunConfig2,
    UpdateMode,
    lane_plan,
    step_register,
)
from ..spec.fixed import RoundingMode
from ..spec.stream import Encoding, StreamLayout, uniform_levels
from . import runner

__all__ = ["run_core2", "RunSetup", "prepare_run", "TOP", "SWEEP_FEATURES", "sweep_runs",
           "codebook_runs", "run_config",
           "random_levels", "random_fields", "level_table"]

#: The Verilog top module's name.
TOP = "core2"


def run_config(run: dict) -> RunConfig2:
    """The ``RunConfig2`` of a run description (the step from ``alpha`` per batch)."""
    cfg = RunConfig2(encoding=run["encoding"], bits=run["bits"], n_features=run["n"],
                     batch_size=run["batch"], update_mode=UpdateMode[run["mode"].upper()],
                     rounding=RoundingMode[run.get("rounding", "stochastic").upper()],
                     seed=run.get("seed", 1), decay=run.get("decay", 0),
                     threshold=run.get("threshold", 0))
    step, shift = step_register(run.get("alpha", 0.02) / run["batch"], cfg)
    return cfg.with_(step=step, residual_shift=shift)


def random_levels(rng, bits: int, n: int) -> np.ndarray:
    """Per-feature level tables: -256, strictly increasing random levels, +256."""
    rows = []
    for _ in range(n + 1):
        inner = rng.choice(np.arange(-255, 256), (1 << bits) - 1, replace=False)
        rows.append([-256, *sorted(inner.tolist()), 256])
    return np.array(rows, dtype=np.int64)


def level_table(kind: str, rng, bits: int, n: int):
    """``(table, per_feature)``: the level table the golden model decodes with (``None``:
    uniform) and whether the engine holds it per feature.  ``optimal`` tables are the host's
    variance-optimal levels (``zipsgd/host/levels.py``) of skewed random columns;
    ``shared-optimal`` solves for all columns pooled and gives every feature that row."""
    if kind == "uniform":
        return None, False
    if kind == "random":
        return random_levels(rng, bits, n), True
    values = rng.standard_exponential((400, n + 1)) ** rng.uniform(0.5, 3.0, n + 1)
    values = 2 * values / values.max(axis=0) - 1          # columns from -1 to 1, skewed
    if kind == "optimal":
        stats = LevelStats(n)
        stats.update(values[:, 0], values[:, 1:])
        return table_words(stats.solve(bits)).astype(np.int64), True
    if kind == "shared-optimal":
        row = table_words(optimal_levels(values.reshape(-1), bits, method="discretized")
                          .reshape(1, -1))
        return np.repeat(row, n + 1, axis=0).astype(np.int64), False
    raise ValueError(f"levels must be uniform, random, optimal or shared-optimal, found {kind!r}")


@dataclass
class RunSetup:
    """What a bench loads for a run: its settings, the level table the engine holds (``None``
    for raw32; uniform levels unless the run names a table), the initial model, and the golden
    model holding it; ``rng`` goes on to draw the epochs' fields."""

    config: RunConfig2
    plan: LanePlan
    per_feature: bool
    table: np.ndarray | None
    model: np.ndarray
    golden: GoldenEngine2
    rng: np.random.Generator


def prepare_run(params: EngineParams2, run: dict) -> RunSetup:
    """The :class:`RunSetup` of a run description."""
    cfg = run_config(run)
    rng = np.random.default_rng(run.get("data_seed", 1))
    raw = cfg.encoding is Encoding.RAW32
    golden_table, per_feature = (None, False) if raw else \
        level_table(run.get("levels", "uniform"), rng, cfg.bits, cfg.n_features)
    plan = lane_plan(cfg, params, run["samples"], per_feature)
    table = golden_table if golden_table is not None or raw else \
        uniform_levels(cfg.bits, cfg.n_features).astype(np.int64)
    model = rng.integers(-(1 << 22), 1 << 22, cfg.n_features)
    golden = GoldenEngine2(params, cfg, golden_table)
    golden.write_model(model)
    return RunSetup(cfg, plan, per_feature, table, model, golden, rng)


def random_fields(rng, cfg: RunConfig2, samples: int, bus_width: int, tables: bool = False):
    """Random fields of every value (raw32: words in [-2**30, 2**30]) and their layout
    (``tables``: per-feature level tables, which pad long samples for them)."""
    layout = StreamLayout(cfg.encoding, cfg.bits, bus_width, tables=tables)
    if cfg.encoding is Encoding.RAW32:
        words = rng.integers(-(1 << 30), (1 << 30) + 1, (samples, cfg.n_features + 1))
        return words.astype(np.int64).astype(np.uint32).astype(np.uint64), layout
    return rng.integers(0, 1 << layout.field_width, (samples, cfg.n_features + 1),
                        dtype=np.uint64), layout


ROUNDINGS = ("stochastic", "half_even", "truncate")


#: Feature counts of the sweep by bus width, quantized and raw32.  L = 32: n + 1 = 8, 16, 32
#: divide the lanes (a lane sums into one word in every window), 64 = 2 L (every other
#: window); 9, 101, 301 odd (one feature per update cycle); 34 and 64 even
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
            "levels": "random" if encoding != "raw32" and bits <= TABLE_BITS and k % 3 == 1
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


def padded_runs() -> list[dict]:
    """Samples of more than 512 fields (128 with per-feature level tables), padded on the wire
    (``sample_fields``): 1001 -> 1002 (wide update, the last unit idle at the last address),
    1025 -> 1028 (wide, whole update cycles of padding), 601 -> 602 (raw32: narrow, the
    padding feature alone in its cycle), per-feature tables 201 -> 202 and 1001 -> 1008; with
    decay and threshold, so a padding feature that moved would show."""
    runs = []
    for k, (encoding, bits, n, levels) in enumerate((
            ("double", 1, 1000, "uniform"), ("double", 3, 1024, "uniform"),
            ("single", 8, 600, "uniform"), ("raw32", 32, 600, "uniform"),
            ("double", 2, 200, "random"), ("single", 4, 1000, "random"))):
        runs.append({"encoding": encoding, "bits": bits, "n": n, "batch": (4, 16)[k % 2],
                     "mode": ("delayed", "exact")[k % 2], "rounding": ROUNDINGS[k % 3],
                     "alpha": 0.1, "seed": 70 + k, "decay": 1 << 10, "threshold": 16,
                     "samples": 30, "epochs": 2, "data_seed": 70 + k,
                     "idle": 0.3 if k % 2 else 0.0, "levels": levels})
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
