"""``hw.v2.lane.Lane`` against a cycle-level Python model of its memories and arithmetic."""

from __future__ import annotations

import random

import pytest
from sim_support import simulate

from zipsgd.hw.v2.lane import FORWARD_LATENCY, PARTIAL_LATENCY, TABLE_DEPTH, Lane
from zipsgd.spec.engine2 import (
    PARTIAL_REUSE,
    PARTIAL_WIDTH,
    RAW_PRODUCT_SHIFT2,
    RAW_ROUND_SHIFT,
    RESIDUAL_MAX,
)
from zipsgd.spec.stream import RAW_ONE

CAPACITY = 64


def level(table, per_feature, addr, index, q_index):
    """The level of index ``q_index`` (``index`` or ``index + 1``) of the lane's feature."""
    del index
    if q_index == table["top"]:
        return 256
    where = (q_index << 7 | addr) if per_feature else q_index
    return table["words"][where]


def wrap(value):
    value &= (1 << PARTIAL_WIDTH) - 1
    return value - (1 << PARTIAL_WIDTH) if value >> (PARTIAL_WIDTH - 1) else value


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("raw", [False, True])
def test_lane_against_model(raw, seed):
    rng = random.Random(seed * 2 + raw)
    dut = Lane(CAPACITY, raw=raw)
    words = [rng.randrange(-256, 256) for _ in range(TABLE_DEPTH)]
    xf = [rng.randrange(-(1 << 17), 1 << 17) for _ in range(2 * CAPACITY)]
    partials = [[0] * CAPACITY for _ in range(2)]
    errors = []

    async def bench(ctx):
        for a, w in enumerate(words):
            ctx.set(dut.cb_we, 1)
            ctx.set(dut.cb_addr, a)
            ctx.set(dut.cb_data, w)
            if a < len(xf):
                ctx.set(dut.xf_we, 1)
                ctx.set(dut.xf_addr, a)
                ctx.set(dut.xf_data, xf[a])
            else:
                ctx.set(dut.xf_we, 0)
            await ctx.tick()
        ctx.set(dut.cb_we, 0)
        ctx.set(dut.xf_we, 0)
        for setting in range(6):
            bits = rng.randrange(1, 9)
            per_feature = int(bits <= 4 and rng.random() < 0.6)
            double = rng.randrange(2)
            raw_mode = int(raw and setting % 3 == 2)
            buffer = rng.randrange(2)
            # A word is summed into again PARTIAL_REUSE cycles later at the soonest (the
            # lane's contract): some phases sum into that many words in turn, so that a word
            # comes back as soon as it may.
            few = setting % 3 == 1
            few_addrs = rng.sample(range(CAPACITY), PARTIAL_REUSE)
            recent = []
            for sig, v in ((dut.index_mask, (1 << bits) - 1), (dut.bit_select, 1 << (bits - 1)),
                           (dut.double, double), (dut.per_feature, per_feature),
                           (dut.buffer, buffer), (dut.raw, raw_mode)):
                ctx.set(sig, v)
            await ctx.tick()
            table = {"words": words, "top": 1 << bits}
            # A phase sums into one partial memory while the update reads the other, as in
            # the engine (a batch's sums, the previous batch's update).
            bank = setting % 2
            expect_levels, expect_fwd, expect_upd = {}, {}, {}
            last_upd = None
            fwd = False
            for cycle in range(200):
                ctx.set(dut.fwd_valid, int(fwd))      # (the previous field's: a cycle late)
                fwd = rng.random() < 0.8
                addr = rng.randrange(CAPACITY)
                slot = rng.randrange(1 << 10)
                # Raw words over the whole 32 bits, and near the clamp at +-1.
                word = rng.randrange(-(1 << 31), 1 << 31) if rng.random() < 0.3 else \
                    rng.randrange(-(1 << 30) - (1 << 15), (1 << 30) + (1 << 15))
                raw_word = (max(-RAW_ONE, min(RAW_ONE, word)) + (1 << (RAW_ROUND_SHIFT - 1))) \
                    >> RAW_ROUND_SHIFT
                ctx.set(dut.fwd_slot, slot)
                ctx.set(dut.fwd_addr, addr)
                ctx.set(dut.raw_bits, word & 0xFFFF_FFFF)
                if fwd:
                    index = slot & ((1 << bits) - 1)
                    s1 = (slot >> bits) & 1
                    s2 = (slot >> (bits + 1)) & 1 if double else s1
                    f1 = level(table, per_feature, addr, index, index + s1)
                    f2 = level(table, per_feature, addr, index, index + s2)
                    x = xf[buffer * CAPACITY + addr]
                    # (Raw lanes' f2 is the level shifted up outside raw mode.)
                    f2_out = raw_word if raw_mode else f2 << (RAW_PRODUCT_SHIFT2 * raw)
                    expect_levels[cycle + FORWARD_LATENCY - 1] = (f1, f2, f2_out, addr)
                    expect_fwd[cycle + FORWARD_LATENCY] = \
                        (raw_word * x) >> RAW_PRODUCT_SHIFT2 if raw_mode else f1 * x
                else:
                    expect_fwd[cycle + FORWARD_LATENCY] = 0        # an invalid field adds 0
                bwd = rng.random() < 0.7
                b_addr = rng.choice([a for a in range(CAPACITY) if a not in recent])
                if few:
                    b_addr = few_addrs[cycle % PARTIAL_REUSE]
                recent = (recent + [b_addr if bwd else None])[-(PARTIAL_REUSE - 1):]
                e = rng.randrange(-RESIDUAL_MAX, RESIDUAL_MAX + 1)
                f2_in = rng.randrange(-(1 << 16), (1 << 16) + 1) if raw_mode \
                    else rng.randrange(-256, 257) << (RAW_PRODUCT_SHIFT2 * raw)
                for sig, v in ((dut.bwd_valid, int(bwd)), (dut.bwd_e, e),
                               (dut.bwd_second, f2_in), (dut.bwd_addr, b_addr),
                               (dut.bwd_bank, bank)):
                    ctx.set(sig, v)
                if bwd:
                    term = (e * f2_in) >> RAW_PRODUCT_SHIFT2 if raw else e * f2_in
                    partials[bank][b_addr] = wrap(partials[bank][b_addr] + term)
                # The update reads a word of the other memory and clears it (never the same
                # word twice in a row: the engine reads each word once per batch).
                upd_addr = rng.randrange(CAPACITY)
                if upd_addr == last_upd:
                    upd_addr = (upd_addr + 1) % CAPACITY
                enable = int(rng.random() < 0.8)
                last_upd = upd_addr if enable else None
                ctx.set(dut.upd_bank, 1 - bank)
                ctx.set(dut.upd_addr, upd_addr)
                ctx.set(dut.upd_enable, enable)
                expect_upd[cycle + PARTIAL_LATENCY] = partials[1 - bank][upd_addr] if enable else 0
                if enable:
                    partials[1 - bank][upd_addr] = 0
                if cycle in expect_levels and raw_mode:
                    if (ctx.get(dut.f2), ctx.get(dut.f2_addr)) != expect_levels.pop(cycle)[2:]:
                        errors.append(("raw f2", setting, cycle))
                elif cycle in expect_levels:
                    got = (ctx.get(dut.first), ctx.get(dut.second), ctx.get(dut.f2),
                           ctx.get(dut.f2_addr))
                    if got != expect_levels.pop(cycle):
                        errors.append(("levels", setting, cycle, got, bits, per_feature,
                                       double, raw_mode))
                if cycle in expect_fwd and ctx.get(dut.product) != expect_fwd.pop(cycle):
                    errors.append(("product", setting, cycle))
                if cycle in expect_upd and ctx.get(dut.partial) != expect_upd.pop(cycle):
                    errors.append(("partial", setting, cycle))
                await ctx.tick()
            ctx.set(dut.fwd_valid, 0)
            ctx.set(dut.bwd_valid, 0)
            ctx.set(dut.upd_enable, 0)
            for _ in range(6):
                await ctx.tick()
        # Every word of both memories, through the update's port (twice: the first read
        # cleared it).
        for bank in range(2):
            for rep in range(2):
                for addr in range(CAPACITY):
                    ctx.set(dut.upd_bank, bank)
                    ctx.set(dut.upd_addr, addr)
                    ctx.set(dut.upd_enable, 1)
                    await ctx.tick()
                    ctx.set(dut.upd_enable, 0)
                    await ctx.tick().repeat(PARTIAL_LATENCY - 1)
                    if ctx.get(dut.partial) != (partials[bank][addr] if rep == 0 else 0):
                        errors.append(("final", bank, addr, rep))
                    await ctx.tick()

    simulate(dut, bench)
    assert not errors, errors[:5]
