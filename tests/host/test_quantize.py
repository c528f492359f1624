"""The stochastic quantizer (:mod:`zipsgd.host.quantize`): exact unbiasedness, independence of
the two samples, and the bias that double sampling removes (ZipML, ICML 2017, section 2.2).

``quantize_fields`` rounds a value up iff ``uniform < prob_up``, drawing one uniform per field
and per sample bit from ``rng.random``.  Feeding it chosen uniforms (a stub generator) makes the
probability of rounding up an exact count; the real generator's uniforms are multiples of
``2**-53``, so an exact threshold at a dyadic ``p`` means ``P(up) = p`` exactly.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from zipsgd.host.quantize import epoch_rng, level_values, quantize_fields, quantize_fields_levels
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.stream import Encoding, StreamLayout, decode_fields

ULP = 2.0**-53  # spacing of Generator.random() outputs in [0, 1)


class StubRng:
    """Stands in for numpy's Generator: ``random(shape)`` returns chosen uniforms."""

    def __init__(self, make):
        self.make = make
        self.shapes = []

    def random(self, shape):
        self.shapes.append(shape)
        out = np.broadcast_to(np.asarray(self.make(shape), dtype=np.float64), shape)
        return np.array(out)


def exact_split(value: Fraction, bits: int) -> tuple[int, Fraction]:
    """Interval index and exact probability of rounding up (the documented rule)."""
    t = (value + 1) * (1 << (bits - 1))
    index = min(math.floor(t), (1 << bits) - 1)
    return index, t - index


def level(q: int, bits: int) -> Fraction:
    return -1 + Fraction(2 * q, 1 << bits)


def sample_bits(fields: np.ndarray, bits: int, k: int) -> np.ndarray:
    return ((fields >> np.uint64(bits + k)) & np.uint64(1)).astype(np.int64)


ENCODINGS = [Encoding.DOUBLE, Encoding.SINGLE]


# -- exact probability of rounding up --------------------------------------------------------

@pytest.mark.parametrize("encoding", ENCODINGS, ids=["double", "single"])
@pytest.mark.parametrize("bits", range(1, 9))
def test_threshold_is_exactly_prob_up(encoding, bits):
    """Values k / 2**11 on [-1, 1]: the index is the documented one and a sample bit is set
    iff uniform < p exactly (set at p - 2**-53, clear at p): with uniforms on the 2**-53 grid,
    P(up) = p."""
    grid = [Fraction(k, 1 << 11) for k in range(-(1 << 11), (1 << 11) + 1)]
    features = np.array([[float(v) for v in grid]])
    split = [exact_split(v, bits) for v in grid]
    p = np.array([float(prob) for _, prob in split])
    assert all(Fraction(float(prob)) == prob for _, prob in split)  # dyadic: floats are exact
    layout = StreamLayout(encoding, bits, 64)
    draws = 2 if encoding is Encoding.DOUBLE else 1
    below = np.concatenate([[0.0], np.where(p > 0, p - ULP, 0.0)])  # label 0 first
    at = np.concatenate([[0.0], np.where(p < 1, p, 1.0 - ULP)])
    for uniforms, expect_up in ((below, p > 0), (at, p >= 1)):
        stub = StubRng(lambda shape, u=uniforms: u[None, :, None])
        fields = quantize_fields(np.zeros(1), features, layout, stub)
        assert stub.shapes == [(1, len(grid) + 1, draws)]
        index = (fields[0, 1:] & np.uint64((1 << bits) - 1)).astype(np.int64)
        np.testing.assert_array_equal(index, [i for i, _ in split])
        for k in range(draws):
            np.testing.assert_array_equal(sample_bits(fields, bits, k)[0, 1:], expect_up)
        assert int(fields.max()) < 1 << layout.field_width


