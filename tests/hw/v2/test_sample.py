"""``hw.v2.sample.SampleUnit`` against numerics v2 (the golden model's per-sample steps)."""

from __future__ import annotations

import random

from sim_support import simulate

from zipsgd.hw.v2.sample import LATENCY, SampleUnit
from zipsgd.spec.engine2 import (
    LOSS_FRAC,
    LOSS_WIDTH,
    RESIDUAL_MAX,
    EngineParams2,
)
from zipsgd.spec.fixed import RoundingMode, align, saturate, shift_right

PARAMS = EngineParams2(64, 1024, 512)


def reference(dot, label, raw, fl_f, step, shift, mode, rand):
    label_frac = 16 if raw else 9
    r = dot - align(label, label_frac, 8 + fl_f)
    narrow, clipped = saturate(align(r, 8 + fl_f, LOSS_FRAC, RoundingMode.HALF_EVEN), LOSS_WIDTH)
    scaled = shift_right(r * step, shift, mode, rand)
    e = max(-RESIDUAL_MAX, min(RESIDUAL_MAX, scaled))
    return e, int(e != scaled), narrow * narrow, int(clipped)


def cases(rng):
    dw = PARAMS.dot_width
    edges = [0, 1, -1, (1 << (dw - 1)) - 1, -(1 << (dw - 1)), 1 << 30, -(1 << 30)]
    for _ in range(400):
        raw = rng.random() < 0.3
        label = rng.randrange(-(1 << 16), (1 << 16) + 1) if raw else rng.randrange(-512, 513)
        dot = rng.choice(edges) if rng.random() < 0.1 else rng.randrange(-(1 << 34), 1 << 34)
        yield (dot, label, int(raw), rng.randrange(1, 18), rng.randrange(1 << 17),
               rng.randrange(64), RoundingMode(rng.randrange(3)), rng.randrange(1 << 16))
    # Near e's rounding boundaries: small products, ties (an odd product shifted by 1), shifts
    # around 16 (the window's edge) and values around the clamp.
    for _ in range(600):
        fl_f = rng.randrange(1, 18)
        dot = rng.randrange(-(1 << 14), 1 << 14)
        step = rng.choice([1, 2, 3, 5, 1 << 16, (1 << 17) - 1, rng.randrange(1 << 17)])
        shift = rng.choice([0, 1, 2, 15, 16, 17, 18, rng.randrange(24), rng.randrange(40)])
        yield (dot, 0, 0, fl_f, step, shift, RoundingMode(rng.randrange(3)),
               rng.randrange(1 << 16))
    # Near the loss word's rounding and clamp: ties and their neighbours at the word's ends
    # (a floor one below the least word that rounds up into it), at every FL_f.
    for fl_f in range(1, 18):
        k = fl_f - 5
        for word in (0, 1, -1, 2, -2, (1 << 17) - 1, 1 << 17, -(1 << 17), -(1 << 17) - 1):
            for frac in (0, 1, 2, 3) if k > 0 else (0,):
                base = word << k if k >= 0 else word >> -k
                dot = base + ((frac << k) >> 2 if k > 0 else 0) + rng.choice([0, 0, -1, 1])
                yield (dot, 0, 0, fl_f, 1, 0, RoundingMode.TRUNCATE, 0)


def test_matches_numerics_v2():
    dut = SampleUnit(PARAMS.dot_width)
    rng = random.Random(11)
    inputs = list(cases(rng))

    async def bench(ctx):
        for dot, label, raw, fl_f, step, shift, mode, rand in inputs:
            # Settings hold for a cycle before the value and while it is inside.
            for sig, v in ((dut.raw, raw), (dut.forward_frac, fl_f), (dut.step, step),
                           (dut.residual_shift, shift), (dut.rounding, mode)):
                ctx.set(sig, v)
            await ctx.tick()
            ctx.set(dut.valid, 1)
            ctx.set(dut.dot, dot)
            ctx.set(dut.label, label)
            ctx.set(dut.rand, rand)
            await ctx.tick()
            ctx.set(dut.valid, 0)
            for _ in range(LATENCY - 1):
                await ctx.tick()
            assert ctx.get(dut.out_valid)
            got = (ctx.get(dut.e), ctx.get(dut.e_clipped), ctx.get(dut.loss),
                   ctx.get(dut.loss_clipped))
            assert got == reference(dot, label, raw, fl_f, step, shift, mode, rand), \
                (dot, label, raw, fl_f, step, shift, mode, rand)
            await ctx.tick()

    simulate(dut, bench)


def test_back_to_back_samples():
    """A new sample every cycle (settings fixed, as in the engine): no stage takes a value of
    its neighbour (large residuals of either sign saturate ``e``)."""
    dut = SampleUnit(PARAMS.dot_width)
    rng = random.Random(12)
    for_run = [(rng.randrange(1, 18), rng.randrange(1 << 17), rng.randrange(10, 40),
                RoundingMode(rng.randrange(3))) for _ in range(6)]

    async def bench(ctx):
        for fl_f, step, shift, mode in for_run:
            for sig, v in ((dut.raw, 0), (dut.forward_frac, fl_f), (dut.step, step),
                           (dut.residual_shift, shift), (dut.rounding, mode)):
                ctx.set(sig, v)
            await ctx.tick()
            pending = []
            for cycle in range(60 + LATENCY):
                if cycle < 60:
                    dot = rng.choice([rng.randrange(-(1 << 34), 1 << 34),
                                      rng.randrange(-(1 << 20), 1 << 20)])
                    label, rand = rng.randrange(-512, 513), rng.randrange(1 << 16)
                    ctx.set(dut.valid, 1)
                    ctx.set(dut.dot, dot)
                    ctx.set(dut.label, label)
                    ctx.set(dut.rand, rand)
                    pending.append(reference(dot, label, 0, fl_f, step, shift, mode, rand))
                else:
                    ctx.set(dut.valid, 0)
                await ctx.tick()
                if ctx.get(dut.out_valid):
                    got = (ctx.get(dut.e), ctx.get(dut.e_clipped), ctx.get(dut.loss),
                           ctx.get(dut.loss_clipped))
                    assert got == pending.pop(0)
            assert not pending

    simulate(dut, bench)
