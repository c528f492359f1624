"""``AxiReadUpConverter`` (``zipsgd/hw/soc.py``): a 64-bit AXI4 read master on a 128-bit slave,
in Migen's simulator.  Bursts of every length from 1 beat, at either half of a wide word, back
to back with several outstanding; the slave answers each wide burst after a latency, with
stalls on both sides.  Every narrow beat must be the word at its address, ``last`` on the
burst's last beat only, and the wide bursts must be the aligned covers of the narrow ones."""

from __future__ import annotations

import random

from litex.soc.interconnect import axi
from migen.sim import passive, run_simulation

from zipsgd.hw.soc import AxiReadUpConverter


def _word(address: int) -> int:
    """The 64-bit word at byte ``address`` (a multiple of 8)."""
    return (address * 0x9E37_79B9_7F4A_7C15 + 0x1234) % (1 << 64)


def test_every_burst_gets_exactly_its_beats():
    narrow = axi.AXIInterface(data_width=64, address_width=32, id_width=1)
    wide = axi.AXIInterface(data_width=128, address_width=32, id_width=1)
    dut = AxiReadUpConverter(narrow, wide, depth=4)
    rng = random.Random(5)
    bursts = [(0x1000 + 8 * rng.randrange(0, 512), rng.choice([1, 2, 3, 4, 7, 8, 16, 31]))
              for _ in range(60)]
    got, wide_bursts, pending = [], [], []

    def master_ar():
        for address, beats in bursts:
            yield narrow.ar.addr.eq(address)
            yield narrow.ar.len.eq(beats - 1)
            yield narrow.ar.size.eq(3)
            yield narrow.ar.burst.eq(1)
            yield narrow.ar.valid.eq(1)
            yield
            while not (yield narrow.ar.ready):
                yield
            yield narrow.ar.valid.eq(0)
            for _ in range(rng.choice([0, 0, 0, 2])):
                yield

    @passive
    def master_r():
        while True:
            ready = rng.random() < 0.8
            yield narrow.r.ready.eq(ready)
            yield
            if ready and (yield narrow.r.valid):
                got.append(((yield narrow.r.data), (yield narrow.r.last)))

    @passive
    def slave_ar():
        while True:
            ready = rng.random() < 0.7
            yield wide.ar.ready.eq(ready)
            yield
            if ready and (yield wide.ar.valid):
                burst = ((yield wide.ar.addr), (yield wide.ar.len) + 1, (yield wide.ar.size))
                wide_bursts.append(burst)
                pending.append(burst)

    @passive
    def slave_r():
        while True:
            if not pending:
                yield wide.r.valid.eq(0)
                yield
                continue
            address, beats, _ = pending.pop(0)
            for _ in range(rng.randrange(0, 20)):     # the DRAM's latency
                yield wide.r.valid.eq(0)
                yield
            for k in range(beats):
                base = address + 16 * k
                yield wide.r.data.eq(_word(base) | _word(base + 8) << 64)
                yield wide.r.last.eq(k == beats - 1)
                yield wide.r.valid.eq(1)
                yield
                while not (yield wide.r.ready):
                    yield
            yield wide.r.valid.eq(0)

    def watchdog():
        for _ in range(20_000):
            if len(got) == sum(b for _, b in bursts):
                return
            yield
        raise AssertionError(f"{len(got)} beats of {sum(b for _, b in bursts)} arrived")

    run_simulation(dut, [master_ar(), master_r(), slave_ar(), slave_r(), watchdog()])
    want = [(_word(a + 8 * k), int(k == n - 1)) for a, n in bursts for k in range(n)]
    assert got == want
    covers = [(a & ~15, (a % 16 // 8 + n + 1) // 2, 4) for a, n in bursts]
    assert wide_bursts == covers
