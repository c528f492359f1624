"""Column statistics, scaling to [-1, 1] and mapping models back to original units."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from zipsgd.host.datasets import ArraySource, NpySource
from zipsgd.host.scaling import ColumnStats, Scaler
from zipsgd.host.zsgd_file import Scaling
from zipsgd.spec.errors import ConfigError, DatasetError


def problem(seed: int = 0, rows: int = 200, cols: int = 5):
    """A random regression problem with shifted, differently scaled columns and an intercept."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(rows, cols)) * rng.uniform(0.1, 50, cols) + rng.normal(0, 20, cols)
    labels = features @ rng.normal(size=cols) + 7.5 + rng.normal(0, 0.3, rows)
    return labels, features


def lstsq(a, b):
    return np.linalg.lstsq(a, b, rcond=None)[0]


def test_stats_from_source_match_arrays(tmp_path):
    labels, features = problem()
    np.save(tmp_path / "d.npy", np.column_stack([labels, features]))
    chunked = ColumnStats.from_source(NpySource(tmp_path / "d.npy", block_rows=13), 7)
    whole = ColumnStats.from_arrays(labels, features)
    assert chunked.count == whole.count == 200
    assert_array_equal(chunked.minimum, whole.minimum)
    assert_array_equal(chunked.maximum, whole.maximum)
    assert whole.minimum[0] == labels.min() and whole.maximum[3] == features[:, 2].max()


def test_stats_skip_the_pass_for_memory_sources():
    seen = []
    stats = ColumnStats.from_source(ArraySource(*problem()), progress=seen.append)
    assert seen == [200] and stats.count == 200


def test_maxabs_rule():
    stats = ColumnStats(np.array([-4.0, -1.0, 0.0, 2.0]), np.array([2.0, 3.0, 0.0, 2.0]), 5)
    scaler = Scaler.from_stats(stats, Scaling.MAXABS)
    assert_array_equal(scaler.offsets, [0, 0, 0, 0])
    # label 4, features 3, all-zero column -> 1 (stays 0), constant 2 -> 2 (becomes +1)
    assert_array_equal(scaler.scales, [4, 3, 1, 2])
    labels, features = scaler.transform([2.0, -4.0], [[3.0, 0.0, 2.0], [-1.0, 0.0, 2.0]])
    assert_array_equal(labels, [0.5, -1.0])
    assert_array_equal(features, [[1.0, 0.0, 1.0], [-1 / 3, 0.0, 1.0]])


def test_minmax_rule():
    stats = ColumnStats(np.array([-4.0, 1.0, 5.0]), np.array([2.0, 3.0, 5.0]), 5)
    scaler = Scaler.from_stats(stats, "minmax")
    assert_array_equal(scaler.offsets, [-1, 2, 5])
    assert_array_equal(scaler.scales, [3, 1, 1])  # constant column: scale 1, maps to 0
    labels, features = scaler.transform([2.0, -4.0], [[3.0, 5.0], [1.0, 5.0]])
    assert_array_equal(labels, [1.0, -1.0])
    assert_array_equal(features, [[1.0, 0.0], [-1.0, 0.0]])


@pytest.mark.parametrize("scaling", list(Scaling), ids=lambda s: s.name.lower())
@pytest.mark.parametrize("label", [0.0, 3.0])
def test_constant_label_is_an_error(scaling, label):
    labels, features = np.full(4, label), np.arange(8.0).reshape(4, 2)
    with pytest.raises(DatasetError, match="expected a label that varies, found the constant"):
        Scaler.from_stats(ColumnStats.from_arrays(labels, features), scaling)


@pytest.mark.parametrize("scaling", list(Scaling), ids=lambda s: s.name.lower())
def test_transform_stays_in_range(scaling):
    labels, features = problem(seed=3)
    scaler = Scaler.from_stats(ColumnStats.from_arrays(labels, features), scaling)
    scaled_labels, scaled = scaler.transform(labels, features)
    assert np.abs(scaled_labels).max() <= 1.0 and np.abs(scaled).max() <= 1.0
    # every column reaches a bound: the range is used fully
    assert_allclose(np.abs(scaled).max(axis=0), 1.0)
    if scaling is Scaling.MINMAX:
        assert_allclose(scaled.min(axis=0), -1.0)


