"""``hw.v2.trees``: the segmented sum closes every sample with the sum of its products (at
most one sample start per group of eight lanes), and the reduction tree adds its inputs."""

from __future__ import annotations

import random

from sim_support import simulate

from zipsgd.hw.v2.lane import PRODUCT_WIDTH
from zipsgd.hw.v2.trees import GROUP, ReductionTree, SegmentedSum

LANES = 32


def windows(rng, count):
    """Random windows: products and starts, at most one start per group."""
    out = []
    for _ in range(count):
        products = [rng.choice([rng.randrange(-(1 << 25), (1 << 25) + 1), -(1 << 25), 1 << 25])
                    for _ in range(LANES)]
        starts = [0] * LANES
        for g in range(LANES // GROUP):
            if rng.random() < 0.6:
                starts[g * GROUP + rng.randrange(GROUP)] = 1
        out.append((products, starts, int(rng.random() < 0.85)))
    return out


def reference(stream):
    """Each start closes the sum of the products since the previous start (or the beginning)."""
    sums, running = [], 0
    for products, starts, valid in stream:
        if not valid:
            continue
        for p, s in zip(products, starts, strict=True):
            if s:
                sums.append(running)
                running = 0
            running += p
    return sums


def test_segmented_sum_closes_every_sample():
    rng = random.Random(17)
    stream = windows(rng, 300)
    dut = SegmentedSum(LANES, PRODUCT_WIDTH, 42)
    closed = []

    async def bench(ctx):
        for products, starts, valid in stream + [([0] * LANES, [0] * LANES, 0)] * 8:
            for k in range(LANES):
                ctx.set(dut.products[k], products[k])
                ctx.set(dut.starts[k], starts[k])
            ctx.set(dut.valid, valid)
            await ctx.tick()
            for g in range(LANES // GROUP):
                if ctx.get(dut.closed_valid[g]):
                    closed.append(ctx.get(dut.closed[g]))

    simulate(dut, bench)
    assert closed == reference(stream)


def test_reduction_tree_adds():
    rng = random.Random(3)
    dut = ReductionTree(LANES, 35)
    inputs = [[rng.randrange(-(1 << 34), 1 << 34) for _ in range(LANES)] for _ in range(50)]
    inputs += [[(1 << 34) - 1] * LANES, [-(1 << 34)] * LANES]
    totals = []

    async def bench(ctx):
        for values in inputs + [[0] * LANES] * 8:
            for k, v in enumerate(values):
                ctx.set(dut.partials[k], v)
            await ctx.tick()
            totals.append(ctx.get(dut.total))

    simulate(dut, bench)
    expected = [sum(v) for v in inputs]
    latency = next(i for i in range(10) if totals[i:i + len(expected)] == expected)
    assert latency + 1 == (LANES - 1).bit_length()          # one register per level
