"""The on-chip random generator: hardware outputs, exact period and the exact bias it gives
stochastic rounding.

* ``hw.rng.XorshiftBank``'s first 1000 outputs per generator equal ``spec.rng``'s for several
  seeds (the zero-state replacement included).
* The period is exactly ``2**32 - 1`` for every non-zero state, proved with the 32x32 GF(2)
  matrix ``M`` of one step (built from the spec's step applied to the unit vectors, and checked
  to be the step): ``M**(2**32-1) = I``, and for every prime ``p`` of ``2**32 - 1 = 3 * 5 * 17 *
  257 * 65537`` the matrix ``M**((2**32-1)/p) + I`` has full rank, so no non-zero state comes
  back earlier (a shorter orbit would divide one of these exponents and lie in that kernel).
* Hence one period visits every non-zero 32-bit word once: each value of the low (or high) 16
  bits occurs ``2**16`` times except 0, which occurs ``2**16 - 1`` times.  Weighting every
  random input by that count gives the exact bias of stochastic rounding for every dropped-bit
  pattern, compared with the closed forms stated in ``docs/ENGINE.md``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from amaranth.sim import Simulator

from zipsgd.hw.rng import XorshiftBank
from zipsgd.spec.fixed import RAND_BITS, RoundingMode, shift_right
from zipsgd.spec.rng import GOLDEN, ZERO_STATE_REPLACEMENT, generate, seed_states, xorshift32_step

PERIOD = (1 << 32) - 1
PRIMES = (3, 5, 17, 257, 65537)
DOC = (Path(__file__).resolve().parents[2] / "docs" / "ENGINE.md").read_text(encoding="utf-8")
TEXT = " ".join(DOC.split())


# -- hardware against the spec ---------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 0xDEAD_BEEF, GOLDEN, 0xFFFF_FFFF])
def test_hw_bank_first_1000_outputs(seed):
    """Three generators (two lanes and the residual one) after a seed load; ``GOLDEN`` makes
    generator 0's seed state zero, so it starts from the replacement state."""
    dut = XorshiftBank(count=3)
    states = seed_states(seed, 3)
    expected, _ = generate(states, 1000)
    got = []

    async def testbench(ctx):
        ctx.set(dut.seed, seed)
        ctx.set(dut.load, 1)
        await ctx.tick()
        ctx.set(dut.load, 0)
        ctx.set(dut.step, 0b111)
        for _ in range(1000):
            await ctx.tick()
            word = ctx.get(dut.value.as_value())
            got.append([(word >> (32 * i)) & PERIOD for i in range(3)])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert got == expected.tolist()
    assert (seed != GOLDEN) or states[0] == ZERO_STATE_REPLACEMENT


# -- the period, over GF(2) -------------------------------------------------------------------
# A matrix is the list of its 32 columns, each a 32-bit int: column k is the image of bit k.

def apply(matrix: list[int], vector: int) -> int:
    out = 0
    for k, column in enumerate(matrix):
        if vector >> k & 1:
            out ^= column
    return out


def multiply(a: list[int], b: list[int]) -> list[int]:
    return [apply(a, column) for column in b]


def power(matrix: list[int], exponent: int) -> list[int]:
    result, base = [1 << k for k in range(32)], matrix
    while exponent:
        if exponent & 1:
            result = multiply(result, base)
        base = multiply(base, base)
        exponent >>= 1
    return result


def rank(columns: list[int]) -> int:
    """Rank over GF(2) (Gaussian elimination on bit-packed vectors)."""
    basis: dict[int, int] = {}  # leading bit -> vector
    for v in columns:
        while v:
            top = v.bit_length() - 1
            if top not in basis:
                basis[top] = v
                break
            v ^= basis[top]
    return len(basis)


STEP = [xorshift32_step(1 << k) for k in range(32)]
IDENTITY = [1 << k for k in range(32)]


def test_step_matrix_is_the_step():
    """xorshift32 is linear: the matrix built from unit vectors is the step on any state."""
    rng = np.random.default_rng(32)
    for state in rng.integers(0, 1 << 32, 2000, dtype=np.uint64).tolist():
        assert apply(STEP, state) == xorshift32_step(state)
    assert rank(STEP) == 32
    state = 1
    for _ in range(1000):
        state = xorshift32_step(state)
    assert apply(power(STEP, 1000), 1) == state  # powering agrees with stepping


