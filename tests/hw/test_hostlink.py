"""The UART and the host-link bridge (``zipsgd/hw/uart.py``, ``zipsgd/hw/hostlink.py``) in
Amaranth's simulator.

A cycle-stepped bench drives the bridge's ``rx`` line bit by bit from request bytes, decodes its
``tx`` line into reply bytes, answers its AXI4-Lite master from a register dictionary (with
SLVERR for chosen offsets) and takes stream beats with a seeded ``tready`` pattern.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from zipsgd.hw.hostlink import HostLinkBridge, LinkParams
from zipsgd.hw.uart import UartRx, UartTx, check_divisor
from zipsgd.spec import link
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.link import Code, Command, Frame, Reply

W = 64
LINK = LinkParams(divisor=4, gap_timeout=200, ready_timeout=40)


def line_bits(data: bytes, divisor: int) -> list[int]:
    """The 8N1 line level, one entry per clock, for ``data`` sent back to back."""
    out = []
    for byte in data:
        for bit in [0] + [(byte >> k) & 1 for k in range(8)] + [1]:
            out += [bit] * divisor
    return out


class LineDecoder:
    """A software UART receiver sampling the line once per clock."""

    def __init__(self, divisor: int):
        self.divisor, self.timer, self.bits, self.out = divisor, None, [], bytearray()

    def sample(self, level: int):
        if self.timer is None:
            if level == 0:
                self.timer, self.bits = self.divisor // 2, []
            return
        self.timer -= 1
        if self.timer == 0:
            self.bits.append(level)
            self.timer = self.divisor
            if len(self.bits) == 10:
                assert self.bits[0] == 0 and self.bits[9] == 1, f"bad UART frame {self.bits}"
                self.out.append(sum(b << k for k, b in enumerate(self.bits[1:9])))
                self.timer = None


class Bench:
    """The bridge with a register dictionary behind its AXI4-Lite master and a stream sink."""

    def __init__(self, ready_probability: float = 0.7, seed: int = 0, refuse=(),
                 link_params: LinkParams = LINK):
        self.dut = HostLinkBridge(W, link_params)
        self.link = link_params
        self.regs: dict[int, int] = {}
        self.reads: list[int] = []
        self.refuse = set(refuse)
        self.beats: list[tuple[int, int]] = []
        self.ready_probability = ready_probability
        self.rng = np.random.default_rng(seed)
        self.rx = LineDecoder(link_params.divisor)
        self.holds: list[tuple[int, int]] = []  # (data, last) offered while not ready

    def run(self, schedule: list[list[int]], replies: int, max_cycles: int = 200_000):
        """Send each entry of ``schedule`` (line levels) after the previous reply count is
        reached; stop after ``replies`` reply frames."""
        dut, result = self.dut, {}

        async def bench(ctx):
            axil = dut.axil
            parser = link.ReplyParser()
            got, levels, step = [], [], 0
            read_resp = write_resp = None
            offered = None
            for _ in range(max_cycles):
                if not levels and step < len(schedule) and len(got) >= step:
                    levels = list(schedule[step])
                    step += 1
                ctx.set(dut.rx, levels.pop(0) if levels else 1)
                ready = int(self.rng.random() < self.ready_probability)
                ctx.set(dut.m_axis_tready, ready)
                ctx.set(axil.arready, read_resp is None)
                ctx.set(axil.awready, write_resp is None)
                ctx.set(axil.wready, write_resp is None)
                ctx.set(axil.rvalid, read_resp is not None)
                ctx.set(axil.bvalid, write_resp is not None)
                if read_resp is not None:
                    ctx.set(axil.rdata, read_resp[0])
                    ctx.set(axil.rresp, read_resp[1])
                if write_resp is not None:
                    ctx.set(axil.bresp, write_resp)
                # Handshakes of this cycle (values before the edge).
                if ctx.get(dut.m_axis_tvalid):
                    beat = (ctx.get(dut.m_axis_tdata), ctx.get(dut.m_axis_tlast))
                    if offered is not None:
                        assert beat == offered, "beat changed while not accepted"
                    offered = beat
                    if ready:
                        self.beats.append(beat)
                        offered = None
                if read_resp is not None and ctx.get(axil.rready):
                    read_resp = None
                elif read_resp is None and ctx.get(axil.arvalid):
                    addr = ctx.get(axil.araddr)
                    self.reads.append(addr)
                    read_resp = ((0, 2) if addr in self.refuse
                                 else (self.regs.get(addr, addr * 3 + 1), 0))
                if write_resp is not None and ctx.get(axil.bready):
                    write_resp = None
                elif write_resp is None and ctx.get(axil.awvalid):
                    assert ctx.get(axil.wvalid) and ctx.get(axil.wstrb) == 0xF
                    addr = ctx.get(axil.awaddr)
                    write_resp = 2 if addr in self.refuse else 0
                    if not write_resp:
                        self.regs[addr] = ctx.get(axil.wdata)
                self.rx.sample(ctx.get(dut.tx))
                got += parser.feed(bytes(self.rx.out))
                self.rx.out.clear()
                if len(got) >= replies and not ctx.get(dut.busy):
                    break
                await ctx.tick()
            result["replies"] = got

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(bench)
        sim.run()
        return result["replies"]


def request(command, payload=b"", seq=1) -> list[int]:
    return line_bits(link.encode_request(Frame(command, seq, payload)), LINK.divisor)


def test_hardware_crc_equals_spec():
    """The bridge's CRC hardware (``link.CRC.create()``, driven as the bridge drives it: start,
    then a byte per ``valid``) follows ``link.crc16`` byte by byte over whole frames, and its
    residue test passes at the end of an intact frame only."""
    rng = np.random.default_rng(1)
    frames = [link.encode_request(Frame(Command.READ, 7, link.encode_read(0x10, 3))),
              link.encode_reply(Reply(Command.WRITE, 255, Code.OK)),
              link.encode_request(Frame(Command.STREAM, 0, rng.bytes(300)))]
    frames.append(frames[-1][:40] + bytes([frames[-1][40] ^ 0x10]) + frames[-1][41:])
    dut = link.CRC.create()
    checked = []

    async def bench(ctx):
        for frame in frames:
            body = frame[1:]
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            assert ctx.get(dut.crc) == link.crc16(b"") == 0xFFFF
            for k, byte in enumerate(body):
                ctx.set(dut.data, byte)
                ctx.set(dut.valid, 1)
                await ctx.tick()
                ctx.set(dut.valid, 0)
                await ctx.tick()   # idle cycles between bytes, as on the UART
                assert ctx.get(dut.crc) == link.crc16(body[:k + 1])
                if k < len(body) - 1:
                    assert not ctx.get(dut.match_detected)
            checked.append(ctx.get(dut.match_detected))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert checked == [1, 1, 1, 0]


@pytest.mark.parametrize("divisor", [4, 5, 13])
def test_uart_loopback_every_byte(divisor):
    m = Module()
    m.submodules.tx = tx = UartTx(divisor)
    m.submodules.rx = rx = UartRx(divisor)
    m.d.comb += rx.rx.eq(tx.tx)
    received = []

    async def bench(ctx):
        pending = list(range(256))
        for _ in range(256 * 12 * divisor):
            if pending and ctx.get(tx.ready):
                ctx.set(tx.data, pending[0])
                ctx.set(tx.valid, 1)
                pending.pop(0)
            else:
                ctx.set(tx.valid, 0)
            if ctx.get(rx.valid):
                received.append(ctx.get(rx.data))
            assert not ctx.get(rx.frame_error)
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert received == list(range(256))


def test_divisor_and_timeouts_checked():
    with pytest.raises(ConfigError, match="divisor"):
        check_divisor(3)
    with pytest.raises(ConfigError, match="gap_timeout"):
        LinkParams(divisor=8, gap_timeout=100, ready_timeout=100)
    assert LinkParams.for_board(100.0, 115200).divisor == 868
    with pytest.raises(ConfigError, match="baud"):
        LinkParams.for_board(25.0, 12_000_000)


def test_write_then_read_words():
    bench = Bench()
    words = [0x11223344, 0xDEADBEEF, 7]
    replies = bench.run([request(Command.WRITE, link.encode_write(0x40, words, increment=True),
                                 seq=5),
                         request(Command.READ, link.encode_read(0x40, 3, increment=True),
                                 seq=6),
                         request(Command.READ, link.encode_read(0xC4, 2), seq=7)], 3)
    assert bench.regs == {0x40: words[0], 0x44: words[1], 0x48: words[2]}
    assert replies[0] == link.Reply(Command.WRITE, 5, Code.OK, b"")
    assert replies[1] == link.Reply(Command.READ, 6, Code.OK,
                                    b"".join(v.to_bytes(4, "little") for v in words))
    assert replies[2].code == Code.OK and bench.reads[-2:] == [0xC4, 0xC4]


def test_stream_burst_held_until_ready():
    rng = np.random.default_rng(3)
    beats = [int(v) for v in rng.integers(0, 1 << 63, 20, dtype=np.int64)] + [(1 << 64) - 1]
    lasts = [k % 3 == 2 for k in range(len(beats))]
    bench = Bench(ready_probability=0.4, seed=4)
    replies = bench.run([request(Command.STREAM, link.encode_beats(beats, lasts, W))], 1)
    assert replies == [link.Reply(Command.STREAM, 1, Code.OK, b"")]
    assert bench.beats == [(b, int(last)) for b, last in zip(beats, lasts, strict=True)]


def test_bad_frames_have_no_effect_and_link_recovers():
    good = link.encode_request(Frame(Command.WRITE, 9, link.encode_write(0x40, [5])))
    corrupt = bytearray(good)
    corrupt[7] ^= 0x10
    lost = good[:6] + good[7:]
    bench = Bench()
    replies = bench.run([line_bits(bytes(corrupt), LINK.divisor),
                         line_bits(lost, LINK.divisor),
                         request(0x7E, b"xy", seq=3),
                         request(Command.READ, b"\x40\x00\x00\x00", seq=4),   # COUNT 0
                         request(Command.STREAM, bytes(10), seq=5),           # not whole beats
                         line_bits(good, LINK.divisor)], 6)
    codes = [(r.code, r.detail) for r in replies]
    assert codes == [(Code.BAD_CRC, 0), (Code.GAP_TIMEOUT, len(lost) - 1),
                     (Code.BAD_COMMAND, 0x7E), (Code.BAD_LENGTH, 0), (Code.BAD_LENGTH, 0),
                     (Code.OK, 0)]
    assert bench.regs == {0x40: 5} and bench.beats == []


def test_overlong_length_is_drained():
    header = bytes([link.SOF, Command.WRITE, 1]) + (link.MAX_PAYLOAD + 1).to_bytes(2, "little")
    bench = Bench()
    replies = bench.run([line_bits(header + bytes(30), LINK.divisor),
                         request(Command.READ, link.encode_read(0x0), seq=2)], 2)
    assert [r.code for r in replies] == [Code.BAD_LENGTH, Code.OK]


def test_slverr_and_not_ready():
    bench = Bench(refuse={0x48}, ready_probability=0.0)
    replies = bench.run([request(Command.WRITE, link.encode_write(0x40, [1, 2, 3, 4], True)),
                         request(Command.STREAM, link.encode_beats([1, 2], [0, 1], W), seq=2)],
                        2)
    assert [(r.code, r.detail) for r in replies] == [(Code.BUS_ERROR, 2), (Code.NOT_READY, 0)]
    assert bench.regs == {0x40: 1, 0x44: 2}
