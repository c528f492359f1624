"""Running engine v2 as an IP (``zipsgd/hw/v2/top.py``) under Verilator and cocotb, through its
AXI4-Lite registers and AXI4-Stream input (``zipsgd/sim/engine2_bench.py``)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..hw.v2.top import TOP_NAME2, ZipsgdEngine2
from ..spec.engine2 import EngineParams2
from . import runner

__all__ = ["run_engine2", "engine2_runs"]


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


def run_engine2(params: EngineParams2, runs: list[dict], report_dir=None,
                testcase: str = "engine2_matches_golden", **kwargs) -> list[dict]:
    """Build (cached by the Verilog's hash) and run ``testcase`` on ``runs``; every epoch is
    checked bit for bit against the golden model.  Returns each epoch's ``beats`` and
    ``cycles_busy`` (read from the registers)."""
    with tempfile.TemporaryDirectory(prefix="zipsgd-engine2-") as tmp:
        report = Path(report_dir or tmp) / "report.json"
        runner.build_and_test(ZipsgdEngine2(params), TOP_NAME2, "zipsgd.sim.engine2_bench",
                              testcase=testcase,
                              test_params={"params": params.__dict__, "runs": runs},
                              extra_env={"ZIPSGD_SIM_REPORT": str(report)}, **kwargs)
        return json.loads(report.read_text()) if report.exists() else []