def test_period_is_exactly_2_32_minus_1():
    assert np.prod(PRIMES, dtype=object) == PERIOD
    assert all(all(p % q for q in range(2, int(p ** 0.5) + 1)) for p in PRIMES)
    assert power(STEP, PERIOD) == IDENTITY
    for p in PRIMES:
        partial = power(STEP, PERIOD // p)
        assert partial != IDENTITY, p
        # No non-zero state is fixed by M**(PERIOD/p): M**(PERIOD/p) + I is invertible.
        assert rank([c ^ i for c, i in zip(partial, IDENTITY, strict=True)]) == 32, p


# -- exact bias of stochastic rounding with this generator ------------------------------------

def rand_counts() -> np.ndarray:
    """Occurrences of each ``RAND_BITS``-bit value (low or high half) in one period: every
    non-zero 32-bit word once, i.e. all ``2**16`` other halves except the all-zero word."""
    counts = np.full(1 << RAND_BITS, 1 << (32 - RAND_BITS), dtype=np.int64)
    counts[0] -= 1
    return counts


def test_rand_counts_by_enumeration_of_a_16bit_analogue():
    """The counting argument on a generator small enough to run a whole period: every
    non-zero word of 16 bits once (xorshift16 with shifts 7, 9, 8, period 2**16 - 1), so each
    8-bit half value occurs 256 times except 0 (255)."""
    state, seen = 1, []
    for _ in range((1 << 16) - 1):
        state ^= (state << 7) & 0xFFFF
        state ^= state >> 9
        state ^= (state << 8) & 0xFFFF
        seen.append(state)
    assert state == 1 and len(set(seen)) == (1 << 16) - 1
    for half in (np.array(seen) & 0xFF, np.array(seen) >> 8):
        counts = np.bincount(half, minlength=256)
        assert counts[0] == 255 and (counts[1:] == 256).all()
    assert rand_counts().sum() == PERIOD


def up_weights(shift: int, dropped: list[int]) -> list[int]:
    """Exact number of generator outputs (out of one period) whose random bits round a value
    with dropped bits ``d`` up at ``shift``, for each ``d``: the spec's rounding applied to
    every one of the 2**16 random inputs, weighted by how often the generator produces it."""
    u = np.arange(1 << RAND_BITS, dtype=np.int64)
    counts = rand_counts()
    weights = []
    for start in range(0, len(dropped), 64):
        block = np.array(dropped[start:start + 64], dtype=object if shift > 40 else np.int64)
        rand = u.astype(block.dtype)
        # value = d (high part 0): the result is 0 (floor) or 1 (rounded up)
        ups = shift_right(block[:, None], shift, RoundingMode.STOCHASTIC, rand[None, :])
        weights += [int(w) for w in (ups * counts[None, :]).sum(axis=1)]
    return weights


def closed_form_bias(shift: int, d: int) -> Fraction:
    """The bias (in ulps of the result) stated in docs/ENGINE.md, for dropped bits ``d``."""
    if shift <= RAND_BITS:
        return Fraction(d, (1 << shift) * PERIOD)
    top = d >> (shift - RAND_BITS)
    return Fraction(top << RAND_BITS, PERIOD) - Fraction(d, 1 << shift)


def uniform_bias(shift: int, d: int) -> Fraction:
    """The bias with exactly uniform random bits (every 16-bit value once)."""
    if shift <= RAND_BITS:
        return Fraction(0)
    return Fraction(d >> (shift - RAND_BITS), 1 << RAND_BITS) - Fraction(d, 1 << shift)


def dropped_patterns(shift: int) -> list[int]:
    """Every pattern for shifts up to 10; beyond, the corners and 40 random patterns."""
    if shift <= 10:
        return list(range(1 << shift))
    unit = 1 << max(0, shift - RAND_BITS)
    rng = np.random.default_rng(shift)
    return sorted({0, 1, 2, unit - 1, unit, unit + 1, (1 << shift) - 1, 1 << (shift - 1),
                   (1 << (shift - 1)) + 1, (1 << shift) - unit}
                  | {int(x) for x in rng.integers(0, 1 << min(shift, 62), 40)})


@pytest.mark.parametrize("shift", list(range(1, 18)) + [20, 24, 40, 64])
def test_exact_bias_per_dropped_pattern(shift):
    """For every listed dropped pattern ``d`` the generator's exact bias is the closed form:
    ``d / (2**s (2**32 - 1))`` ulp for ``s <= 16`` (so ``0 <= bias < 1 / (2**32 - 1)``), and
    for ``s > 16`` the uniform source's bias plus ``h / (2**16 (2**32 - 1))`` with ``h`` the
    top 16 dropped bits."""
    dropped = dropped_patterns(shift)
    for d, weight in zip(dropped, up_weights(shift, dropped), strict=True):
        bias = Fraction(weight, PERIOD) - Fraction(d, 1 << shift)
        assert bias == closed_form_bias(shift, d), d
        if shift <= RAND_BITS:
            assert weight == d << (2 * RAND_BITS - shift)
            assert 0 <= bias < Fraction(1, PERIOD)
        high = d >> max(0, shift - RAND_BITS)
        excess = Fraction(high, PERIOD << RAND_BITS) if shift > RAND_BITS else bias
        assert bias - uniform_bias(shift, d) == excess
        assert -Fraction(1, 1 << RAND_BITS) < uniform_bias(shift, d) <= 0


def test_engine_doc_states_the_bias():
    """docs/ENGINE.md's numbers, read from the text, against the computation above."""
    period, zero, other = (int(x) for x in re.search(
        r"one period \(`(\d+)` outputs\) each value of the low 16 bits, and of the high 16 "
        r"bits, occurs `(\d+)` times if it is 0 and `(\d+)` times otherwise", TEXT).groups())
    counts = rand_counts()
    assert (period, zero, other) == (PERIOD, counts[0], counts[1])
    assert re.search(r"`P\(up\) = d 2\^32 / \(2\^s \(2\^32 - 1\)\)`", TEXT)
    assert re.search(r"bias `d / \(2\^s \(2\^32 - 1\)\)` ulp", TEXT)
    bound = float(re.search(r"below `1 / \(2\^32 - 1\)` = `([\d.e-]+)` ulp", TEXT).group(1))
    assert f"{1 / PERIOD:.3g}" == f"{bound:.3g}"
    assert re.search(r"`h 2\^16 / \(2\^32 - 1\) - d / 2\^s`", TEXT)
    assert re.search(r"`tests/numerics/test_generator.py`", TEXT)
