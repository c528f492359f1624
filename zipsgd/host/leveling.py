"""Read leveling of a DDR3 PHY from the host: the ECP5 DDR3 PHY's read delay and bitslip per
byte lane, found by writing and reading a pattern through LiteDRAM's DFII (``docs/HARDWARE.md``,
"The board SoCs").

A SoC with no CPU has no BIOS to level its DRAM, so the host does it after the init sequence,
while it still drives the DRAM (DFII software control), and before it hands the DRAM to the
controller.  For each byte lane (``module``) and each bitslip, every read delay tap is tried:
activate a test row, write a pattern with one burst, read it back with one burst, precharge,
and count the lane's wrong bits (and whether the PHY saw the read burst at all,
``burstdet_seen``).  The bitslip with the most working taps wins; the lane's delay is the
middle of its longest run of working taps.  A lane with no working tap at any bitslip raises
:class:`~zipsgd.spec.errors.LinkError` (the DRAM cannot be read: a calibration failure).

The steps are bus operations, as in :mod:`zipsgd.host.soc` (its :func:`~zipsgd.host.soc.execute`
runs them).  ``phy`` is the SoC's ``soc.json`` ``phy`` entry (:func:`zipsgd.hw.soc.dram_phy`);
``csrs`` its CSR map.
"""

from __future__ import annotations

from collections.abc import Generator

from ..spec.errors import LinkError
from ..spec.soc import DFII

__all__ = ["needs_read_leveling", "read_leveling", "pattern_errors", "LEVELED_PHYS"]

#: The PHYs whose read leveling the host does.
LEVELED_PHYS = ("ECP5DDRPHY",)
_ACTIVATE = DFII["DFII_COMMAND_RAS"] | DFII["DFII_COMMAND_CS"]
_PRECHARGE = DFII["DFII_COMMAND_RAS"] | DFII["DFII_COMMAND_WE"] | DFII["DFII_COMMAND_CS"]
_WRITE = (DFII["DFII_COMMAND_CAS"] | DFII["DFII_COMMAND_WE"] | DFII["DFII_COMMAND_CS"]
          | DFII["DFII_COMMAND_WRDATA"])
_READ = DFII["DFII_COMMAND_CAS"] | DFII["DFII_COMMAND_CS"] | DFII["DFII_COMMAND_RDDATA"]
#: Cycles after a DFII command before the next (the DRAM's tRCD, tRP, CL and the PHY's read
#: pipeline are all shorter at these clocks).
_SETTLE = 16


def needs_read_leveling(phy: dict) -> bool:
    """Whether the SoC's DRAM PHY must be read-leveled by the host.

    Raises
    ------
    LinkError
        It needs leveling this driver cannot do (a PHY other than :data:`LEVELED_PHYS`).
    """
    if not phy.get("read_leveling"):
        return False
    if phy["type"] not in LEVELED_PHYS:
        raise LinkError(f"the SoC's DRAM PHY {phy['type']} needs read leveling, which this "
                        f"driver does for {', '.join(LEVELED_PHYS)} only")
    return True


def _modules(phy: dict) -> int:
    return phy["databits"] // 8


