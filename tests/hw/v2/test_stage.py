"""``hw.v2.stage``: ``WindowStage`` (order, no loss, one transfer per cycle, registered ready,
the ``hold`` protocol) and ``MirrorStage`` behind it, as the core uses them."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from sim_support import simulate

from zipsgd.hw.v2.stage import MirrorStage, WindowStage


@pytest.mark.parametrize("depth", [2, 4, 8])
@pytest.mark.parametrize("seed", range(4))
def test_order_and_no_loss_under_random_handshakes(seed, depth):
    dut = WindowStage(16, depth)
    rng = random.Random(seed)
    words = [rng.getrandbits(16) for _ in range(400)]
    got: list[int] = []

    async def bench(ctx):
        sent = 0
        for _ in range(2000):
            valid = sent < len(words) and rng.random() < 0.7
            ctx.set(dut.i.valid, int(valid))
            if valid:
                ctx.set(dut.i.payload, words[sent])
            ready = rng.random() < 0.6
            before = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, int(ready))
            # The producer's ready never depends on the consumer's in the same cycle.
            assert ctx.get(dut.i.ready) == before
            if ready and ctx.get(dut.o.valid):
                got.append(ctx.get(dut.o.payload))
            took = valid and ctx.get(dut.i.ready)
            await ctx.tick()
            sent += int(bool(took))
        assert sent == len(words)

    simulate(dut, bench)
    assert got == words


@pytest.mark.parametrize("depth", [2, 4, 8])
def test_one_transfer_per_cycle_and_clear(depth):
    dut = WindowStage(8, depth)

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        seen = []
        for t in range(20):
            ctx.set(dut.i.payload, t)
            assert ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid):
                seen.append(ctx.get(dut.o.payload))
            await ctx.tick()
        assert seen == list(range(19))           # one cycle of latency, then one per cycle
        # Stalled: the entries fill, then ready falls; clear empties the stage.
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(depth + 1)
        assert not ctx.get(dut.i.ready) and ctx.get(dut.o.valid)
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        assert ctx.get(dut.i.ready) and not ctx.get(dut.o.valid)

    simulate(dut, bench)


def test_depth_is_checked():
    with pytest.raises(ValueError, match=r"depth must be one of \(2, 4, 8\) and hold_at in "
                                         r"1..depth - 1, found 3, None"):
        WindowStage(8, 3)
    with pytest.raises(ValueError, match="found 8, 8"):
        WindowStage(8, 8, hold_at=8)
    with pytest.raises(ValueError, match=r"depth must be one of \(2, 4, 8\), found 5"):
        MirrorStage(8, 5)


#: The core's timing (``zipsgd/hw/v2/core.py``, ``_stage``): the producer sees ``hold``
#: through a register and a window taken before it stops is pushed a cycle later, so up to
#: ``_IN_FLIGHT`` pushes follow the cycle in which the stage reached ``hold_at``; the mirror is
#: pushed a cycle after the stage and popped ``_LAG`` cycles after it.
_IN_FLIGHT, _LAG = 2, 2


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("pop_rate", [1.0, 0.5, 0.2])
def test_hold_protocol_never_overflows_and_the_mirror_follows(seed, pop_rate):
    """A producer that pushes without looking at ``i.ready``, stopping two cycles after
    ``hold``: no push meets a full stage, nothing is lost or reordered, the stream is not
    throttled while the consumer takes a window every cycle, and a mirror pushed a cycle
    later and popped ``_LAG`` cycles later shows every popped window then."""
    depth, hold_at = 8, 8 - _IN_FLIGHT - 1
    dut = WindowStage(16, depth, hold_at=hold_at)
    mirror = MirrorStage(16, depth)
    rng = random.Random(seed)
    words = [rng.getrandbits(16) for _ in range(600)]
    got, mirrored = [], []

    async def bench(ctx):
        sent, hold_copy, pending = 0, 0, None     # pending: taken, pushed next cycle
        push_d, word_d, pops = 0, 0, [0] * _LAG
        popped = []                               # the stage's pops, in order
        idle = 0
        for _ in range(int(len(words) / pop_rate * 1.5) + 100):
            hold_now = ctx.get(dut.hold)
            # The producer (the gearbox): a word taken in one cycle is pushed in the next.
            push = pending is not None
            ctx.set(dut.i.valid, int(push))
            if push:
                assert ctx.get(dut.i.ready), "a push into a full stage"
                ctx.set(dut.i.payload, pending)
            take = not hold_copy and sent < len(words)
            pop = rng.random() < pop_rate
            ctx.set(dut.o.ready, int(pop))
            popping = pop and ctx.get(dut.o.valid)
            if popping:
                got.append(ctx.get(dut.o.payload))
                popped.append(got[-1])
            elif pop_rate == 1.0 and sent > 8 and sent < len(words):
                idle += 1
            # The mirror, as the core drives it.
            ctx.set(mirror.push, push_d)
            ctx.set(mirror.i, word_d)
            ctx.set(mirror.pop, pops[0])
            if pops[0]:
                mirrored.append(ctx.get(mirror.o))
            await ctx.tick()
            push_d, word_d = int(push), pending or 0
            pops = pops[1:] + [int(bool(popping))]
            hold_copy = hold_now                  # the producer's copy: a cycle late
            pending = words[sent] if take else None
            sent += int(take)
        assert sent == len(words) and got == words
        assert mirrored == popped[:len(mirrored)] and len(mirrored) >= len(words) - _LAG
        assert idle == 0, "the producer was held while the consumer took every window"

    top = Module()
    top.submodules.stage, top.submodules.mirror = dut, mirror
    simulate(top, bench)
