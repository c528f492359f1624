"""Exhaustive checks of the narrowing steps in :mod:`zipsgd.spec.fixed`.

Every rounding mode of :func:`shift_right` is compared, on every value of small words, with an
independent reference written with :class:`fractions.Fraction` (``docs/ENGINE.md``, "Rounding
step").  Stochastic rounding is checked over *all* ``2**16`` random inputs, so its probability
of rounding up is computed exactly, not estimated.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from zipsgd.spec.errors import ConfigError
from zipsgd.spec.fixed import (
    RAND_BITS,
    FixedFormat,
    RoundingMode,
    align,
    saturate,
    shift_left,
    shift_right,
    signed_range,
)

T, H, S = RoundingMode.TRUNCATE, RoundingMode.HALF_EVEN, RoundingMode.STOCHASTIC
ALL_RAND = np.arange(1 << RAND_BITS, dtype=np.int64)
WORD8 = range(-128, 128)
WORD12 = range(-2048, 2048)


# -- independent references ----------------------------------------------------------------

def ref_floor(value: int, shift: int) -> int:
    return math.floor(Fraction(value, 1 << shift))


def ref_half_even(value: int, shift: int) -> int:
    exact = Fraction(value, 1 << shift)
    low = math.floor(exact)
    if exact - low > Fraction(1, 2):
        return low + 1
    if exact - low < Fraction(1, 2):
        return low
    return low if low % 2 == 0 else low + 1


def ref_stochastic_up_count(value: int, shift: int) -> int:
    """How many of the 2**16 random inputs round ``value / 2**shift`` up (from ENGINE.md):
    the dropped bits are ``value mod 2**shift``; an offset ``o`` rounds up iff
    ``dropped + o >= 2**shift``."""
    dropped = value % (1 << shift)
    if shift <= RAND_BITS:
        # o = u >> (16 - s): every o in [0, 2**s) is hit by 2**(16 - s) values of u.
        return dropped * (1 << (RAND_BITS - shift))
    # o = u << (s - 16): up iff u >= (2**s - dropped) / 2**(s-16), i.e. for the top 16 dropped
    # bits' value of the 2**16 inputs.
    return dropped >> (shift - RAND_BITS)


# -- truncate and round-half-even ----------------------------------------------------------

@pytest.mark.parametrize("mode, ref", [(T, ref_floor), (H, ref_half_even)], ids=["trunc", "rhe"])
@pytest.mark.parametrize("words, shifts", [(WORD8, range(0, 11)), (WORD12, range(0, 14))],
                         ids=["w8", "w12"])
def test_deterministic_modes_exhaustive(mode, ref, words, shifts):
    values = np.array(words, dtype=np.int64)
    for shift in shifts:
        expected = [ref(v, shift) for v in words]
        # int path
        assert [shift_right(v, shift, mode) for v in words] == expected, shift
        # int64 array path
        got = shift_right(values, shift, mode)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.array(expected, dtype=np.int64))
        # object array path (what the golden model uses for 88-bit products)
        got_obj = shift_right(values.astype(object), shift, mode)
        assert [int(g) for g in got_obj] == expected


def test_half_even_ties():
    # value / 2**s exactly halfway: ties go to the even neighbour, on both sides of zero.
    cases = {(1, 1): 0, (3, 1): 2, (5, 1): 2, (7, 1): 4, (-1, 1): 0, (-3, 1): -2,
             (-5, 1): -2, (2, 2): 0, (6, 2): 2, (10, 2): 2, (-2, 2): 0, (-6, 2): -2,
             (1 << 39, 40): 0, (3 << 39, 40): 2, (-(3 << 39), 40): -2}
    for (value, shift), expected in cases.items():
        assert shift_right(value, shift, H) == expected, (value, shift)
        assert int(shift_right(np.array([value]), shift, H)[0]) == expected


@pytest.mark.parametrize("mode", list(RoundingMode))
def test_shift_zero_is_identity(mode):
    values = np.arange(-300, 300, dtype=np.int64)
    rand = np.full(values.shape, 0xFFFF, dtype=np.int64)
    np.testing.assert_array_equal(shift_right(values, 0, mode, rand), values)
    for v in (-(1 << 80), -1, 0, 1, (1 << 80) + 1):
        assert shift_right(v, 0, mode, 0xFFFF) == v


def test_big_python_ints_all_modes():
    """Python ints never wrap: 88-bit products round exactly like the Fraction reference."""
    rng = np.random.default_rng(2017)
    for _ in range(300):
        value = int(rng.integers(-(1 << 62), 1 << 62)) * int(rng.integers(1, 1 << 26))
        shift = int(rng.integers(1, 70))
        assert shift_right(value, shift, T) == ref_floor(value, shift)
        assert shift_right(value, shift, H) == ref_half_even(value, shift)
        u = int(rng.integers(0, 1 << 16))
        offset = u >> (16 - shift) if shift <= 16 else u << (shift - 16)
        assert shift_right(value, shift, S, u) == math.floor(Fraction(value + offset, 1 << shift))


# -- stochastic ----------------------------------------------------------------------------

def _stochastic_all_rand(values, shift: int):
    """Round every value with every 16-bit random input (blocks of 32 values keep the arrays
    small); returns per value the smallest and largest ``result - floor`` and the sum of the
    results over all 2**16 inputs (int64 arrays)."""
    values = np.asarray(values, dtype=np.int64)
    lows, highs, sums = [], [], []
    for start in range(0, values.size, 32):
        block = values[start:start + 32]
        got = shift_right(block[:, None], shift, S, ALL_RAND[None, :])
        ups = got - (block >> shift)[:, None]  # numpy >> is floor: cross-checked above
        lows.append(ups.min(axis=1))
        highs.append(ups.max(axis=1))
        sums.append(got.sum(axis=1))
    return np.concatenate(lows), np.concatenate(highs), np.concatenate(sums)


def _check_stochastic(values, shift: int, exact_unbiased: bool):
    low, high, total = _stochastic_all_rand(values, shift)
    for v, lo, hi, tot in zip(values, low.tolist(), high.tolist(), total.tolist(), strict=True):
        floor = ref_floor(v, shift)
        assert lo >= 0 and hi <= 1, (v, shift)  # only floor or floor + 1
        assert tot - floor * (1 << RAND_BITS) == ref_stochastic_up_count(v, shift), (v, shift)
        bias = Fraction(tot, 1 << RAND_BITS) - Fraction(v, 1 << shift)
        if exact_unbiased:
            assert bias == 0, (v, shift)
        else:
            assert -Fraction(1, 1 << RAND_BITS) < bias <= 0, (v, shift, bias)


@pytest.mark.parametrize("shift", range(1, 11))
def test_stochastic_exact_probability_w8(shift):
    """All 256 values of an 8-bit word x all 2**16 random inputs: the result is floor or
    floor + 1, the number of inputs that round up is exactly dropped * 2**(16-s), so
    P(up) = dropped / 2**s and E[result] = value / 2**s exactly (no bias at all)."""
    _check_stochastic(list(WORD8), shift, exact_unbiased=True)


@pytest.mark.parametrize("shift", range(11, 17))
def test_stochastic_exact_probability_wide(shift):
    """Shifts 11..16 on a dense subset of 20-bit words (all dropped-bit patterns near 0 and
    2**s, plus random ones), every random input: still exactly unbiased."""
    rng = np.random.default_rng(shift)
    edge = [0, 1, 2, (1 << shift) - 1, 1 << shift, (1 << shift) + 1, -1, -(1 << shift),
            (1 << (shift - 1)), -(1 << (shift - 1)), (1 << 19) - 1, -(1 << 19)]
    values = edge + rng.integers(-(1 << 19), 1 << 19, 36).tolist()
    _check_stochastic(values, shift, exact_unbiased=True)


@pytest.mark.parametrize("shift", [17, 18, 20, 24, 31, 40])
def test_stochastic_bias_bound_beyond_16(shift):
    """For s > 16 the probability of rounding up is the value of the top 16 dropped bits
    divided by 2**16: E[result] - value/2**s lies in (-2**-16, 0] ulp."""
    rng = np.random.default_rng(100 + shift)
    dropped = [0, 1, (1 << shift) - 1, 1 << (shift - 1), (1 << (shift - 16)) - 1,
               1 << (shift - 16), (1 << shift) - (1 << (shift - 16))]
    dropped += rng.integers(0, 1 << shift, 25).tolist()
    highs = rng.integers(-(1 << 12), 1 << 12, len(dropped)).tolist()
    values = [(h << shift) + d for h, d in zip(highs, dropped, strict=True)]
    _check_stochastic(values, shift, exact_unbiased=False)


@pytest.mark.parametrize("shift", [1, 3, 8, 16, 17, 25])
def test_stochastic_int_and_array_paths_agree(shift):
    """The Python-int path and the int64 / object array paths give identical results."""
    rand = np.concatenate([ALL_RAND[::251], [0, 1, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF]])
    values = np.array(list(WORD8) + [(1 << 40) + 12345, -(1 << 40) - 777], dtype=np.int64)
    arr = shift_right(values[:, None], shift, S, rand[None, :])
    obj = shift_right(values.astype(object)[:, None], shift, S, rand.astype(object)[None, :])
    for i, v in enumerate(values.tolist()):
        ints = [shift_right(v, shift, S, int(u)) for u in rand.tolist()]
        assert arr[i].tolist() == ints
        assert [int(x) for x in obj[i]] == ints


def test_stochastic_extremes_of_rand():
    # u = 0 always truncates; u = 0xFFFF rounds up whenever a dropped bit is set (s <= 16).
    for shift in range(1, 17):
        for v in WORD8:
            assert shift_right(v, shift, S, 0) == ref_floor(v, shift)
            exact = Fraction(v, 1 << shift)
            assert shift_right(v, shift, S, 0xFFFF) == math.ceil(exact)


def test_stochastic_needs_rand_and_bad_arguments():
    with pytest.raises(ValueError, match="random bits"):
        shift_right(5, 2, S)
    with pytest.raises(ValueError, match="shift >= 0"):
        shift_right(5, -1, T)
    with pytest.raises(ValueError, match="shift >= 0"):
        shift_left(5, -1)
    with pytest.raises(ValueError):
        shift_right(5, 2, 3)  # not a rounding mode


def test_int64_guards_refuse_to_wrap():
    # (shift_right's stochastic addition is not guarded: its callers keep |value| + 2**shift
    # below 2**62, see the comment in shift_right.)
    with pytest.raises(OverflowError):
        shift_left(np.array([1 << 40], dtype=np.int64), 22)
    np.testing.assert_array_equal(shift_left(np.array([(1 << 40) - 1, -(1 << 40)]), 21),
                                  np.array([((1 << 40) - 1) << 21, -(1 << 61)]))
    # Python ints are never limited
    assert shift_left(1 << 70, 30) == 1 << 100


# -- saturate ------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [2, 3, 8, 17, 32, 48])
def test_saturate_signed_corners(width):
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    assert signed_range(width) == (lo, hi)
    cases = {hi: (hi, False), hi + 1: (hi, True), hi + 1000: (hi, True), lo: (lo, False),
             lo - 1: (lo, True), -hi: (-hi, False), -hi - 1: (lo, False), -hi - 2: (lo, True),
             0: (0, False), -1: (-1, False), 1 << 70: (hi, True), -(1 << 70): (lo, True)}
    for value, expected in cases.items():
        assert saturate(value, width) == expected, (width, value)
    arr_values = [v for v in cases if abs(v) < 1 << 62]
    clamped, clipped = saturate(np.array(arr_values, dtype=np.int64), width)
    np.testing.assert_array_equal(clamped, [cases[v][0] for v in arr_values])
    np.testing.assert_array_equal(clipped, [cases[v][1] for v in arr_values])


@pytest.mark.parametrize("width", [1, 2, 5, 16, 32])
def test_saturate_unsigned_corners(width):
    hi = (1 << width) - 1
    cases = {0: (0, False), -1: (0, True), hi: (hi, False), hi + 1: (hi, True),
             -(1 << 40): (0, True)}
    for value, expected in cases.items():
        assert saturate(value, width, signed=False) == expected
    clamped, clipped = saturate(np.array(list(cases), dtype=np.int64), width, signed=False)
    np.testing.assert_array_equal(clamped, [c[0] for c in cases.values()])
    np.testing.assert_array_equal(clipped, [c[1] for c in cases.values()])


def test_saturate_exhaustive_small_widths():
    values = list(range(-40, 41))
    for width in range(2, 7):
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        expected = [min(max(v, lo), hi) for v in values]
        clamped, clipped = saturate(np.array(values, dtype=np.int64), width)
        np.testing.assert_array_equal(clamped, expected)
        np.testing.assert_array_equal(clipped, [v != e for v, e in zip(values, expected,
                                                                      strict=True)])
        assert [saturate(v, width)[0] for v in values] == expected


# -- align ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [T, H])
def test_align_matches_fraction_reference(mode):
    values = np.array(WORD8, dtype=np.int64)
    for from_frac in range(0, 10):
        for to_frac in range(0, 10):
            got = align(values, from_frac, to_frac, mode)
            exact = [Fraction(v, 1 << from_frac) * (1 << to_frac) for v in WORD8]
            if to_frac >= from_frac:
                expected = [int(e) for e in exact]  # gaining bits is exact
                assert all(e.denominator == 1 for e in exact)
            elif mode is T:
                expected = [math.floor(e) for e in exact]
            else:
                expected = [ref_half_even(v, from_frac - to_frac) for v in WORD8]
            np.testing.assert_array_equal(got, expected)
            assert [align(v, from_frac, to_frac, mode) for v in WORD8] == expected


def test_align_stochastic_passes_rand():
    v = 0b1011  # 11 / 4 = 2.75 with 2 fraction bits
    assert align(v, 2, 0, S, 0) == 2
    assert align(v, 2, 0, S, 0x4000) == 3  # offset 1 (of 4): 11 + 1 = 12 -> 3
    assert align(v, 2, 0, S, 0x3FFF) == 2
    assert align(v, 2, 5, S, 0xFFFF) == v << 3  # gaining bits ignores rand


# -- FixedFormat ---------------------------------------------------------------------------

def test_fixed_format_range_and_conversion():
    fmt = FixedFormat(8, 4)
    assert (fmt.min_word, fmt.max_word) == (-128, 127)
    assert (FixedFormat(8, 4, signed=False).min_word, FixedFormat(8, 4, False).max_word) == \
        (0, 255)
    assert fmt.from_float(1.03125) == 16  # 16.5 -> 16 (half even)
    assert fmt.from_float(1.09375) == 18  # 17.5 -> 18
    assert fmt.from_float(100.0) == 127 and fmt.from_float(-100.0) == -128
    np.testing.assert_array_equal(fmt.from_float(np.array([0.5, -0.5])), [8, -8])
    assert float(fmt.to_float(-24)) == -1.5
    assert str(fmt) == "<8,4>"
    for bad in (0, 257, 3.0):
        with pytest.raises(ConfigError):
            FixedFormat(bad, 0)
    with pytest.raises(ConfigError):
        FixedFormat(8, 1.5)
