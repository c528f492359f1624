"""``zipsgd.host.soc``: the driver's bus operations, run by ``execute`` on a recording bus."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from zipsgd.host import soc
from zipsgd.host.backend import EpochJob2
from zipsgd.spec.engine2 import EngineParams2, RunConfig2, lane_plan
from zipsgd.spec.errors import ConfigError, LinkError
from zipsgd.spec.registers import ENGINE_ID
from zipsgd.spec.registers2 import ENGINE_VERSION2, MAP
from zipsgd.spec.soc import ENGINE_BASE, MAIN_RAM_BASE

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
    bus = Bus()  # (no write_block: execute writes a block word by word)
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


class BlockBus(Bus):
    def write_block(self, address, words):
        self.log.append(("block", address, len(words)))


def test_upload_goes_in_blocks_the_bridge_carries():
    bus = BlockBus()
    soc.execute(soc.upload(0x4000_0000, bytes(4 * 300)), bus)
    assert bus.log == [("block", 0x4000_0000, soc.BLOCK_WORDS),
                       ("block", 0x4000_0000 + 4 * soc.BLOCK_WORDS, 300 - soc.BLOCK_WORDS)]


class Memory:
    """A bus over a dict of words, with the engine's identity registers."""

    def __init__(self, ident, params, broken_dram=False):
        self.words = {ENGINE_BASE + MAP.register("ID").offset: ident,
                      ENGINE_BASE + MAP.register("VERSION").offset: ENGINE_VERSION2,
                      ENGINE_BASE + MAP.register("BUS_WIDTH").offset: params.bus_width,
                      ENGINE_BASE + MAP.register("MAX_FEATURES").offset: params.max_features,
                      ENGINE_BASE + MAP.register("MAX_BATCH").offset: params.max_batch}
        self.broken = broken_dram

    def write(self, address, value):
        self.words[address] = value ^ (1 if self.broken and address >= MAIN_RAM_BASE
                                       and address < ENGINE_BASE else 0)

    def read(self, address):
        return self.words.get(address, 0)

    def wait(self, cycles):
        pass


def test_the_engine_and_the_dram_are_checked():
    params = EngineParams2(64, 4096, 512)
    soc.execute(soc.check_engine(ENGINE_BASE, params), Memory(ENGINE_ID, params))
    with pytest.raises(LinkError, match="expected the zipsgd engine .* found ID 0x00000000"):
        soc.execute(soc.check_engine(ENGINE_BASE, params), Memory(0, params))
    with pytest.raises(LinkError, match=f"needs an engine with version {ENGINE_VERSION2}, "
                                        "bus_width 64, max_features 4096, max_batch 512; the "
                                        "bitstream's has .*max_features 8192"):
        soc.execute(soc.check_engine(ENGINE_BASE, params),
                    Memory(ENGINE_ID, EngineParams2(64, 8192, 512)))
    soc.execute(soc.check_dram(MAIN_RAM_BASE), Memory(ENGINE_ID, params))
    with pytest.raises(LinkError, match="the DRAM failed its check after init: 0x40000000 "
                                        "reads"):
        soc.execute(soc.check_dram(MAIN_RAM_BASE), Memory(ENGINE_ID, params, broken_dram=True))