@pytest.mark.parametrize("encoding", ENCODINGS, ids=["double", "single"])
@pytest.mark.parametrize("bits", range(1, 9))
def test_unbiased_by_enumeration_over_uniform_grid(encoding, bits):
    """Values k / 2**8: over the complete uniform grid j / 2**9 (row j), the fraction of rows
    that round up equals p exactly and the mean level value equals v exactly."""
    values = [Fraction(k, 1 << 8) for k in range(-(1 << 8), (1 << 8) + 1)]
    rows = 1 << 9
    grid = np.arange(rows) / rows
    layout = StreamLayout(encoding, bits, 64)

    def make(shape):
        u = np.empty(shape)
        u[..., 0] = grid[:, None]
        if shape[-1] == 2:
            u[..., 1] = grid[::-1, None]  # the second sample walks the grid backwards
        return u

    features = np.tile([float(v) for v in values], (rows, 1))
    fields = quantize_fields(np.zeros(rows), features, layout, StubRng(make))[:, 1:]
    index = (fields & np.uint64((1 << bits) - 1)).astype(np.int64)
    for k in range(2 if encoding is Encoding.DOUBLE else 1):
        ups = sample_bits(fields, bits, k).sum(axis=0)
        level_sums = (index + sample_bits(fields, bits, k)).sum(axis=0)  # sum of q over rows
        for col, v in enumerate(values):
            i, p = exact_split(v, bits)
            assert Fraction(int(ups[col]), rows) == p, (v, bits)
            # mean level value = -1 + 2 * mean(q) / 2**b
            mean = -1 + Fraction(2 * int(level_sums[col]), rows << bits)
            assert mean == v, (v, bits, mean)


def test_sample_bits_are_independent_exactly():
    """Double sampling draws each sample bit from its own uniform.  Over the product grid of
    (u1, u2) in (j/64, k/64) the joint counts of (s1, s2) are exactly 4096 P(s1) P(s2)."""
    bits = 2
    # t = (v + 1) * 2 = interval + p; t = 4 is v = 1, rounded up with p = 1
    t_values = [Fraction(0), 1 + Fraction(1, 64), 2 + Fraction(1, 4), Fraction(1, 2),
                1 + Fraction(41, 64), Fraction(4)]
    values = [t / 2 - 1 for t in t_values]
    probs = [exact_split(v, bits)[1] for v in values]
    assert probs == [0, Fraction(1, 64), Fraction(1, 4), Fraction(1, 2), Fraction(41, 64), 1]
    u1, u2 = np.meshgrid(np.arange(64) / 64, np.arange(64) / 64, indexing="ij")

    def make(shape):
        u = np.empty(shape)
        u[..., 0] = u1.reshape(-1, 1)
        u[..., 1] = u2.reshape(-1, 1)
        return u

    rows = 64 * 64
    features = np.tile([float(v) for v in values], (rows, 1))
    layout = StreamLayout(Encoding.DOUBLE, bits, 64)
    fields = quantize_fields(np.zeros(rows), features, layout, StubRng(make))[:, 1:]
    s1, s2 = sample_bits(fields, bits, 0), sample_bits(fields, bits, 1)
    for col, v in enumerate(values):
        p = exact_split(v, bits)[1]
        for a, c in itertools.product((0, 1), repeat=2):
            count = int(((s1[:, col] == a) & (s2[:, col] == c)).sum())
            pa = p if a else 1 - p
            pc = p if c else 1 - p
            assert Fraction(count, rows) == pa * pc, (v, a, c)


def test_level_values():
    for bits in range(1, 9):
        levels = level_values(bits)
        assert levels.tolist() == [float(level(q, bits)) for q in range(2**bits + 1)]


def test_end_points():
    """v = -1 is level 0 for sure, v = 1 is level 2**b for sure (p = 1: every uniform < 1)."""
    for bits in range(1, 9):
        layout = StreamLayout(Encoding.DOUBLE, bits, 64)
        stub = StubRng(lambda shape: 1.0 - ULP)
        fields = quantize_fields(np.array([1.0]), np.array([[-1.0, 1.0]]), layout, stub)
        decoded = decode_fields(fields, layout)
        np.testing.assert_array_equal(decoded.first, [[-256, 256]])
        np.testing.assert_array_equal(decoded.second, [[-256, 256]])
        assert decoded.label.tolist() == [512]


# -- seeded statistical checks with the real generator ---------------------------------------

def test_mean_level_within_five_sigma():
    """N draws of fixed values at b = 3 with the real generator.  The level value is
    lo + (2/2**b) s with s ~ Bernoulli(p), so the mean of N draws has standard deviation
    sigma = (2/2**b) sqrt(p (1-p) / N); we require |mean - v| < 5 sigma (+ 1e-12 for p = 0)."""
    bits, n_rows = 3, 100_000
    values = np.array([0.3, -0.77, 0.01, 0.999, -0.5, 0.123456789])
    layout = StreamLayout(Encoding.DOUBLE, bits, 64)
    fields = quantize_fields(np.zeros(n_rows), np.tile(values, (n_rows, 1)), layout,
                             epoch_rng(7, 0))
    decoded = decode_fields(fields, layout)
    t = (values + 1) * 2 ** (bits - 1)
    p = t - np.minimum(np.floor(t), 2**bits - 1)
    sigma = (2 / 2**bits) * np.sqrt(p * (1 - p) / n_rows)
    for sample in (decoded.first, decoded.second):
        mean = sample.mean(axis=0) / 256
        assert np.all(np.abs(mean - values) < 5 * sigma + 1e-12), (mean - values) / sigma


