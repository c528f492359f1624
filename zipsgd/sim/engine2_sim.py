"""Running engine v2 as an IP (``zipsgd/hw/v2/top.py``) under Verilator and cocotb, through its
AXI4-Lite registers and AXI4-Stream input (``zipsgd/sim/engine2_bench.py``)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..host.backend import EpochJob2
from ..hw.v2.top import TOP_NAME2, ZipsgdEngine2
from ..spec import registers2
from ..spec.engine2 import EngineParams2
from . import runner
from .engine_sim import run_job
from .stress import patterns

__all__ = ["run_engine2", "engine2_runs", "memory_runs", "reset_points", "stress_runs2",
           "run_training_job2", "epoch_writes"]


def engine2_runs() -> list[dict]:
    """Runs that cover what the registers carry: both update modes, every encoding, short
    samples, level tables per feature and shared, decay, threshold, idle cycles."""
    return [
        {"encoding": "double", "bits": 3, "n": 30, "batch": 4, "mode": "delayed",
         "rounding": "stochastic", "samples": 24, "epochs": 2, "data_seed": 1,
         "levels": "random", "idle": 0.3},
        {"encoding": "single", "bits": 8, "n": 5, "batch": 16, "mode": "exact",
         "rounding": "half_even", "samples": 40, "epochs": 1, "data_seed": 2,
         "decay": 1 << 10, "threshold": 64},
        {"encoding": "raw32", "bits": 32, "n": 9, "batch": 2, "mode": "delayed",
         "rounding": "truncate", "samples": 12, "epochs": 1, "data_seed": 3},
        {"encoding": "double", "bits": 6, "n": 300, "batch": 8, "mode": "exact",
         "samples": 10, "epochs": 1, "data_seed": 4, "levels": "shared-optimal"},
    ]


def memory_runs() -> list[dict]:
    """Memory runs (CTRL.RUN, several epochs of one stream): every encoding, both update
    modes, short samples; the first with the memory stalling its AR and R channels a quarter
    of the cycles (``DramRead.pauses``)."""
    return [
        {"encoding": "double", "bits": 3, "n": 30, "batch": 4, "mode": "delayed",
         "samples": 24, "epochs": 3, "data_seed": 5, "levels": "random", "pause": 0.25},
        {"encoding": "single", "bits": 8, "n": 5, "batch": 16, "mode": "exact",
         "rounding": "half_even", "samples": 40, "epochs": 2, "data_seed": 6},
        {"encoding": "raw32", "bits": 32, "n": 9, "batch": 2, "mode": "delayed",
         "rounding": "truncate", "samples": 12, "epochs": 2, "data_seed": 7},
    ]


def stress_runs2(n_random: int = 20, seed: int = 0) -> list[dict]:
    """An epoch of the runs of :func:`engine2_runs` in turn under each stress pattern
    (``zipsgd.sim.stress.patterns``: the fixed ones, then ``n_random`` random), every other
    one with the AXI4-Lite channels paused by a pattern of their own."""
    base = engine2_runs()
    return [dict(base[k % len(base)], epochs=1, idle=0.0, pattern=pattern, data_seed=100 + k,
                 axil_pauses={"kind": "bernoulli", "p": 0.3, "seed": k} if k % 2 else None)
            for k, pattern in enumerate(patterns(n_random, seed))]


def reset_points() -> list[dict]:
    """Resets of an epoch of each of :func:`engine2_runs` (``run``: its index) after a fraction
    of the epoch's busy cycles: early and midway in the stream, late (after its last beat,
    in the updates, for the runs whose last update outlasts the stream) and after its end,
    held for 1 to 5 cycles."""
    fractions = (0.05, 0.5, 0.97, 1.3)
    return [{"run": r, "fraction": f, "cycles": 1 + (r + k) % 5}
            for r in range(len(engine2_runs())) for k, f in enumerate(fractions)]


def run_engine2(params: EngineParams2, runs: list[dict], report_dir=None,
                testcase: str = "engine2_matches_golden", points=None, **kwargs) -> list[dict]:
    """Build (cached by the Verilog's hash) and run ``testcase`` on ``runs``; every epoch is
    checked bit for bit against the golden model.  Returns each epoch's ``beats`` and
    ``cycles_busy`` (read from the registers)."""
    with tempfile.TemporaryDirectory(prefix="zipsgd-engine2-") as tmp:
        report = Path(report_dir or tmp) / "report.json"
        runner.build_and_test(ZipsgdEngine2(params), TOP_NAME2, "zipsgd.sim.engine2_bench",
                              testcase=testcase,
                              test_params={"params": params.__dict__, "runs": runs,
                                           **({"points": points} if points else {})},
                              extra_env={"ZIPSGD_SIM_REPORT": str(report)}, **kwargs)
        return json.loads(report.read_text()) if report.exists() else []


def epoch_writes(job: EpochJob2) -> list[tuple[int, int]]:
    """The register writes before an epoch: its settings (and SEED), then its level table."""
    writes = registers2.config_writes(job.config, job.plan, per_feature=job.per_feature,
                                      seed=job.write_seed)
    if job.levels is not None:
        writes += registers2.level_writes(job.levels if job.per_feature else job.levels[:1])
    return writes


def run_training_job2(params: EngineParams2, jobs: list[EpochJob2], initial_model,
                      progress=None, build_root=None) -> list[dict]:
    """Run ``jobs`` on engine v2 simulated by Verilator (built once per Verilog, cached),
    through its registers and stream; one dict per epoch: ``status`` (the decoded status
    registers), ``model_words``, ``wall_s``."""
    built = runner.build(ZipsgdEngine2(params), TOP_NAME2, build_root=build_root)
    job = {"params": params.__dict__, "model": [int(w) for w in initial_model],
           "epochs": [{"writes": epoch_writes(j), "n_features": j.config.n_features}
                      for j in jobs]}
    return run_job(built, "zipsgd.sim.train_job2", "train_job2", job,
                   [j.payload for j in jobs], progress)
