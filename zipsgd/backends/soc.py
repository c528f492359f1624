"""``soc`` and ``soc-sim``: engine v2 in its LiteX SoC, reading its epochs from DRAM, reached
through LiteX's UART bridge with ``litex_server`` and ``RemoteClient``; on a board programmed
with ``zipsgd synth --engine 2``'s bitstream, or on the SoC simulated by Verilator behind a
pseudo-terminal.  Both run the same driver (``zipsgd/host/soc.py``): engine and DRAM checks,
uploads, one memory run an epoch, the model read back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..host.backend import Engine2Backend, EpochJob2
from ..host.soc import RemoteBus, link_max_words, litex_server, run_soc_jobs
from ..sim.soc_sim import simulated_soc
from ..spec.engine2 import EngineParams2
from ..spec.errors import ConfigError

__all__ = ["SocBackend", "SocSimBackend", "load_soc_facts"]

#: A read's answer may wait behind a whole upload block in the simulation.
SIM_TIMEOUT_S = 300.0
#: The facts the driver needs from ``soc.json``.
_FACTS = ("csrs", "init", "main_ram_base", "main_ram_size", "engine_base", "clock_hz", "baud")


def load_soc_facts(path) -> dict:
    """The SoC's ``soc.json`` (written next to its bitstream by ``zipsgd synth --engine 2``).

    Raises
    ------
    ConfigError
        The file cannot be read, or it is not a SoC's ``soc.json``.
    """
    try:
        facts = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"expected the SoC's soc.json (zipsgd synth --engine 2 writes it "
                          f"next to the bitstream), found {path!r}: {error}") from None
    missing = [key for key in _FACTS if not isinstance(facts, dict) or key not in facts]
    if missing:
        raise ConfigError(f"expected the SoC's soc.json with {', '.join(_FACTS)}, found "
                          f"{path!r} without {', '.join(missing)}")
    return facts


class SocBackend(Engine2Backend):
    """A board programmed with the SoC's bitstream: its UART bridge on the serial port
    ``settings.port`` at the rate in ``settings.soc`` (its ``soc.json``), or its Etherbone
    bridge with ``settings.port`` ``udp[:IP[:PORT]]`` (``zipsgd.host.soc.parse_link``)."""

    name = "soc"

    def check(self, settings) -> None:
        super().check(settings)
        if not settings.port or not settings.soc:
            raise ConfigError(f"the soc backend needs the link (--port: a serial port, or udp "
                              f"for Etherbone) and the SoC's soc.json (--soc), found --port "
                              f"{settings.port} and --soc {settings.soc}")

    def run_epochs(self, settings, params: EngineParams2, jobs: list[EpochJob2],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        facts = load_soc_facts(settings.soc)
        words = link_max_words(settings.port, facts.get("etherbone"))
        link = litex_server(settings.port, facts["baud"], etherbone=facts.get("etherbone"))
        with link as port, RemoteBus(port=port, clock_hz=facts["clock_hz"],
                                     max_words=words) as bus:
            return run_soc_jobs(bus, facts, params, jobs, initial_model, progress)


class SocSimBackend(Engine2Backend):
    """The SoC (LiteDRAM with its SDRAM model, the engine, the host bridge) simulated by
    Verilator: by default its UART bridge, its serial lines on a pseudo-terminal that
    ``litex_server`` opens; with :attr:`bridge` ``"etherbone"``, its Etherbone bridge on a
    simulated wire (``zipsgd/sim/eth_pump.py``; ``litex_server`` then needs ``SO_REUSEADDR``)."""

    name = "soc-sim"
    bridge = "uart"

    def run_epochs(self, settings, params: EngineParams2, jobs: list[EpochJob2],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        with simulated_soc(params, bridge=self.bridge) as (link, facts), \
                litex_server(link, facts["baud"], etherbone=facts.get("etherbone")) as port, \
                RemoteBus(port=port, clock_hz=facts["clock_hz"], timeout_s=SIM_TIMEOUT_S,
                          max_words=link_max_words(link, facts.get("etherbone"))) as bus:
            return run_soc_jobs(bus, facts, params, jobs, initial_model, progress)
