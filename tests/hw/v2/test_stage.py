"""``hw.v2.stage.WindowStage``: order, no loss, one transfer per cycle, registered ready."""

from __future__ import annotations

import random

import pytest
from sim_support import simulate

from zipsgd.hw.v2.stage import WindowStage


@pytest.mark.parametrize("depth", [2, 4])
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


@pytest.mark.parametrize("depth", [2, 4])
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
    with pytest.raises(ValueError, match="depth must be 2 or 4, found 3"):
        WindowStage(8, 3)