def test_many_distinct_values_unbiased():
    """200000 random values, one draw each, b = 2: the mean error sum(Q - v)/N has variance
    sum((2/2**b)^2 p_i (1-p_i)) / N^2; |mean error| < 5 of its standard deviation."""
    bits = 2
    rng = np.random.default_rng(11)
    values = rng.uniform(-1, 1, size=(200, 1000))
    layout = StreamLayout(Encoding.SINGLE, bits, 64)
    fields = quantize_fields(np.zeros(200), values, layout, epoch_rng(3, 1))
    got = decode_fields(fields, layout).first / 256
    t = (values + 1) * 2 ** (bits - 1)
    p = t - np.minimum(np.floor(t), 2**bits - 1)
    sd = np.sqrt(((2 / 2**bits) ** 2 * p * (1 - p)).sum()) / values.size
    assert abs((got - values).mean()) < 5 * sd


def test_sample_bits_uncorrelated_statistically():
    """Real generator, N = 200000 rows: with the known p, mean((s1-p)(s2-p)) has mean 0 under
    independence and standard deviation p (1-p) / sqrt(N); require < 5 of those."""
    bits, n_rows = 2, 200_000
    values = np.array([0.3, -0.1, 0.71, -0.9])
    layout = StreamLayout(Encoding.DOUBLE, bits, 64)
    fields = quantize_fields(np.zeros(n_rows), np.tile(values, (n_rows, 1)), layout,
                             epoch_rng(2017, 0))[:, 1:]
    t = (values + 1) * 2 ** (bits - 1)
    p = t - np.floor(t)
    s1, s2 = sample_bits(fields, bits, 0), sample_bits(fields, bits, 1)
    cov = ((s1 - p) * (s2 - p)).mean(axis=0)
    sd = p * (1 - p) / np.sqrt(n_rows)
    assert np.all(np.abs(cov) < 5 * sd), cov / sd
    assert not np.array_equal(s1, s2)


# -- the gradient estimators -----------------------------------------------------------------

A = [Fraction(19, 64), Fraction(-71, 128), Fraction(13, 16)]
LABEL = Fraction(7, 16)
X = [Fraction(3, 2), Fraction(-2), Fraction(5, 4)]


def enumerate_gradient(encoding: Encoding, bits: int, a, label, x):
    """E[g] and E[g**2] over every outcome of the sample bits, with g computed the engine's
    way from decode_fields: g = F2/256 * (F1/256 . x - Y/512).  The index bits come from the
    code path; the probability of each outcome from the exact p (see the tests above)."""
    layout = StreamLayout(encoding, bits, 64)
    values = [label, *a]
    base = quantize_fields(np.array([float(label)]), np.array([[float(v) for v in a]]), layout,
                           StubRng(lambda shape: 1.0 - ULP))[0]
    index = (base & np.uint64((1 << bits) - 1)).astype(np.int64).tolist()
    probs = [exact_split(v, bits)[1] for v in values]
    draws = 2 if encoding is Encoding.DOUBLE else 1
    outcomes = list(itertools.product((0, 1), repeat=draws * len(values)))
    fields = np.array([[index[f] | sum(o[draws * f + k] << (bits + k) for k in range(draws))
                        for f in range(len(values))] for o in outcomes], dtype=np.uint64)
    decoded = decode_fields(fields, layout)
    mean = [Fraction(0)] * len(a)
    square = [Fraction(0)] * len(a)
    for row, o in enumerate(outcomes):
        weight = Fraction(1)
        for f in range(len(values)):
            for k in range(draws):
                weight *= probs[f] if o[draws * f + k] else 1 - probs[f]
        if weight == 0:
            continue
        dot = sum((Fraction(int(decoded.first[row, j]), 256) * x[j] for j in range(len(a))),
                  Fraction(0))
        residual = dot - Fraction(int(decoded.label[row]), 512)
        for j in range(len(a)):
            g = Fraction(int(decoded.second[row, j]), 256) * residual
            mean[j] += weight * g
            square[j] += weight * g * g
    variance = [s - m * m for s, m in zip(square, mean, strict=True)]
    return mean, variance


