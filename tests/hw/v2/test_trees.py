"""``hw.v2.trees``: the segmented sum closes every sample with the sum of its products and its
label (at most one sample end per group of eight lanes); the reduction and fold trees add."""

from __future__ import annotations

import random

import pytest
from sim_support import simulate

from zipsgd.hw.v2.lane import PRODUCT_WIDTH
from zipsgd.hw.v2.trees import GROUP, FoldTree, ReductionTree, SegmentedSum

LANES = 32


def windows(rng, count, lanes=LANES):
    """Random windows of samples of 8..40 fields: products, starts, ends and labels."""
    out, left = [], rng.randrange(1, 20)
    for _ in range(count):
        products = [rng.choice([rng.randrange(-(1 << 25), (1 << 25) + 1), -(1 << 25), 1 << 25])
                    for _ in range(lanes)]
        starts, ends = [0] * lanes, [0] * lanes
        labels = [0] * (lanes // GROUP)
        for k in range(lanes):
            left -= 1
            if left == 0:
                ends[k] = 1
                left = rng.choice([8, 8, 9, rng.randrange(8, 41)])
                if k + 1 < lanes:
                    starts[k + 1] = 1
                    labels[(k + 1) // GROUP] = rng.randrange(-(1 << 17), 1 << 17)
        out.append([products, starts, ends, labels, 1])
    # Lane 0 of a window after an end starts a sample.
    for i in range(1, count):
        if out[i - 1][2][lanes - 1]:
            out[i][1][0] = 1
            out[i][3][0] = rng.randrange(-(1 << 17), 1 << 17)
    # Idle cycles between windows (valid low, inputs are noise).
    stream = []
    for w in out:
        while rng.random() < 0.15:
            stream.append(([rng.randrange(1 << 20) for _ in range(lanes)], [0] * lanes,
                           [0] * lanes, [0] * (lanes // GROUP), 0))
        stream.append(tuple(w))
    return stream


def reference(stream):
    """Each end closes the sum of the products since the previous end, with the label of the
    latest start (none before the first start: label 0), tagged with its window's cycle."""
    sums, running, label = [], 0, 0
    for cycle, (products, starts, ends, labels, valid) in enumerate(stream):
        if not valid:
            continue
        for k, (p, s, e) in enumerate(zip(products, starts, ends, strict=True)):
            if s:
                label = labels[k // GROUP]
            running += p
            if e:
                sums.append((cycle, running, label))
                running = 0
    return sums


@pytest.mark.parametrize("lanes", [LANES, 2 * LANES])
def test_segmented_sum_closes_every_sample(lanes):
    rng = random.Random(17)
    stream = windows(rng, 300, lanes)
    dut = SegmentedSum(lanes, PRODUCT_WIDTH, 42)
    closed = []
    idle = ([0] * lanes, [0] * lanes, [0] * lanes, [0] * (lanes // GROUP), 0)

    async def bench(ctx):
        for cycle, (products, starts, ends, labels, valid) in enumerate(stream + [idle] * 12):
            for k in range(lanes):
                ctx.set(dut.products[k], products[k])
                ctx.set(dut.starts[k], starts[k])
                ctx.set(dut.ends[k], ends[k])
            for g, label in enumerate(labels):
                ctx.set(dut.labels[g], label)
            ctx.set(dut.valid, valid)
            await ctx.tick()
            for g in range(lanes // GROUP):
                if ctx.get(dut.closed_valid[g]):
                    closed.append((cycle + 1 - dut.latency, ctx.get(dut.closed[g]),
                                   ctx.get(dut.closed_label[g])))

    simulate(dut, bench)
    want = reference(stream)
    assert len(closed) == len(want) > 100
    assert closed == want                      # each ``latency`` cycles after its window


@pytest.mark.parametrize("classes", [1, 2, 4])
def test_fold_tree_sums_classes(classes):
    rng = random.Random(classes)
    dut = FoldTree(LANES, classes, 35)
    inputs = [[rng.randrange(-(1 << 34), 1 << 34) for _ in range(LANES)] for _ in range(40)]
    inputs += [[(1 << 34) - 1] * LANES, [-(1 << 34)] * LANES]
    got = []

    async def bench(ctx):
        for values in inputs + [[0] * LANES] * dut.latency:
            for k, v in enumerate(values):
                ctx.set(dut.partials[k], v)
            await ctx.tick()
            got.append(([ctx.get(dut.sums[u]) for u in range(classes)], ctx.get(dut.total)))

    simulate(dut, bench)
    got = got[dut.latency - 1:]
    for values, (sums, total) in zip(inputs, got, strict=False):
        assert sums == [sum(values[u::classes]) for u in range(classes)]
        assert total == sum(values)


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
