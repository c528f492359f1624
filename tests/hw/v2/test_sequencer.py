"""``hw.v2.sequencer.WindowSequencer`` against :func:`sequence_reference`."""

from __future__ import annotations

import math
import random

import pytest
from sim_support import simulate

from zipsgd.hw.v2.sequencer import WindowSequencer, sequence_reference

LANES = 32


def _runs():
    rng = random.Random(5)
    sizes = [8, 9, 10, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 96, 100, 255, 256, 511, 512]
    sizes += [rng.randrange(8, 513) for _ in range(6)]
    runs = []
    for fields in sizes:
        g = math.gcd(fields, LANES)
        g_log2 = rng.randrange(g.bit_length())         # any power of two dividing the gcd
        runs.append((fields, g_log2, rng.randrange(1, 40), False))
    for fields in [2, 3, 5, 8, 9, 16, 17, 100]:
        g = math.gcd(fields, LANES // 4)
        runs.append((fields, rng.randrange(g.bit_length()), rng.randrange(1, 30), True))
    return runs


def test_addresses_starts_ends_and_validity():
    dut = WindowSequencer(LANES, addr_width=9)
    rng = random.Random(7)
    runs = _runs()

    async def bench(ctx):
        for fields, g_log2, samples, raw in runs:
            per = LANES // 4 if raw else LANES
            total = fields * samples
            windows = -(-total // per)
            ctx.set(dut.raw, raw)
            ctx.set(dut.step, (per % fields) >> g_log2)
            ctx.set(dut.wrap, fields >> g_log2)
            ctx.set(dut.g_log2, g_log2)
            ctx.set(dut.last_window, windows - 1)
            ctx.set(dut.last_valid, total - (windows - 1) * per)
            ctx.set(dut.restart, 1)
            await ctx.tick()
            ctx.set(dut.restart, 0)
            while not ctx.get(dut.ready):
                await ctx.tick()
            t = 0
            while t < windows:
                want = sequence_reference(t, LANES, fields, g_log2, total, raw)
                got = [(ctx.get(dut.addr[k]) if w[3] else 0, ctx.get(dut.start[k]),
                        ctx.get(dut.end[k]), ctx.get(dut.valid[k]))
                       for k, w in enumerate(want)]
                want = [(a if v else 0, s, e, v) for a, s, e, v in want]
                assert got == want, (fields, g_log2, samples, raw, t)
                step = rng.random() < 0.7
                ctx.set(dut.advance, int(step))
                await ctx.tick()
                ctx.set(dut.advance, 0)
                t += int(step)

    simulate(dut, bench)


@pytest.mark.parametrize("fields", [8, 33, 100])
def test_reference_visits_each_feature_once_per_sample(fields):
    seen = [a for t in range(fields)
            for a, _, _, _ in sequence_reference(t, LANES, fields, 0, fields * LANES)]
    assert sorted(seen) == sorted(list(range(fields)) * LANES)