def full_gradient(a, label, x):
    residual = sum((ai * xi for ai, xi in zip(a, x, strict=True)), Fraction(0)) - label
    return [ai * residual for ai in a]


@pytest.mark.parametrize("bits", [1, 2, 3, 5])
def test_double_sampled_gradient_exactly_unbiased(bits):
    """E[Q2(a) (Q1(a).x - Q(b))] = a (a.x - b), exactly, by enumerating all 4**(n+1)
    outcomes (n = 3, label quantized too)."""
    mean, _ = enumerate_gradient(Encoding.DOUBLE, bits, A, LABEL, X)
    assert mean == full_gradient(A, LABEL, X)


@pytest.mark.parametrize("bits", [1, 2, 3, 5])
def test_single_sampled_gradient_bias_is_d_a_x(bits):
    """E[Q(a) (Q(a).x - Q(b))] = a (a.x - b) + D_a x with D_a = diag(Var Q(a_i)) and
    Var Q(a_i) = (2/2**b)^2 p_i (1 - p_i): the paper's bias term, exactly."""
    mean, _ = enumerate_gradient(Encoding.SINGLE, bits, A, LABEL, X)
    step = Fraction(2, 1 << bits)
    d_a = [step * step * p * (1 - p) for p in (exact_split(v, bits)[1] for v in A)]
    expected = [g + d * xi for g, d, xi in zip(full_gradient(A, LABEL, X), d_a, X, strict=True)]
    assert mean == expected
    assert any(d != 0 for d in d_a)


def _empirical_gradient(encoding: Encoding, bits: int, n_rows: int, seed: int) -> np.ndarray:
    layout = StreamLayout(encoding, bits, 64)
    a = np.array([float(v) for v in A])
    fields = quantize_fields(np.full(n_rows, float(LABEL)), np.tile(a, (n_rows, 1)), layout,
                             epoch_rng(seed, 0))
    decoded = decode_fields(fields, layout)
    x = np.array([float(v) for v in X])
    residual = decoded.first / 256 @ x - decoded.label / 512
    return (decoded.second / 256 * residual[:, None]).mean(axis=0)


def test_gradients_statistically():
    """Real generator, N = 100000 samples, b = 2.  The standard error of a mean gradient
    component is sqrt(Var g_j / N) with Var g_j from the exact enumeration.  The double-sampled
    mean is within 5 standard errors of a (a.x - b); the single-sampled mean is within 5 of
    a (a.x - b) + D_a x and more than 5 away from a (a.x - b) (the bias is measurable)."""
    bits, n_rows = 2, 100_000
    truth = np.array([float(g) for g in full_gradient(A, LABEL, X)])
    mean_d, var_d = enumerate_gradient(Encoding.DOUBLE, bits, A, LABEL, X)
    se_d = np.sqrt(np.array([float(v) for v in var_d]) / n_rows)
    got_d = _empirical_gradient(Encoding.DOUBLE, bits, n_rows, seed=5)
    assert np.all(np.abs(got_d - truth) < 5 * se_d), (got_d - truth) / se_d
    mean_s, var_s = enumerate_gradient(Encoding.SINGLE, bits, A, LABEL, X)
    se_s = np.sqrt(np.array([float(v) for v in var_s]) / n_rows)
    biased = np.array([float(m) for m in mean_s])
    got_s = _empirical_gradient(Encoding.SINGLE, bits, n_rows, seed=5)
    assert np.all(np.abs(got_s - biased) < 5 * se_s), (got_s - biased) / se_s
    assert np.any(np.abs(got_s - truth) > 5 * se_s), (got_s - truth) / se_s
    assert np.all(np.abs(biased - truth) > 10 * se_s)  # every component's bias is visible


# -- reproducibility ------------------------------------------------------------------------

def test_same_seed_and_epoch_reproduce_fields():
    rng = np.random.default_rng(1)
    labels, features = rng.uniform(-1, 1, 50), rng.uniform(-1, 1, (50, 20))
    layout = StreamLayout(Encoding.DOUBLE, 3, 64)

    def run(seed, epoch):
        return quantize_fields(labels, features, layout, epoch_rng(seed, epoch))

    np.testing.assert_array_equal(run(4, 2), run(4, 2))
    assert not np.array_equal(run(4, 2), run(4, 3))
    assert not np.array_equal(run(4, 2), run(5, 2))
    # the result does not depend on how rows are chunked
    gen = epoch_rng(4, 2)
    chunked = np.vstack([quantize_fields(labels[:17], features[:17], layout, gen),
                         quantize_fields(labels[17:], features[17:], layout, gen)])
    np.testing.assert_array_equal(chunked, run(4, 2))
    with pytest.raises(ConfigError):
        epoch_rng(-1, 0)
    with pytest.raises(ConfigError):
        epoch_rng(0, -1)


