"""Running engine v2's core under Verilator and cocotb (``zipsgd/sim/core2_bench.py``)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..hw.v2.core import Core2
from ..spec.engine2 import EngineParams2
from . import runner

__all__ = ["run_core2", "TOP"]

#: The Verilog top module's name.
TOP = "core2"


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
