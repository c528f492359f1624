"""The pipelined multiplier (:class:`zipsgd.hw.arith.Product`) against Python's exact product,
at every operand shape the engine uses and a few around the limb boundaries: each operand's
extremes, 0, +-1, the limb edges and random values, every pair of them, streamed one pair per
clock cycle (so that a value mixing two inputs' partial products would show)."""

from __future__ import annotations

import itertools
import random

import pytest
from amaranth.hdl import Fragment, Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from zipsgd.hw.arith import LIMB_BITS, Product

SHAPES = [
    (signed(32), signed(32)),     # raw32 lane: word x model word, scaled residual x word
    (signed(32), signed(10)),     # quantized lane
    (signed(10), signed(32)),
    (signed(53), unsigned(32)),   # residual x step
    (signed(32), unsigned(24)),   # model word x decay
    (signed(18), signed(18)),     # one limb each
    (signed(19), unsigned(17)),   # one limb past it
    (unsigned(35), unsigned(18)),
    (signed(32), unsigned(32)),   # low limbs' and high limbs' products side by side
    (unsigned(34), unsigned(34)),
    (signed(53), signed(53)),     # nine partial products: three stages of sums
]


def operand_values(shape, rng: random.Random, count: int = 10) -> list[int]:
    if shape.signed:
        lo, hi = -(1 << (shape.width - 1)), (1 << (shape.width - 1)) - 1
    else:
        lo, hi = 0, (1 << shape.width) - 1
    edges = {lo, lo + 1, hi, hi - 1, 0, 1, -1, 2, (1 << LIMB_BITS) - 1, 1 << LIMB_BITS,
             -(1 << LIMB_BITS)}
    values = {v for v in edges if lo <= v <= hi}
    values |= {rng.randint(lo, hi) for _ in range(count)}
    return sorted(values)


#: Products whose last sum is split (``Product(split=k)``): the engine's decay product at its
#: rounder's span (DECAY_FRAC + 1), and splits below, at and above the chain's start (bit
#: LIMB_BITS + 1 here), next to each end, and over more than one stage of sums.
SPLITS = [
    (signed(32), unsigned(24), 25),
    (signed(32), unsigned(24), 1),
    (signed(32), unsigned(24), LIMB_BITS),
    (signed(32), unsigned(24), LIMB_BITS + 1),
    (signed(32), unsigned(24), LIMB_BITS + 2),
    (signed(32), unsigned(24), 55),
    (signed(32), signed(32), 40),
    (signed(53), signed(53), 60),
]


@pytest.mark.parametrize("landing", [False, True], ids=["", "landing"])
@pytest.mark.parametrize("shape_a,shape_b", SHAPES, ids=lambda s: str(s))
def test_product_is_exact(shape_a, shape_b, landing):
    check_exact(shape_a, shape_b, landing=landing)


@pytest.mark.parametrize("shape_a,shape_b,split", SPLITS, ids=str)
def test_split_product_is_exact(shape_a, shape_b, split):
    check_exact(shape_a, shape_b, split=split)


def check_exact(shape_a, shape_b, **options):
    rng = random.Random(f"{shape_a}{shape_b}")
    m = Module()
    a, b = Signal(shape_a), Signal(shape_b)
    product = Product(m, a, b, "p", **options)
    assert product.value.shape() == (a * b).shape()
    pairs = list(itertools.product(operand_values(shape_a, rng), operand_values(shape_b, rng)))
    got = []

    async def bench(ctx):
        for va, vb in pairs + [(0, 0)] * product.latency:
            ctx.set(a, va)
            ctx.set(b, vb)
            await ctx.tick()
            got.append(ctx.get(product.value))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    got = got[product.latency - 1:][:len(pairs)]
    bad = [(x, y, g) for (x, y), g in zip(pairs, got, strict=True) if x * y != g]
    assert not bad, f"(a, b, hardware): {bad[:5]}"


@pytest.mark.parametrize("shape_a,shape_b,latency", [
    (signed(18), signed(18), 1), (signed(32), signed(10), 2), (signed(32), signed(32), 2),
    (signed(53), unsigned(32), 3), (signed(53), signed(53), 3)], ids=str)
def test_latency_is_one_stage_per_four_partial_products(shape_a, shape_b, latency):
    m = Module()
    assert Product(m, Signal(shape_a), Signal(shape_b), "p").latency == latency
    # The landing registers are one stage more.
    assert Product(m, Signal(shape_a), Signal(shape_b), "q", landing=True).latency == latency + 1
    # A split last sum keeps the latency.
    assert Product(m, Signal(shape_a), Signal(shape_b), "r", split=20).latency == latency
    Fragment.get(m, None)     # (elaborated: an unused module is a warning)