def test_transform_clips_values_outside_the_statistics():
    scaler = Scaler([0.0, 0.0], [1.0, 2.0])
    labels, features = scaler.transform([5.0], [[-9.0]])
    assert_array_equal(labels, [1.0])
    assert_array_equal(features, [[-1.0]])


def test_intercept_column_and_table():
    scaler = Scaler([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], intercept=True)
    assert (scaler.n_features, scaler.n_weights) == (2, 3)
    _, features = scaler.transform([1.0, 2.0], [[2.0, 3.0], [7.0, 9.0]])
    assert_array_equal(features[:, 2], [1.0, 1.0])
    offsets, scales = scaler.table()
    assert_array_equal(offsets, [1, 2, 3, 0])
    assert_array_equal(scales, [4, 5, 6, 1])
    again = Scaler.from_table(offsets, scales, intercept=True)
    assert_array_equal(again.offsets, scaler.offsets)
    assert_array_equal(again.scales, scaler.scales)


def test_from_table_rejects_a_non_intercept_column():
    with pytest.raises(ConfigError, match="intercept column must have offset 0 and scale 1"):
        Scaler.from_table([0.0, 1.0, 2.0], [1.0, 1.0, 3.0], intercept=True)


@pytest.mark.parametrize("offsets, scales", [
    ([0.0], [1.0]),
    ([0.0, 1.0], [1.0]),
    ([0.0, 1.0], [1.0, 0.0]),
    ([0.0, np.nan], [1.0, 1.0]),
])
def test_bad_scaler_tables(offsets, scales):
    with pytest.raises(ConfigError):
        Scaler(offsets, scales)


@pytest.mark.parametrize("scaling", list(Scaling), ids=lambda s: s.name.lower())
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inverse_model_reproduces_the_original_least_squares_fit(scaling, seed):
    labels, features = problem(seed)
    scaler = Scaler.from_stats(ColumnStats.from_arrays(labels, features), scaling,
                               intercept=True)
    scaled_labels, scaled = scaler.transform(labels, features)
    coef, intercept = scaler.inverse_model(lstsq(scaled, scaled_labels))
    expected = lstsq(np.column_stack([features, np.ones(len(labels))]), labels)
    assert_allclose(coef, expected[:-1], rtol=1e-7, atol=1e-9)
    assert intercept == pytest.approx(expected[-1], rel=1e-7)
    assert_allclose(features @ coef + intercept, features @ expected[:-1] + expected[-1])


def test_inverse_model_without_intercept_under_maxabs():
    # maxabs has no offsets, so a model through the origin maps to one through the origin.
    rng = np.random.default_rng(4)
    features = rng.normal(size=(100, 3)) * [1.0, 30.0, 0.01]
    labels = features @ [2.0, -0.1, 40.0] + rng.normal(0, 0.1, 100)
    scaler = Scaler.from_stats(ColumnStats.from_arrays(labels, features), Scaling.MAXABS)
    scaled_labels, scaled = scaler.transform(labels, features)
    coef, intercept = scaler.inverse_model(lstsq(scaled, scaled_labels))
    assert intercept == 0.0
    assert_allclose(coef, lstsq(features, labels), rtol=1e-9)


def test_inverse_model_formula():
    scaler = Scaler([10.0, 1.0, -2.0], [4.0, 2.0, 0.5], intercept=True)
    coef, intercept = scaler.inverse_model([0.5, 0.25, 3.0])
    assert_array_equal(coef, [4.0 * 0.5 / 2.0, 4.0 * 0.25 / 0.5])
    assert intercept == 10.0 - (1.0 * 1.0 + 2.0 * -2.0) + 4.0 * 3.0


def test_inverse_model_checks_length():
    with pytest.raises(ValueError, match="expected 2 weights, found 3"):
        Scaler([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]).inverse_model([1.0, 2.0, 3.0])
