"""``hw.v2.update.UpdateUnit`` against numerics v2 (the golden model's ``_update``)."""

from __future__ import annotations

import random

from sim_support import simulate

from zipsgd.hw.v2.update import LATENCY, UpdateUnit
from zipsgd.spec.engine2 import EngineParams2
from zipsgd.spec.fixed import RoundingMode, saturate, shift_right

WIDTH = EngineParams2().gradient_width + 5       # the reduction tree's output


def reference(gradient, word, rand, us, fs, wl, mode, decay, threshold):
    step = shift_right(gradient, us, mode, rand & 0xFFFF)
    x1, c1 = saturate(word - step, wl)
    x2 = x1 - shift_right(decay * x1, 24, mode, rand >> 16)
    x3 = (1 if x2 > 0 else -1) * max(abs(x2) - threshold, 0)
    xf, c2 = saturate(shift_right(x3, fs, RoundingMode.HALF_EVEN), 18)
    return x3, xf, int(c1), int(c2)


def cases(rng):
    for _ in range(500):
        wl = rng.randrange(2, 33)
        fl_m = rng.randrange(1, 32)
        fl_e = rng.randrange(max(0, fl_m - 8), 41)
        us = fl_e + 8 - fl_m
        lim = 1 << (wl - 1)
        word = rng.choice([rng.randrange(-lim, lim), -lim, lim - 1, 0])
        gradient = rng.choice([rng.randrange(-(1 << 34), 1 << 34), rng.randrange(-99, 99),
                               (1 << 34) - 1, -(1 << 34)])
        decay = rng.choice([0, rng.randrange(1 << 24), (1 << 24) - 1])
        threshold = rng.choice([0, rng.randrange(1 << 12), rng.randrange(1 << 31)])
        fs = rng.randrange(0, min(fl_m, 30) + 1)
        yield (gradient, word, rng.randrange(1 << 32), us, fs, wl, RoundingMode(rng.randrange(3)),
               decay, threshold)


def test_matches_numerics_v2():
    dut = UpdateUnit(WIDTH)
    inputs = list(cases(random.Random(13)))

    async def bench(ctx):
        for gradient, word, rand, us, fs, wl, mode, decay, threshold in inputs:
            for sig, v in ((dut.update_shift, us), (dut.forward_shift, fs),
                           (dut.model_width, wl), (dut.rounding, mode), (dut.decay, decay),
                           (dut.threshold, threshold)):
                ctx.set(sig, v)
            await ctx.tick()
            for sig, v in ((dut.valid, 1), (dut.gradient, gradient), (dut.word, word),
                           (dut.rand, rand)):
                ctx.set(sig, v)
            await ctx.tick()
            ctx.set(dut.valid, 0)
            for _ in range(LATENCY - 1):
                await ctx.tick()
            assert ctx.get(dut.out_valid)
            got = (ctx.get(dut.new_word), ctx.get(dut.forward), ctx.get(dut.model_clipped),
                   ctx.get(dut.forward_clipped))
            assert got == reference(gradient, word, rand, us, fs, wl, mode, decay, threshold), \
                (gradient, word, rand, us, fs, wl, mode, decay, threshold)
            # The next cycle's input was not valid (the same word): an idle unit's operand is 0.
            await ctx.tick()
            assert not ctx.get(dut.out_valid) and ctx.get(dut.forward) == 0

    simulate(dut, bench)
