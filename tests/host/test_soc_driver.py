"""``zipsgd.host.soc``: the driver's bus operations, run by ``execute`` on a recording bus."""

from __future__ import annotations

import pytest

from zipsgd.host import soc
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.registers2 import MAP

CSRS = {"sdram_dfii_pi0_address": 0x10, "sdram_dfii_pi0_baddress": 0x14,
        "sdram_dfii_control": 0x18, "sdram_dfii_pi0_command": 0x1C,
        "sdram_dfii_pi0_command_issue": 0x20}


class Bus:
    def __init__(self, reads=()):
        self.log, self.reads = [], list(reads)

    def write(self, address, value):
        self.log.append(("w", address, value))

    def read(self, address):
        self.log.append(("r", address))
        return self.reads.pop(0)

    def wait(self, cycles):
        self.log.append(("wait", cycles))


def test_dram_init_replays_the_sequence_then_hands_over():
    bus = Bus()
    soc.execute(soc.dram_init(CSRS, [(0, 0, 0x0E, None, 100), (0x400, 1, None, 0x0B, 0)], 1),
                bus)
    assert bus.log == [("w", 0x10, 0), ("w", 0x14, 0), ("w", 0x18, 0x0E), ("wait", 100),
                       ("w", 0x10, 0x400), ("w", 0x14, 1), ("w", 0x1C, 0x0B), ("w", 0x20, 1),
                       ("w", 0x18, 1)]


def test_upload_writes_little_endian_words_padded():
    bus = Bus()
    soc.execute(soc.upload(0x100, bytes(range(1, 7))), bus)
    assert bus.log == [("w", 0x100, 0x04030201), ("w", 0x104, 0x0605)]
    with pytest.raises(ConfigError, match="multiple of 4"):
        soc.execute(soc.upload(0x102, b"x"), bus)


def test_memory_run_starts_and_polls_until_the_run_ends():
    base = 0x8000_0000
    status = base + MAP.register("STATUS").offset
    bus = Bus(reads=[soc.RUNNING | 1, soc.RUNNING | 1, 2])
    soc.execute(soc.memory_run(base, 0x4000_1000, 64, 3, 64, poll=8), bus)
    writes = [e for e in bus.log if e[0] == "w"]
    assert writes[-1] == ("w", base + MAP.register("CTRL").offset, 1 << 3)
    assert ("w", base + MAP.register("RUN_EPOCHS").offset, 3) in writes
    assert [e for e in bus.log if e[0] != "w"] == [("r", status), ("wait", 8), ("r", status),
                                                  ("wait", 8), ("r", status)]


def test_read_model_sign_extends():
    bus = Bus(reads=[5, 0xFFFF_FFFE])
    assert soc.execute(soc.read_model(0, 2), bus) == [5, -2]
