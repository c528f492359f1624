"""Engine v2 in the simulated LiteX SoC under Verilator and cocotb (``zipsgd/sim/soc_bench.py``):
DRAM init, upload, memory runs and read-back by the host's driver, bit-exact with the golden
model."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..hw.soc import DFII_SEL, ENGINE_BASE, SIM_TOP, sim_soc
from ..spec.engine2 import EngineParams2
from . import runner

__all__ = ["run_soc"]

#: LiteX's Verilog (Migen's) writes its combinational processes with ``<=`` and has one
#: combinational loop Verilator cannot order (LiteDRAM's Wishbone ``ack``): both as LiteX's own
#: simulation builds them.
_LITEX_WAIVERS = ("-Wno-COMBDLY", "-Wno-UNOPTFLAT")


def run_soc(params: EngineParams2, runs: list[dict], report_dir=None, **kwargs) -> list[dict]:
    """Build the SoC (cached by its Verilog's hash) and run ``runs`` as memory runs; returns
    each run's ``beats``, ``epochs``, ``cycles`` (from CTRL.RUN to the run's end, as the host
    saw it) and ``cycles_busy``."""
    soc = sim_soc(params)
    spec = {"params": params.__dict__, "runs": runs, "csrs": soc.csrs,
            "init": [list(row) for row in soc.init], "main_ram_base": soc.main_ram_base,
            "engine_base": ENGINE_BASE, "dfii_sel": DFII_SEL}
    with tempfile.TemporaryDirectory(prefix="zipsgd-soc-") as tmp:
        report = Path(report_dir or tmp) / "report.json"
        runner.build_and_test(soc.verilog, SIM_TOP, "zipsgd.sim.soc_bench",
                              testcase="soc_memory_runs", test_params=spec,
                              extra_build_args=_LITEX_WAIVERS,
                              extra_env={"ZIPSGD_SIM_REPORT": str(report)}, **kwargs)
        return json.loads(report.read_text()) if report.exists() else []
