"""``zipsgd.host.leveling``: the host's read leveling of the ECP5 DDR3 PHY, against a model of
that PHY's read path behind LiteDRAM's DFII CSRs.

LiteDRAM has no simulation model of the ECP5 PHY's I/O (its DQS delay line and bitslip), so
these tests stand a behavioural one in its place: a byte lane reads back what was written only
at its bitslip and within its window of delay taps, and its bits are scrambled elsewhere.  The
CSR map, widths and phases are the OrangeCrab SoC's (``tests/hw/v2/test_board_soc.py`` checks
them on the generated SoC).
"""

from __future__ import annotations

import pytest

from zipsgd.host import soc
from zipsgd.host.leveling import needs_read_leveling, pattern_errors, read_leveling
from zipsgd.spec.errors import LinkError
from zipsgd.spec.soc import DFII, DFII_SEL

PHY = {"type": "ECP5DDRPHY", "memtype": "DDR3", "databits": 16, "dfi_databits": 64,
       "nphases": 2, "rdphase": 0, "wrphase": 1, "read_leveling": True, "delays": 8,
       "bitslips": 4}
_NAMES = ["ddrphy_dly_sel", "ddrphy_rdly_dq_rst", "ddrphy_rdly_dq_inc",
          "ddrphy_rdly_dq_bitslip_rst", "ddrphy_rdly_dq_bitslip", "ddrphy_burstdet_clr",
          "ddrphy_burstdet_seen", "sdram_dfii_control"]
CSRS = {name: 0x800 + 4 * k for k, name in enumerate(_NAMES)}
for _p in range(2):
    for _k, _name in enumerate(["command", "command_issue", "address", "baddress"]):
        CSRS[f"sdram_dfii_pi{_p}_{_name}"] = 0x1000 + 0x40 * _p + 4 * _k
    CSRS[f"sdram_dfii_pi{_p}_wrdata"] = 0x1000 + 0x40 * _p + 0x10   # two words, MSW first
    CSRS[f"sdram_dfii_pi{_p}_rddata"] = 0x1000 + 0x40 * _p + 0x18
_LANE = [sum(0xFF << (16 * beat + 8 * m) for beat in range(4)) for m in range(2)]


class Ecp5ReadPath:
    """DFII CSRs and the PHY's per-lane read delay and bitslip.  ``windows[m]`` is lane
    ``m``'s ``{bitslip: range of working delay taps}``."""

    def __init__(self, windows, deaf=()):
        self.windows, self.deaf = windows, set(deaf)
        self.words = dict.fromkeys(CSRS.values(), 0)
        self.words.update({CSRS[f"sdram_dfii_pi{p}_{d}"] + 4: 0
                           for p in range(2) for d in ("wrdata", "rddata")})
        self.delay, self.bitslip = [0, 0], [0, 0]
        self.row, self.stored, self.seen = None, None, 0
        self.control_log, self.log = [], []

    def _wide(self, name):
        base = CSRS[name]
        return self.words[base] << 32 | self.words[base + 4]

    def _set_wide(self, name, value):
        base = CSRS[name]
        self.words[base], self.words[base + 4] = value >> 32, value & 0xFFFF_FFFF

    def _lanes(self):
        return [m for m in range(2) if self.words[CSRS["ddrphy_dly_sel"]] >> m & 1]

    def write(self, address, value):
        self.log.append(("w", address, value))
        self.words[address] = value
        name = next((n for n, a in CSRS.items() if a == address), None)
        for m in self._lanes():
            if name == "ddrphy_rdly_dq_rst":
                self.delay[m] = 0
            elif name == "ddrphy_rdly_dq_inc":
                self.delay[m] = min(self.delay[m] + 1, PHY["delays"] - 1)
            elif name == "ddrphy_rdly_dq_bitslip_rst":
                self.bitslip[m] = 0
            elif name == "ddrphy_rdly_dq_bitslip":
                self.bitslip[m] = (self.bitslip[m] + 1) % PHY["bitslips"]
        if name == "ddrphy_burstdet_clr":
            self.seen = 0
        elif name == "sdram_dfii_control":
            self.control_log.append(value)
        elif name and name.endswith("_command_issue"):
            self._command(int(name[len("sdram_dfii_pi")]))

    def _command(self, phase):
        assert not self.words[CSRS["sdram_dfii_control"]] & DFII_SEL  # software control
        command = self.words[CSRS[f"sdram_dfii_pi{phase}_command"]]
        if command == DFII["DFII_COMMAND_RAS"] | DFII["DFII_COMMAND_CS"]:
            self.row = self.words[CSRS[f"sdram_dfii_pi{phase}_address"]]
        elif command & DFII["DFII_COMMAND_WRDATA"]:
            assert phase == PHY["wrphase"] and self.row is not None
            self.stored = [self._wide(f"sdram_dfii_pi{p}_wrdata") for p in range(2)]
        elif command & DFII["DFII_COMMAND_RDDATA"]:
            assert phase == PHY["rdphase"] and self.row is not None
            for p in range(2):
                value = self.stored[p]
                for m in range(2):
                    if self.delay[m] not in self.windows[m].get(self.bitslip[m], ()):
                        value ^= _LANE[m] & (0x5A5A_A5A5_0FF0_F00F >> self.delay[m])
                self._set_wide(f"sdram_dfii_pi{p}_rddata", value)
            self.seen = sum(1 << m for m in range(2) if m not in self.deaf)
        elif command & DFII["DFII_COMMAND_WE"] and command & DFII["DFII_COMMAND_RAS"]:
            self.row = None  # precharge

    def read(self, address):
        if address == CSRS["ddrphy_burstdet_seen"]:
            return self.seen
        return self.words[address]

    def wait(self, cycles):
        pass


