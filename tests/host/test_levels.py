"""Variance-optimal levels (:mod:`zipsgd.host.levels`): the objective, the three solvers
against brute force, the approximation's factor-2 bound, the bounded-memory statistics pass
and the degenerate inputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from zipsgd.host.levels import (
    DEFAULT_POINTS,
    MAX_POINTS,
    MIN_POINTS,
    LevelStats,
    mean_variance,
    optimal_levels,
    uniform_levels,
)
from zipsgd.spec.errors import ConfigError, DatasetError


def brute_force(candidates, values, bits, weights=None) -> float:
    """The least mean variance over every choice of ``2**bits - 1`` inner candidates."""
    candidates = np.asarray(candidates, dtype=np.float64)
    inner = range(1, candidates.shape[0] - 1)
    return min(mean_variance(values, candidates[[0, *subset, candidates.shape[0] - 1]], weights)
               for subset in itertools.combinations(inner, (1 << bits) - 1))


def sample(rng, kind: int, size: int) -> np.ndarray:
    """Skewed, heavy-tailed, clustered or discrete values."""
    if kind == 0:
        return rng.standard_normal(size) ** 3
    if kind == 1:
        return rng.exponential(size=size)
    if kind == 2:
        return np.concatenate([rng.normal(0, 0.05, size // 2), rng.normal(3, 1, size - size // 2)])
    return rng.integers(0, 12, size) * 0.5 + rng.normal(0, 0.01, size)


# -- the objective ---------------------------------------------------------------------------

def test_mean_variance_by_hand():
    levels = [0.0, 1.0, 4.0]
    # 0.5 in [0, 1]: 0.25; 2 in [1, 4]: 2 * 1 = 2; 1 and 4 on levels: 0.
    assert mean_variance([0.5, 2.0, 1.0, 4.0], levels) == pytest.approx((0.25 + 2.0) / 4)
    assert mean_variance([0.5, 2.0], levels, weights=[3, 1]) == pytest.approx(
        (3 * 0.25 + 2.0) / 4)


def test_mean_variance_is_the_sampling_variance():
    """The objective is what stochastic rounding does: E[(Q(v) - v)**2] over the two
    outcomes of each value."""
    rng = np.random.default_rng(0)
    levels = np.sort(rng.uniform(-3, 3, 9))
    values = rng.uniform(levels[0], levels[-1], 50)
    i = np.clip(np.searchsorted(levels, values, side="right") - 1, 0, 7)
    lo, hi = levels[i], levels[i + 1]
    p = (values - lo) / (hi - lo)
    direct = ((1 - p) * (lo - values) ** 2 + p * (hi - values) ** 2).mean()
    assert mean_variance(values, levels) == pytest.approx(direct, rel=1e-12)


def test_mean_variance_rejects_bad_levels_and_values():
    with pytest.raises(ConfigError, match="increasing"):
        mean_variance([0.5], [0.0, 1.0, 1.0])
    with pytest.raises(ConfigError, match="within"):
        mean_variance([1.5], [0.0, 1.0])
    with pytest.raises(DatasetError, match="finite"):
        mean_variance([np.nan], [0.0, 1.0])


# -- solvers against brute force -------------------------------------------------------------

@pytest.mark.parametrize("bits", [1, 2])
def test_exact_equals_brute_force_over_distinct_values(bits):
    rng = np.random.default_rng(100 + bits)
    for trial in range(30):
        values = sample(rng, trial % 4, int(rng.integers(6, 14)))
        weights = rng.integers(1, 5, values.shape[0]) if trial % 2 else None
        distinct = np.unique(values)
        levels = optimal_levels(values, bits, weights=weights)
        assert levels.shape == ((1 << bits) + 1,)
        assert levels[0] == values.min() and levels[-1] == values.max()
        assert np.all(np.diff(levels) > 0)
        if distinct.shape[0] > 1 << bits:
            assert set(levels) <= set(distinct)
            best = brute_force(distinct, values, bits, weights)
            assert mean_variance(values, levels, weights) == pytest.approx(best, rel=1e-9,
                                                                           abs=1e-15)


@pytest.mark.parametrize("bits", [1, 2])
def test_discretized_equals_brute_force_over_candidate_points(bits):
    """M = 8 bins over [min, max]: the levels are the best subset of the bin boundaries."""
    rng = np.random.default_rng(200 + bits)
    for trial in range(30):
        values = sample(rng, trial % 4, 60)
        levels = optimal_levels(values, bits, method="discretized", points=8)
        edges = np.linspace(values.min(), values.max(), 9)
        assert np.allclose(levels, edges[np.argmin(np.abs(edges[:, None] - levels), axis=0)],
                           rtol=0, atol=1e-12 * np.ptp(values))
        best = brute_force(edges, values, bits)
        assert mean_variance(values, levels) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("bits", [1, 2])
def test_approx2_small_inputs_are_exact(bits):
    """With at most 4s candidates the merging pass keeps them all: approx2 is exact."""
    rng = np.random.default_rng(300 + bits)
    for trial in range(20):
        values = sample(rng, trial % 4, 4 << bits)
        distinct = np.unique(values)
        levels = optimal_levels(values, bits, method="approx2")
        assert mean_variance(values, levels) == pytest.approx(
            brute_force(distinct, values, bits), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_approx2_within_factor_two_of_exact(bits):
    """Random inputs with many more candidates than 4s (seeded): approx2 <= 2 * optimum
    (the optimum itself checked against brute force above)."""
    rng = np.random.default_rng(400 + bits)
    ratios = []
    for trial in range(60):
        values = sample(rng, trial % 4, int(rng.integers(40, 400)))
        best = mean_variance(values, optimal_levels(values, bits))
        approx = mean_variance(values, optimal_levels(values, bits, method="approx2"))
        assert best <= approx * (1 + 1e-9)
        ratios.append(approx / best)
    assert max(ratios) <= 2.0, max(ratios)


def test_solvers_beat_uniform_and_agree_on_large_inputs():
    rng = np.random.default_rng(7)
    values = rng.lognormal(size=20_000)
    for bits in (1, 3, 5):
        uniform = mean_variance(values, uniform_levels(values.min(), values.max(), bits))
        disc = mean_variance(values, optimal_levels(values, bits, method="discretized"))
        approx = mean_variance(values, optimal_levels(values, bits, method="approx2"))
        # M = 256 equal bins include the uniform levels (2**bits divides 256).
        assert disc <= uniform * (1 + 1e-9)
        assert approx < uniform


# -- degenerate inputs -----------------------------------------------------------------------

@pytest.mark.parametrize("method", ["exact", "discretized", "approx2"])
@pytest.mark.parametrize("value", [0.0, 0.7, -1.0, 1.0, 250.0])
def test_constant_feature(method, value):
    levels = optimal_levels(np.full(10, value), 3, method=method)
    assert levels.shape == (9,) and np.all(np.diff(levels) > 0)
    assert value in levels
    assert levels[-1 if value >= 0 else 0] == value
    assert levels[-1] - levels[0] == pytest.approx(1.0)
    if -1 <= value <= 1:
        assert levels.min() >= -1 and levels.max() <= 1
    assert mean_variance(np.full(10, value), levels) == 0


@pytest.mark.parametrize("method", ["exact", "approx2"])
def test_fewer_distinct_values_than_levels(method):
    """3 distinct values at b = 2 (5 levels): all three are levels (variance 0) and the other
    two split the widest gap, then the widest of the rest, at midpoints."""
    values = np.array([0.0, 0.0, 1.0, 5.0, 5.0])
    levels = optimal_levels(values, 2, method=method)
    np.testing.assert_array_equal(levels, [0.0, 1.0, 2.0, 3.0, 5.0])
    assert mean_variance(values, levels) == 0
    two = optimal_levels(np.array([-1.0, 1.0]), 3, method=method)
    np.testing.assert_array_equal(two, np.linspace(-1, 1, 9))


@pytest.mark.parametrize("points", [MIN_POINTS - 2, MAX_POINTS + 2, 9, 0, -8, 2.5, "64"])
def test_points_out_of_range(points):
    with pytest.raises(ConfigError, match=f"{MIN_POINTS}..{MAX_POINTS}, found"):
        optimal_levels(np.arange(10.0), 2, method="discretized", points=points)
    with pytest.raises(ConfigError, match="found"):
        LevelStats(3, points=points)


@pytest.mark.parametrize("bits", [0, 9, 2.0])
def test_bits_out_of_range(bits):
    with pytest.raises(ConfigError, match="1..8"):
        optimal_levels(np.arange(10.0), bits)


def test_bad_method_and_too_many_values_for_exact():
    with pytest.raises(ConfigError, match="exact, discretized, approx2"):
        optimal_levels(np.arange(10.0), 2, method="kmeans")
    with pytest.raises(ConfigError, match="at most 4096 distinct values, found 5000"):
        optimal_levels(np.arange(5000.0), 2, method="exact")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values(bad):
    with pytest.raises(DatasetError, match="finite"):
        optimal_levels(np.array([0.0, bad, 1.0]), 2)
    stats = LevelStats(1)
    with pytest.raises(DatasetError, match="column 1"):
        stats.update(np.zeros(3), np.array([[0.0], [bad], [1.0]]))


# -- the statistics pass ---------------------------------------------------------------------

def test_level_stats_exact_while_few_values_and_chunking_free():
    """Discrete columns (at most M distinct values): every method is exact and the chunking
    does not matter."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 50, 1000) * 1.0
    features = np.column_stack([rng.integers(-5, 5, 1000) ** 3, rng.integers(0, 2, 1000)])
    one = LevelStats(2, points=64)
    one.update(labels, features)
    many = LevelStats(2, points=64)
    for start in range(0, 1000, 77):
        many.update(labels[start:start + 77], features[start:start + 77])
    for method in ("exact", "discretized", "approx2"):
        got = many.solve(2, method)
        np.testing.assert_array_equal(got, one.solve(2, method))
    exact = many.solve(2, "exact")
    assert exact.shape == (3, 5)
    for column, values in enumerate([labels, features[:, 0], features[:, 1]]):
        np.testing.assert_array_equal(exact[column], optimal_levels(values, 2))