def test_raw32_deterministic_half_even():
    layout = StreamLayout(Encoding.RAW32, 32, 64)
    u = 2.0**-30
    cases = {0.0: 0, 1.0: 1 << 30, -1.0: -(1 << 30), 0.5 * u: 0, 1.5 * u: 2, 2.5 * u: 2,
             -0.5 * u: 0, -1.5 * u: -2, -2.5 * u: -2, 0.75 * u: 1, 0.25: 1 << 28,
             1 - 0.5 * u: 1 << 30, -1 + 0.5 * u: -(1 << 30)}
    labels = np.array(list(cases))
    features = labels[::-1].reshape(-1, 1)
    fields = quantize_fields(labels, features, layout, None)
    again = quantize_fields(labels, features, layout, epoch_rng(1, 1))
    np.testing.assert_array_equal(fields, again)
    expected = [w & 0xFFFF_FFFF for w in cases.values()]
    assert fields[:, 0].tolist() == expected
    assert fields[:, 1].tolist() == expected[::-1]
    np.testing.assert_array_equal(decode_fields(fields, layout).label, list(cases.values()))


@pytest.mark.parametrize("bad", [1.0 + 2**-52, -1.5, np.nan, np.inf])
def test_rejects_values_outside_unit_interval(bad):
    for encoding in Encoding:
        layout = StreamLayout.make(encoding, 4, 64)
        with pytest.raises(ConfigError, match="within"):
            quantize_fields(np.array([0.0]), np.array([[bad]]), layout, epoch_rng(0, 0))
        with pytest.raises(ConfigError):
            quantize_fields(np.array([bad]), np.array([[0.0]]), layout, epoch_rng(0, 0))


# -- non-uniform levels (quantize_fields_levels) ---------------------------------------------

def random_levels(rng, columns: int, bits: int) -> np.ndarray:
    """Strictly increasing per-column levels with random, very unequal gaps."""
    gaps = rng.exponential(size=(columns, 1 << bits)) ** 3 + 1e-3
    return np.cumsum(np.column_stack([rng.normal(size=columns), gaps]), axis=1)


def levels_index_and_bits(fields, bits, draws):
    index = (fields & np.uint64((1 << bits) - 1)).astype(np.int64)
    return index, [sample_bits(fields, bits, k) for k in range(draws)]


@pytest.mark.parametrize("encoding", ENCODINGS, ids=["double", "single"])
@pytest.mark.parametrize("bits", range(1, 9))
def test_levels_unbiased_by_exact_enumeration(encoding, bits):
    """Every level, every midpoint and random values of random non-uniform levels: the index
    is the interval holding v, a sample bit is set iff its uniform < p (checked just below and
    at p), and the expectation over the two outcomes, (1 - p) l_i + p l_{i+1}, equals v."""
    rng = np.random.default_rng(bits)
    levels = random_levels(rng, 3, bits)
    mids = (levels[:, 1:] + levels[:, :-1]) / 2
    rand = levels[:, :1] + rng.uniform(size=(3, 40)) * (levels[:, -1:] - levels[:, :1])
    values = np.concatenate([levels, mids, rand], axis=1).T  # rows: samples; col 0: label
    layout = StreamLayout(encoding, bits, 64)
    draws = 2 if encoding is Encoding.DOUBLE else 1
    index = np.clip(np.array([np.searchsorted(levels[c], values[:, c], side="right") - 1
                              for c in range(3)]).T, 0, (1 << bits) - 1)
    low = levels[np.arange(3), index]
    high = levels[np.arange(3), index + 1]
    p = (values - low) / (high - low)
    assert np.all((low <= values) & (values <= high))
    expectation = (1 - p) * low + p * high
    scale = np.maximum(np.abs(values), np.abs(high - low))
    assert np.all(np.abs(expectation - values) <= 4 * np.finfo(float).eps * scale)
    for uniforms, expect_up in ((np.maximum(p - ULP, 0), p > 0), (np.minimum(p, 1 - ULP), p >= 1)):
        stub = StubRng(lambda shape, u=uniforms: u[..., None])
        fields = quantize_fields_levels(values[:, 0], values[:, 1:], layout, stub, levels)
        assert stub.shapes == [values.shape + (draws,)]
        got_index, got_bits = levels_index_and_bits(fields, bits, draws)
        np.testing.assert_array_equal(got_index, index)
        for sample in got_bits:
            np.testing.assert_array_equal(sample, expect_up)
        assert int(fields.max()) < 1 << layout.field_width


