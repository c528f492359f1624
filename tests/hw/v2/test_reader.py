"""``hw.v2.reader.MemoryReader`` against a Python AXI4 memory with DRAM-like latency: the
beats of every epoch in order with ``last`` on each epoch's final one, the AXI4 read rules
(bursts within a 4 KiB page and ``READER_BURST`` beats, AR held until taken, at most
``READER_OUTSTANDING`` bursts in flight), the FIFO never overrun, read errors and aborts,
and the bandwidth kept."""

from __future__ import annotations

import random
from collections import deque

import pytest
from sim_support import simulate

from zipsgd.hw.axi import PAGE_BYTES
from zipsgd.hw.v2.reader import MemoryReader
from zipsgd.spec.engine2 import READER_BURST, READER_OUTSTANDING


class Memory:
    """An AXI4 read slave: each burst's data starts ``latency`` cycles (20-100, random) after
    its AR, in order; ``ar_busy``/``r_gap`` the probabilities of arready low and of an R gap;
    a beat whose address is in ``bad`` is answered SLVERR."""

    def __init__(self, rng, width, words, *, ar_busy=0.0, r_gap=0.0, bad=()):
        self.rng, self.bpb, self.words = rng, width // 8, words
        self.ar_busy, self.r_gap, self.bad = ar_busy, r_gap, set(bad)
        self.bursts: deque = deque()           # [ready cycle, address, beats left]
        self.arready = 0
        self.r = None                          # (data, resp, last) offered this cycle
        self.ars: list[tuple[int, int]] = []   # (address, beats) of every AR taken

    def drive(self, ctx, dut, cycle):
        bus = dut.bus
        self.arready = int(self.rng.random() >= self.ar_busy)
        ctx.set(bus.arready, self.arready)
        self.r = None
        head = self.bursts[0] if self.bursts else None
        if head and head[0] <= cycle and self.rng.random() >= self.r_gap:
            addr = head[1]
            self.r = (self.words.get(addr // self.bpb, 0), 2 if addr in self.bad else 0,
                      int(head[2] == 1))
        ctx.set(bus.rvalid, int(self.r is not None))
        if self.r:
            ctx.set(bus.rdata, self.r[0])
            ctx.set(bus.rresp, self.r[1])
            ctx.set(bus.rlast, self.r[2])

    def clock(self, ctx, dut, cycle):
        """After the signals settle, before the edge: take what the handshakes move."""
        bus = dut.bus
        if ctx.get(bus.arvalid) and self.arready:
            addr, beats = ctx.get(bus.araddr), ctx.get(bus.arlen) + 1
            assert ctx.get(bus.arsize) == (self.bpb.bit_length() - 1)
            assert ctx.get(bus.arburst) == 1 and ctx.get(bus.arid) == 0
            assert addr % self.bpb == 0 and 1 <= beats <= READER_BURST
            assert addr // PAGE_BYTES == (addr + beats * self.bpb - 1) // PAGE_BYTES
            self.ars.append((addr, beats))
            self.bursts.append([cycle + 1 + self.rng.randint(20, 100), addr, beats])
        if self.r is not None:
            assert ctx.get(bus.rready)
            head = self.bursts[0]
            head[1] += self.bpb
            head[2] -= 1
            if head[2] == 0:
                self.bursts.popleft()


def run_reader(*, seed, width=64, base=0x0FC0, beats=50, epochs=3, ar_busy=0.2, r_gap=0.2,
               take=0.7, bad=(), abort_at=None, cycles=None):
    rng = random.Random(seed)
    dut = MemoryReader(width)
    bpb = width // 8
    words = {base // bpb + i: rng.getrandbits(width) for i in range(beats)}
    mem = Memory(rng, width, words, ar_busy=ar_busy, r_gap=r_gap, bad=bad)
    out: list[tuple[int, int]] = []
    log = {"ars": mem.ars, "out": out, "cycles": 0, "error": None, "first": None}

    async def bench(ctx):
        ctx.set(dut.base, base)
        ctx.set(dut.beats, beats)
        ctx.set(dut.epochs, epochs)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        received, held, quiet = 0, None, 0    # beats into the reader; AR held since
        limit = cycles or 200 * beats * epochs + 2000
        for cycle in range(limit):
            mem.drive(ctx, dut, cycle)
            ready = int(rng.random() < take)
            ctx.set(dut.beats_out.ready, ready)
            ctx.set(dut.abort, int(cycle == abort_at))
            if ctx.get(dut.beats_out.valid) and ready:
                out.append((ctx.get(dut.beats_out.payload.data),
                            ctx.get(dut.beats_out.payload.last)))
                if log["first"] is None:
                    log["first"] = cycle
            # The AR channel's rule: once valid, held with the same address until taken.
            if held is not None:
                assert ctx.get(dut.bus.arvalid) and \
                    (ctx.get(dut.bus.araddr), ctx.get(dut.bus.arlen)) == held
            arv = ctx.get(dut.bus.arvalid)
            held = (ctx.get(dut.bus.araddr), ctx.get(dut.bus.arlen)) \
                if arv and not mem.arready else None
            assert len(mem.bursts) + int(arv and mem.arready) <= READER_OUTSTANDING
            received += int(mem.r is not None)
            # What the FIFO holds never exceeds its depth (beats in, less beats out).
            assert received - len(out) <= dut.depth + 1
            mem.clock(ctx, dut, cycle)
            await ctx.tick()
            # (The FIFO's output follows its input a few cycles late.)
            quiet = quiet + 1 if not ctx.get(dut.busy) and not ctx.get(dut.beats_out.valid) \
                else 0
            if quiet == 4:
                break
        log["cycles"] = cycle - 3
        log["error"] = ctx.get(dut.error)
        assert not ctx.get(dut.busy)

    simulate(dut, bench)
    return log, [words[base // bpb + i] for i in range(beats)]


@pytest.mark.parametrize("seed", range(4))
def test_epochs_in_order_with_last(seed):
    log, words = run_reader(seed=seed, beats=[1, 7, 50, 700][seed], epochs=[5, 3, 3, 2][seed])
    epochs = [5, 3, 3, 2][seed]
    want = [(w, int(i == len(words) - 1)) for i, w in enumerate(words)] * epochs
    assert log["out"] == want
    assert not log["error"]
    # The bursts of an epoch cover its bytes in order, from base, never across a page.
    bpb = 8
    addrs = [a + k * bpb for a, n in log["ars"] for k in range(n)]
    assert addrs == [0x0FC0 + i * bpb for i in range(len(words))] * epochs


def test_slow_consumer_never_overruns_the_fifo():
    # The core takes a beat in eight: bursts wait for room, the R channel is never stalled.
    log, words = run_reader(seed=6, beats=600, epochs=2, take=0.12, ar_busy=0.0, r_gap=0.0)
    assert log["out"] == [(w, int(i == len(words) - 1)) for i, w in enumerate(words)] * 2


@pytest.mark.parametrize("width", [128, 512])
def test_wide_beats_and_page_ends(width):
    log, words = run_reader(seed=7, width=width, base=0x3000 - 3 * width // 8, beats=200,
                            epochs=1)
    assert [d for d, _ in log["out"]] == words
    assert max(n for _, n in log["ars"]) == READER_BURST


def test_read_error_ends_the_epoch_and_stops():
    # SLVERR on the 30th beat of the first epoch: the beats before it, then a zero beat
    # with last; nothing after; the error is reported.
    base, bpb = 0x1000, 8
    log, words = run_reader(seed=3, base=base, beats=40, epochs=3, bad={base + 29 * bpb})
    out = log["out"]
    assert log["error"]
    assert out[:29] == [(w, 0) for w in words[:29]]
    assert out[29:] == [(0, 1)]


def test_read_error_on_an_epochs_first_beat_adds_nothing():
    base = 0x2000
    log, words = run_reader(seed=4, base=base, beats=16, epochs=2, bad={base})
    assert log["error"] and log["out"] == []


def test_abort_stops_issuing_and_drains():
    log, words = run_reader(seed=5, beats=400, epochs=4, abort_at=300, take=1.0)
    assert not log["error"]
    assert len(log["out"]) < 400 * 4
    assert log["out"] == [(w, int(i == len(words) - 1)) for i, w in enumerate(words)
                          ][:len(log["out"])]


def test_bandwidth_with_dram_latency():
    # A consumer that always takes, a memory with 20-100 cycles of latency and no gaps: the
    # reader keeps the R channel busy (>= 0.95 beats per cycle from the first beat).
    beats, epochs = 2000, 2
    log, _ = run_reader(seed=11, beats=beats, epochs=epochs, ar_busy=0.0, r_gap=0.0,
                        take=1.0)
    rate = beats * epochs / (log["cycles"] - log["first"])
    assert rate >= 0.95, rate


def test_burst_is_checked():
    with pytest.raises(ValueError, match="burst must be a power of two in 1..64"):
        MemoryReader(512, burst=128)
