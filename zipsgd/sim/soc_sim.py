"""Engine v2 in the simulated LiteX SoC under Verilator and cocotb.

:func:`run_soc`: the host's driver on a Wishbone master at the SoC's top level
(``zipsgd/sim/soc_bench.py``): DRAM init, upload, memory runs and read-back, bit-exact with the
golden model.

:func:`simulated_soc`: the SoC with LiteX's UART bridge, its serial lines on a pseudo-terminal
(``zipsgd/sim/board_pump.py``), so that the host reaches it exactly as a board: ``litex_server``
on the serial device and ``RemoteClient`` (``zipsgd train --backend soc-sim``).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..hw.soc import DFII_SEL, ENGINE_BASE, SIM_SDR16, SIM_TOP, SIM_UART_TOP, SimDram, sim_soc
from ..spec.engine2 import EngineParams2
from . import runner
from .board_sim import pty_simulation

__all__ = ["run_soc", "simulated_soc", "SIM_DIVISOR"]

#: Clock cycles a bit of the simulated SoC's UART bridge: fast, so the simulation spends its
#: time on the SoC rather than on the serial line.
SIM_DIVISOR = 16
#: The UART SoC's pins for the pump.
_PINS = {"clk": "sys_clk", "rst": "sys_rst", "rx": "serial_rx", "tx": "serial_tx"}

#: LiteX's Verilog (Migen's) writes its combinational processes with ``<=`` and has one
#: combinational loop Verilator cannot order (LiteDRAM's Wishbone ``ack``): both as LiteX's own
#: simulation builds them.
_LITEX_WAIVERS = ("-Wno-COMBDLY", "-Wno-UNOPTFLAT")


def run_soc(params: EngineParams2, runs: list[dict], report_dir=None,
            dram: SimDram = SIM_SDR16, **kwargs) -> list[dict]:
    """Build the SoC with ``dram``'s DRAM configuration (cached by its Verilog's hash) and run
    ``runs`` as memory runs; returns each run's ``beats``, ``epochs``, ``cycles`` (from
    CTRL.RUN to the run's end, as the host saw it) and ``cycles_busy``."""
    soc = sim_soc(params, dram=dram)
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


_BUILT: dict = {}


def _build_uart_soc(params: EngineParams2, divisor: int, build_root):
    key = (params, divisor, None if build_root is None else str(build_root))
    if key not in _BUILT:
        soc = sim_soc(params, "uart", divisor)
        built = runner.build(soc.verilog, SIM_UART_TOP, extra_build_args=_LITEX_WAIVERS,
                             build_root=build_root)
        _BUILT[key] = soc, built
    return _BUILT[key]


@contextlib.contextmanager
def simulated_soc(params: EngineParams2, divisor: int = SIM_DIVISOR, build_root=None,
                  start_timeout: float = 120.0, sim_timeout: float = 3600.0
                  ) -> Iterator[tuple[str, dict]]:
    """Run the SoC with its UART bridge; yields its serial device's path and the SoC's facts
    (as a board build's ``soc.json``: ``csrs``, ``init``, ``main_ram_base``, ``main_ram_size``,
    ``engine_base``, ``clock_hz``, ``baud``).

    Raises
    ------
    zipsgd.sim.runner.SimulationFailed
        The build fails, the simulation does not come up or it fails.
    """
    soc, built = _build_uart_soc(params, divisor, build_root)
    facts = {"csrs": soc.csrs, "init": [list(row) for row in soc.init], "phy": soc.phy,
             "main_ram_base": soc.main_ram_base, "main_ram_size": soc.main_ram_size,
             "engine_base": ENGINE_BASE, "clock_hz": SIM_SDR16.clock_hz,
             "baud": SIM_SDR16.clock_hz // divisor}
    with pty_simulation(built, divisor, _PINS, start_timeout, sim_timeout) as path:
        yield path, facts
