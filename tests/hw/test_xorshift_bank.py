"""``hw.rng.XorshiftBank`` against :mod:`zipsgd.spec.rng`, cycle by cycle.

After a load, generator ``i`` must start from ``seed_states(seed, count)[i]`` (including the
zero-state replacement) and, one cycle after each cycle with its ``step`` bit high, show the
next ``xorshift32_step`` output; with ``step`` low it holds.  ``load`` wins over ``step``.
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from zipsgd.hw.rng import XorshiftBank
from zipsgd.spec.rng import GOLDEN, ZERO_STATE_REPLACEMENT, generate, seed_states, xorshift32_step

MASK = 0xFFFF_FFFF
# 0x9E3779B9 zeroes generator 0, 2 * 0x9E3779B9 generator 1.
SEEDS = [0, 1, 0xDEAD_BEEF, MASK, GOLDEN, (2 * GOLDEN) & MASK]
OUTPUTS = 100


def simulate(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def values(ctx, dut) -> list[int]:
    bits = ctx.get(dut.value.as_value())
    return [(bits >> (32 * i)) & MASK for i in range(dut.count)]


def test_seed_states_and_first_outputs():
    dut = XorshiftBank(count=5)
    checked = []

    async def testbench(ctx):
        ctx.set(dut.step, 0b11111)  # load wins over step
        for seed in SEEDS:
            ctx.set(dut.seed, seed)
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            states = seed_states(seed, dut.count)
            assert values(ctx, dut) == [int(s) for s in states], f"seed {seed:#x}"
            expected, _ = generate(states, OUTPUTS)
            for k in range(OUTPUTS):
                await ctx.tick()
                assert values(ctx, dut) == [int(v) for v in expected[k]], \
                    f"seed {seed:#x}, output {k + 1}"
            checked.append(seed)

    simulate(dut, testbench)
    assert checked == SEEDS
    assert seed_states(GOLDEN, 1)[0] == ZERO_STATE_REPLACEMENT  # the zeroing seed is tested


def test_engine_sized_bank_after_reset_and_load():
    """``lanes + 1`` generators for W = 64, from reset (``reset_seed``) and after a load."""
    dut = XorshiftBank(count=33, reset_seed=0x1234_5678)

    async def testbench(ctx):
        assert values(ctx, dut) == [int(s) for s in seed_states(0x1234_5678, 33)]
        for seed in (None, 0xCAFE_F00D):
            if seed is not None:
                ctx.set(dut.seed, seed)
                ctx.set(dut.load, 1)
                await ctx.tick()
                ctx.set(dut.load, 0)
            states = [int(s) for s in seed_states(0x1234_5678 if seed is None else seed, 33)]
            ctx.set(dut.step, (1 << 33) - 1)
            for _ in range(OUTPUTS):
                await ctx.tick()
                states = [xorshift32_step(s) for s in states]
                assert values(ctx, dut) == states
            ctx.set(dut.step, 0)

    simulate(dut, testbench)


def test_step_gaps_keep_each_sequence():
    """Random per-generator step patterns (lanes together, residual apart) and a reload."""
    rng = np.random.default_rng(5)
    dut = XorshiftBank(count=4)
    lanes = 3
    steps_taken = [0] * dut.count

    async def testbench(ctx):
        for seed in (0x0BAD_CAFE, GOLDEN):
            ctx.set(dut.seed, seed)
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            expected = [int(s) for s in seed_states(seed, dut.count)]
            for _ in range(300):
                lane_step = int(rng.random() < 0.4)
                residual_step = int(rng.random() < 0.3)
                step = (((1 << lanes) - 1) * lane_step) | (residual_step << lanes)
                ctx.set(dut.step, step)
                await ctx.tick()
                for i in range(dut.count):
                    if step >> i & 1:
                        expected[i] = xorshift32_step(expected[i])
                        steps_taken[i] += 1
                assert values(ctx, dut) == expected
        ctx.set(dut.step, 0)

    simulate(dut, testbench)
    assert min(steps_taken) > 100  # the pattern really stepped every generator


@pytest.mark.parametrize(("kwargs", "error", "named"), [
    ({"count": 0}, ValueError, "0"), ({"count": 2.0}, TypeError, "2.0"),
    ({"count": True}, TypeError, "True"), ({"count": 1, "reset_seed": 1 << 32}, ValueError,
                                           str(1 << 32)),
    ({"count": 1, "reset_seed": -1}, ValueError, "-1"),
    ({"count": 1, "reset_seed": "1"}, TypeError, "'1'"),
])
def test_bank_rejects_bad_parameters(kwargs, error, named):
    # The half-built component is an elaboratable that is never used: that warning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(error, match=f"not {named}$"):
            XorshiftBank(**kwargs)
        gc.collect()


def test_bank_ports_and_verilog():
    dut = XorshiftBank(count=33)
    assert (dut.count, dut.reset_seed) == (33, 0)
    assert len(dut.seed) == 32 and len(dut.step) == 33 and dut.value.shape().length == 33
    text = verilog.convert(dut, name="zipsgd_xorshift_bank", emit_src=False)
    assert "module zipsgd_xorshift_bank" in text
    assert "/work" not in text  # no absolute source paths