@pytest.mark.parametrize("bits", [1, 4, 8])
def test_uniform_levels_give_the_uniform_fields(bits):
    """With the uniform levels on [-1, 1] the levels path makes the very fields of the
    uniform path from the same generator (dyadic values: both compute p exactly)."""
    rng = np.random.default_rng(5)
    values = rng.integers(-(1 << 10), (1 << 10) + 1, size=(300, 9)) / (1 << 10)
    levels = np.tile(level_values(bits), (9, 1))
    for encoding in ENCODINGS:
        layout = StreamLayout(encoding, bits, 64)
        np.testing.assert_array_equal(
            quantize_fields_levels(values[:, 0], values[:, 1:], layout, epoch_rng(2, 3), levels),
            quantize_fields(values[:, 0], values[:, 1:], layout, epoch_rng(2, 3)))


def test_levels_mean_within_five_sigma():
    """Real generator, 100000 rows of fixed values on random levels at b = 3 (double): each
    sample's level has variance (l_{i+1} - v)(v - l_i), so the mean of N draws is within
    5 sigma = 5 sqrt(var / N) of v."""
    bits, rows = 3, 100_000
    rng = np.random.default_rng(17)
    levels = random_levels(rng, 5, bits)
    values = levels[:, 0] + rng.uniform(size=5) * (levels[:, -1] - levels[:, 0])
    layout = StreamLayout(Encoding.DOUBLE, bits, 64)
    table = np.tile(values, (rows, 1))
    fields = quantize_fields_levels(table[:, 0], table[:, 1:], layout, epoch_rng(9, 0), levels)
    index, samples = levels_index_and_bits(fields, bits, 2)
    columns = np.arange(5)
    low, high = levels[columns, index[0]], levels[columns, index[0] + 1]
    sigma = np.sqrt((high - values) * (values - low) / rows)
    for sample in samples:
        mean = (low + sample * (high - low)).mean(axis=0)
        assert np.all(np.abs(mean - values) < 5 * sigma + 1e-12), (mean - values) / sigma
    # The two samples are independent draws: about half of the rows differ when p ~ 1/2.
    assert not np.array_equal(samples[0], samples[1])


def test_levels_chunking_does_not_change_fields():
    rng = np.random.default_rng(4)
    levels = random_levels(rng, 4, 2)
    values = levels[:, 0] + rng.uniform(size=(101, 4)) * (levels[:, -1] - levels[:, 0])
    layout = StreamLayout(Encoding.DOUBLE, 2, 64)
    whole = quantize_fields_levels(values[:, 0], values[:, 1:], layout, epoch_rng(1, 0), levels)
    gen = epoch_rng(1, 0)
    parts = [quantize_fields_levels(values[a:a + 17, 0], values[a:a + 17, 1:], layout, gen,
                                    levels) for a in range(0, 101, 17)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_levels_rejects_bad_input():
    layout = StreamLayout(Encoding.DOUBLE, 1, 64)
    good = np.array([[-1.0, 0.0, 1.0], [0.0, 0.5, 2.0]])
    label, feature = np.array([0.0]), np.array([[1.0]])
    assert quantize_fields_levels(label, feature, layout, epoch_rng(0, 0), good).shape == (1, 2)
    for bad, match in ((good[:, :2], "shape"), (good[::-1, ::-1], "increasing"),
                       (np.where(good == 0.5, np.nan, good), "finite")):
        with pytest.raises(ConfigError, match=match):
            quantize_fields_levels(label, feature, layout, epoch_rng(0, 0), bad)
    for value in (2.5, -0.1, np.nan, np.inf):
        with pytest.raises(ConfigError, match="column 1"):
            quantize_fields_levels(label, np.array([[value]]), layout, epoch_rng(0, 0), good)
    with pytest.raises(ConfigError, match="raw32"):
        quantize_fields_levels(label, feature, StreamLayout.make(Encoding.RAW32, 4, 64),
                               epoch_rng(0, 0), good)