def test_level_stats_histogram_matches_in_memory_discretized():
    """One chunk that spans the range: the same bins as the in-memory discretized solver."""
    rng = np.random.default_rng(8)
    values = rng.gamma(2.0, size=5000)
    stats = LevelStats(1)
    stats.update(values, values[:, None] * -3 + 1)
    got = stats.solve(3)
    np.testing.assert_allclose(got[0], optimal_levels(values, 3, method="discretized"))
    np.testing.assert_allclose(got[1], optimal_levels(values * -3 + 1, 3, method="discretized"))
    assert got[0, 0] == values.min() and got[0, -1] == values.max()
    with pytest.raises(ConfigError, match="column 0"):
        stats.solve(3, "exact")


def test_level_stats_growing_grid_keeps_moments_exact():
    """Chunks sorted so the range grows many times, both ways: the levels stay strictly
    increasing, cover the data, and their mean variance computed from the histogram's
    candidates is close to the in-memory optimum (the grid is at most 4x coarser)."""
    rng = np.random.default_rng(9)
    values = rng.standard_normal(40_000) * np.exp(rng.uniform(0, 3, 40_000))
    order = np.argsort(np.abs(values))  # small magnitudes first: the range grows both ways
    stats = LevelStats(1, points=DEFAULT_POINTS)
    for start in range(0, values.size, 1000):
        chunk = values[order[start:start + 1000]]
        stats.update(chunk, chunk[:, None])
    levels = stats.solve(4)[0]
    assert levels[0] == values.min() and levels[-1] == values.max()
    assert np.all(np.diff(levels) > 0)
    streamed = mean_variance(values, levels)
    in_memory = mean_variance(values, optimal_levels(values, 4, method="discretized",
                                                     points=DEFAULT_POINTS // 4))
    optimum = mean_variance(values, optimal_levels(values, 4, method="approx2"))
    assert optimum <= streamed * 1.5
    assert streamed <= in_memory * 1.05
    low, high = stats.range()
    assert low[0] == values.min() and high[0] == values.max()


def test_level_stats_rejects_bad_chunks():
    stats = LevelStats(2)
    with pytest.raises(ConfigError, match="expected 2 feature columns, found 3"):
        stats.update(np.zeros(2), np.zeros((2, 3)))
    with pytest.raises(ConfigError, match="at least one row"):
        stats.solve(2)