def test_no_server_and_no_serial_port_are_link_errors(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    with pytest.raises(LinkError, match=f"litex_server at localhost:{port} cannot be reached"):
        soc.RemoteBus(port=port)
    with pytest.raises(LinkError, match="litex_server on .*ttyNONE ended at once"), \
            soc.litex_server(str(tmp_path / "ttyNONE"), 1_000_000):
        pass


def test_a_board_that_does_not_answer_is_a_link_error():
    """A server that takes requests and never answers (a board with another bitstream)."""
    with socket.socket() as server:
        server.bind(("localhost", 0))
        server.listen(1)
        port = server.getsockname()[1]
        accepted = []

        def serve():
            client, _ = server.accept()
            client.sendall(b"CommUART:localhost:0")
            accepted.append(client)

        thread = threading.Thread(target=serve)
        thread.start()
        with soc.RemoteBus(port=port, timeout_s=0.3) as bus:
            thread.join()
            bus.write(0x100, 5)                   # (writes are not answered)
            with pytest.raises(LinkError, match="did not answer within 0.3 s"):
                bus.read(0x100)
        accepted[0].close()


class CountingMemory(Memory):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks = []

    def write_block(self, address, words):
        self.blocks.append(address)
        for k, word in enumerate(words):
            self.write(address + 4 * k, word)


def test_a_run_uploads_each_distinct_stream_once_and_checks_its_size():
    params = EngineParams2(64, 4096, 512)
    config = RunConfig2(n_features=4)
    plan = lane_plan(config, params, 8)
    one, two = np.arange(64, dtype=np.uint8), np.arange(64, 128, dtype=np.uint8)
    jobs = [EpochJob2(config, plan, one), EpochJob2(config, plan, one),
            EpochJob2(config, plan, two)]
    facts = {"engine_base": ENGINE_BASE, "main_ram_base": MAIN_RAM_BASE,
             "main_ram_size": 1 << 20, "csrs": CSRS, "init": []}
    bus = CountingMemory(ENGINE_ID, params)
    done = []
    results = soc.run_soc_jobs(bus, facts, params, jobs, [0] * 4, done.append)
    # The DRAM check's block, then the uploads of the first and third epochs' streams.
    assert bus.blocks == [MAIN_RAM_BASE] * 3 and done == [1, 2, 3]
    assert [r["upload_s"] > 0 for r in results] == [True, False, True]
    assert bus.words[MAIN_RAM_BASE + 60] == int.from_bytes(bytes(range(124, 128)), "little")
    with pytest.raises(ConfigError, match="the packed stream is 64 bytes; the board's DRAM "
                                          "holds 32"):
        soc.run_soc_jobs(bus, facts | {"main_ram_size": 32}, params, jobs, [0] * 4)


def test_an_upload_that_does_not_land_is_a_link_error():
    with pytest.raises(LinkError, match="the upload did not land: 0x40000004 reads 0x00000000, "
                                        "0x00000605 was written"):
        soc.execute(soc.check_upload(MAIN_RAM_BASE, bytes(range(1, 7))), Bus(reads=[0]))


ETHERBONE = {"ip": "192.168.1.50", "port": 1234}


@pytest.mark.parametrize(("link", "what", "options"), [
    ("/dev/ttyUSB0", "/dev/ttyUSB0", ["--uart", "--uart-port", "/dev/ttyUSB0"]),
    ("udp", "Etherbone 192.168.1.50:1234",
     ["--udp", "--udp-ip", "192.168.1.50", "--udp-port", "1234"]),
    ("udp:10.0.0.7", "Etherbone 10.0.0.7:1234",
     ["--udp", "--udp-ip", "10.0.0.7", "--udp-port", "1234"]),
    ("udp:10.0.0.7:4000", "Etherbone 10.0.0.7:4000",
     ["--udp", "--udp-ip", "10.0.0.7", "--udp-port", "4000"]),
])
def test_a_link_is_a_serial_port_or_etherbone(link, what, options):
    assert soc.parse_link(link, ETHERBONE) == (what, options)


@pytest.mark.parametrize(("link", "etherbone", "message"), [
    ("udp", None, "this SoC has no Etherbone bridge"),
    ("udp:10.0.0", ETHERBONE, "expected udp, udp:IP or udp:IP:PORT"),
    ("udp:10.0.0.7:0", ETHERBONE, "found --port udp:10.0.0.7:0"),
    ("udp:10.0.0.7:1:2", ETHERBONE, "expected udp, udp:IP or udp:IP:PORT"),
    ("udp:host.example:1234", ETHERBONE, "an IPv4 address"),
])
def test_a_bad_etherbone_link_is_named(link, etherbone, message):
    with pytest.raises(ConfigError, match=message):
        soc.parse_link(link, etherbone)


def test_a_write_record_carries_what_the_link_takes():
    assert soc.link_max_words("/dev/ttyUSB0", ETHERBONE) == soc.BLOCK_WORDS == 255
    assert soc.link_max_words("udp", ETHERBONE | {"max_words": 16}) == 16
    with pytest.raises(ConfigError, match="etherbone entry with max_words .*build the SoC again"):
        soc.link_max_words("udp:10.0.0.7", ETHERBONE)


def test_an_etherbone_board_that_does_not_answer_its_probe_is_a_link_error():
    """litex_server --udp probes the board first (ten tries of a second); nothing answers at
    a documentation address (TEST-NET-1), or it has no route here: either way the server
    ends, and its last words are in the message."""
    with pytest.raises(LinkError, match="litex_server on Etherbone 192.0.2.1:1234 ended at "
                                        "once: .*(Unable to probe Etherbone server|unreachable)"):
        with soc.litex_server("udp:192.0.2.1", 0, etherbone=ETHERBONE):
            pass
