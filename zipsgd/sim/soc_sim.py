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
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..hw.soc import (
    DFII_SEL,
    ENGINE_BASE,
    SIM_BRIDGES,
    SIM_SDR16,
    SIM_TOP,
    SimDram,
    etherbone_defaults,
    sim_soc,
)
from ..spec.engine2 import EngineParams2
from ..spec.errors import ConfigError
from . import runner
from .board_sim import background_simulation, pty_simulation

__all__ = ["run_soc", "simulated_soc", "SIM_DIVISOR", "SIM_ETHERBONE_IP", "SIM_HOST"]

#: Clock cycles a bit of the simulated SoC's UART bridge: fast, so the simulation spends its
#: time on the SoC rather than on the serial line.
SIM_DIVISOR = 16
#: The UART SoC's pins for the pump.
_PINS = {"clk": "sys_clk", "rst": "sys_rst", "rx": "serial_rx", "tx": "serial_tx"}

#: Where the pump receives what ``litex_server --udp`` sends: a loopback address other than the
#: one ``litex_server`` answers from (``zipsgd/sim/eth_pump.py``).
SIM_ETHERBONE_IP = "127.0.0.2"
#: The host on the simulated wire (LiteX's default remote address; a locally administered MAC).
SIM_HOST = {"mac": 0x02_00_00_00_00_01, "ip": "192.168.1.100"}

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


def _build_bridged_soc(params: EngineParams2, bridge: str, divisor: int, build_root):
    key = (params, bridge, divisor, None if build_root is None else str(build_root))
    if key not in _BUILT:
        soc = sim_soc(params, bridge, divisor)
        built = runner.build(soc.verilog, SIM_BRIDGES[bridge], extra_build_args=_LITEX_WAIVERS,
                             build_root=build_root)
        _BUILT[key] = soc, built
    return _BUILT[key]


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def simulated_soc(params: EngineParams2, divisor: int = SIM_DIVISOR, build_root=None,
                  start_timeout: float = 120.0, sim_timeout: float = 3600.0,
                  bridge: str = "uart") -> Iterator[tuple[str, dict]]:
    """Run the SoC with its UART bridge (``bridge="uart"``) or its Etherbone bridge
    (``"etherbone"``); yields the link to give :func:`zipsgd.host.soc.litex_server` (the
    serial device's path, or ``udp``) and the SoC's facts (as a board build's ``soc.json``:
    ``csrs``, ``init``, ``main_ram_base``, ``main_ram_size``, ``engine_base``, ``clock_hz``,
    ``baud``; with Etherbone, ``etherbone``: the pump's ``ip`` and ``port``, and the bridge's
    ``max_words``).

    With Etherbone, ``litex_server`` must set ``SO_REUSEADDR`` on its socket to share its port
    with the pump's (``zipsgd/sim/eth_pump.py``).

    Raises
    ------
    ConfigError
        ``bridge`` is neither.
    zipsgd.sim.runner.SimulationFailed
        The build fails, the simulation does not come up or it fails.
    """
    if bridge not in ("uart", "etherbone"):
        raise ConfigError(f"the simulated SoC's host bridge is uart or etherbone, found "
                          f"{bridge!r}")
    soc, built = _build_bridged_soc(params, bridge, divisor, build_root)
    facts = {"csrs": soc.csrs, "init": [list(row) for row in soc.init], "phy": soc.phy,
             "main_ram_base": soc.main_ram_base, "main_ram_size": soc.main_ram_size,
             "engine_base": ENGINE_BASE, "clock_hz": SIM_SDR16.clock_hz,
             "baud": SIM_SDR16.clock_hz // divisor}
    if bridge == "uart":
        with pty_simulation(built, divisor, _PINS, start_timeout, sim_timeout) as path:
            yield path, facts
        return
    udp = {"ip": SIM_ETHERBONE_IP, "port": _free_udp_port()}
    pump = {"udp": udp, "soc": etherbone_defaults(), "host": SIM_HOST}
    with background_simulation(built, "zipsgd.sim.eth_pump", "eth_pump", pump, start_timeout,
                               sim_timeout) as link:
        yield link, facts | {"etherbone": udp | {"max_words": pump["soc"]["max_words"]}}
