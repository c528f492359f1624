"""The SoC's bus as the host sees it (``zipsgd/hw/soc.py`` builds it, ``zipsgd/host/soc.py``
drives it): where the engine's registers are, where LiteX puts the DRAM, and LiteDRAM's DFII
control word that hands the DRAM to its controller after the host's init sequence."""

from __future__ import annotations

__all__ = ["ENGINE_BASE", "MAIN_RAM_BASE", "DFII", "DFII_SEL", "SYSTEM_CLOCK_HZ"]

#: Where the engine's registers are on the SoC bus.
ENGINE_BASE = 0x8000_0000
#: LiteX's default place of the DRAM on the bus (``main_ram``).
MAIN_RAM_BASE = 0x4000_0000
#: LiteDRAM's DFII control and command bits (``litedram/init.py``'s C header).
DFII = {"DFII_CONTROL_SEL": 0x01, "DFII_CONTROL_CKE": 0x02, "DFII_CONTROL_ODT": 0x04,
        "DFII_CONTROL_RESET_N": 0x08, "DFII_COMMAND_CS": 0x01, "DFII_COMMAND_WE": 0x02,
        "DFII_COMMAND_CAS": 0x04, "DFII_COMMAND_RAS": 0x08, "DFII_COMMAND_WRDATA": 0x10,
        "DFII_COMMAND_RDDATA": 0x20}
#: DFII control: the controller, not the host, drives the DRAM (after the init sequence).
DFII_SEL = DFII["DFII_CONTROL_SEL"]

#: Each board SoC's system clock, which the engine runs on (``zipsgd/hw/board_soc.py``; the
#: performance presets, ``zipsgd/host/perf.py``).
SYSTEM_CLOCK_HZ = {"ulx3s-85f": 50_000_000, "orangecrab-85f": 48_000_000,
                   "ecpix5-85": 50_000_000}