WINDOWS = [{1: range(2, 6), 3: range(0, 2)}, {2: range(3, 8)}]


def test_each_lane_gets_its_bitslip_and_the_middle_of_its_window():
    phy = Ecp5ReadPath(WINDOWS)
    chosen = soc.execute(read_leveling(CSRS, PHY), phy)
    assert chosen == [(1, 3, 4), (2, 5, 5)]
    assert phy.bitslip == [1, 2] and phy.delay == [3, 5]
    assert phy.words[CSRS["ddrphy_dly_sel"]] == 0


def test_the_pattern_counts_only_its_own_lanes_bits():
    phy = Ecp5ReadPath([{0: range(8)}, {}])
    assert soc.execute(pattern_errors(CSRS, PHY, 0), phy) == 0
    assert soc.execute(pattern_errors(CSRS, PHY, 1), phy) > 0


def test_a_lane_without_a_read_burst_fails_every_tap():
    phy = Ecp5ReadPath(WINDOWS, deaf=[1])
    with pytest.raises(LinkError, match="byte lane 1 reads its pattern back at no read delay"):
        soc.execute(read_leveling(CSRS, PHY), phy)


def test_a_lane_that_never_reads_back_is_a_calibration_failure():
    phy = Ecp5ReadPath([WINDOWS[0], {}])
    with pytest.raises(LinkError) as error:
        soc.execute(read_leveling(CSRS, PHY), phy)
    message = str(error.value)
    assert "\n" not in message and "DRAM read leveling failed: byte lane 1" in message
    assert "bitslip 3: [" in message and "power-cycle the board" in message


def test_init_levels_before_the_controller_takes_the_dram():
    phy = Ecp5ReadPath(WINDOWS)
    init = [(0, 0, 0x0E, None, 100)]
    chosen = soc.execute(soc.dram_init(CSRS, init, DFII_SEL, PHY), phy)
    assert chosen == [(1, 3, 4), (2, 5, 5)]
    assert phy.control_log[0] == 0x0E and phy.control_log[-1] == DFII_SEL
    assert phy.control_log.count(DFII_SEL) == 1   # handed over once, at the end


def test_which_phys_the_host_levels():
    assert not needs_read_leveling({"type": "GENSDRPHY", "read_leveling": False})
    assert not needs_read_leveling({"type": "SDRAMPHYModel", "read_leveling": False})
    assert needs_read_leveling(PHY)
    with pytest.raises(LinkError, match="S7DDRPHY needs read leveling, which this driver does "
                                        "for ECP5DDRPHY only"):
        needs_read_leveling({"type": "S7DDRPHY", "read_leveling": True})