def _words(phy: dict) -> int:
    """32-bit CSR words of one phase's DFI data (LiteX puts the most significant first)."""
    return -(-phy["dfi_databits"] // 32)


def _lane_mask(phy: dict, module: int) -> int:
    """The bits of byte lane ``module`` in one phase's DFI data: the phase carries
    ``dfi_databits / databits`` beats of the data bus, and the lane is a byte of each."""
    beats = phy["dfi_databits"] // phy["databits"]
    return sum(0xFF << (beat * phy["databits"] + 8 * module) for beat in range(beats))


def _pattern(phy: dict, seed: int) -> list[int]:
    """One phase word per DFI phase: a fixed pseudo-random pattern (a 64-bit LCG)."""
    width = phy["dfi_databits"]
    state, out = seed * 0x9E37_79B9_7F4A_7C15 + 1, []
    for _ in range(phy["nphases"]):
        word = 0
        for _ in range(-(-width // 32)):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            word = (word << 32) | (state >> 32)
        out.append(word % (1 << width))
    return out


def _command(csrs: dict, phase: int, command: int, address: int = 0) -> Generator:
    pi = f"sdram_dfii_pi{phase}"
    yield ("write", csrs[f"{pi}_address"], address)
    yield ("write", csrs[f"{pi}_baddress"], 0)
    yield ("write", csrs[f"{pi}_command"], command)
    yield ("write", csrs[f"{pi}_command_issue"], 1)
    yield ("wait", _SETTLE)


def pattern_errors(csrs: dict, phy: dict, module: int, seed: int = 1) -> Generator:
    """Write a pattern to row 0 of bank 0 in one burst, read it back in one, and return the
    wrong bits of byte lane ``module`` (plus one if the PHY saw no read burst on it)."""
    pattern = _pattern(phy, seed)
    words = _words(phy)
    yield from _command(csrs, 0, _ACTIVATE)
    for phase, value in enumerate(pattern):
        base = csrs[f"sdram_dfii_pi{phase}_wrdata"]
        for k in range(words):
            yield ("write", base + 4 * k, (value >> (32 * (words - 1 - k))) & 0xFFFF_FFFF)
    yield from _command(csrs, phy["wrphase"], _WRITE)
    yield ("write", csrs["ddrphy_burstdet_clr"], 1)
    yield from _command(csrs, phy["rdphase"], _READ)
    yield from _command(csrs, 0, _PRECHARGE, address=1 << 10)  # (A10: all banks)
    mask, errors = _lane_mask(phy, module), 0
    for phase, value in enumerate(pattern):
        base, got = csrs[f"sdram_dfii_pi{phase}_rddata"], 0
        for k in range(words):
            got = (got << 32) | (yield ("read", base + 4 * k))
        errors += bin((got ^ value) & mask).count("1")
    seen = yield ("read", csrs["ddrphy_burstdet_seen"])
    return errors + (0 if seen >> module & 1 else 1)


def _pulse(csrs: dict, module: int, name: str, times: int = 1) -> Generator:
    """Pulse the PHY's ``name`` CSR ``times`` times for byte lane ``module`` only."""
    yield ("write", csrs["ddrphy_dly_sel"], 1 << module)
    for _ in range(times):
        yield ("write", csrs[f"ddrphy_{name}"], 1)
    yield ("write", csrs["ddrphy_dly_sel"], 0)


def _longest_run(working: list[bool]) -> tuple[int, int]:
    """(start, length) of the longest run of True (the first of equal ones)."""
    best, start = (0, 0), None
    for k, ok in enumerate([*working, False]):
        if ok and start is None:
            start = k
        elif not ok and start is not None:
            best = max(best, (k - start, -start))
            start = None
    return -best[1], best[0]


def read_leveling(csrs: dict, phy: dict) -> Generator:
    """Level every byte lane's reads; returns ``[(bitslip, delay, working taps), ...]`` per
    lane, the lane's PHY left at that bitslip and delay.

    Raises
    ------
    LinkError
        A lane reads its pattern back at no delay of any bitslip (the message names it and
        the errors seen).
    """
    chosen = []
    for module in range(_modules(phy)):
        scans = []
        for bitslip in range(phy["bitslips"]):
            yield from _pulse(csrs, module, "rdly_dq_bitslip_rst")
            yield from _pulse(csrs, module, "rdly_dq_bitslip", bitslip)
            yield from _pulse(csrs, module, "rdly_dq_rst")
            errors = []
            for delay in range(phy["delays"]):
                errors.append((yield from pattern_errors(csrs, phy, module, seed=delay + 1)))
                yield from _pulse(csrs, module, "rdly_dq_inc")
            start, length = _longest_run([e == 0 for e in errors])
            scans.append((length, -sum(errors), bitslip, start, errors))
        length, _, bitslip, start, _ = max(scans, key=lambda s: (s[0], s[1], -s[2]))
        if length == 0:
            seen = "; ".join(f"bitslip {s[2]}: {s[4]}" for s in scans)
            raise LinkError(f"DRAM read leveling failed: byte lane {module} reads its pattern "
                            f"back at no read delay (wrong bits per delay tap, {seen}); the "
                            f"DRAM's calibration failed: power-cycle the board and retry")
        delay = start + (length - 1) // 2
        yield from _pulse(csrs, module, "rdly_dq_bitslip_rst")
        yield from _pulse(csrs, module, "rdly_dq_bitslip", bitslip)
        yield from _pulse(csrs, module, "rdly_dq_rst")
        yield from _pulse(csrs, module, "rdly_dq_inc", delay)
        chosen.append((bitslip, delay, length))
    return chosen
