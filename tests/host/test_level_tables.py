"""Level tables from the solvers (:func:`zipsgd.host.levels.table_words`, ``solve_table``):
the file's rule (rows from -256 to +256, strictly increasing int16 words), rounding, constant
columns, and double sampling unbiased with respect to the *stored* table, by enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from zipsgd.host.levels import LevelStats, solve_table, table_levels, table_words
from zipsgd.host.quantize import epoch_rng, level_intervals, quantize_fields_levels
from zipsgd.host.scaling import ColumnStats, Scaler
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.stream import (
    LEVEL_ONE,
    Encoding,
    StreamLayout,
    check_levels,
    decode_fields,
    uniform_levels,
)


def _rows(rng, bits, count, spread=1.0):
    """Random strictly increasing float rows on [-1, 1] (the endpoints included)."""
    s = 1 << bits
    inner = np.sort(rng.uniform(-spread, spread, (count, s - 1)), axis=1)
    return np.column_stack([-np.ones(count), inner, np.ones(count)])


@pytest.mark.parametrize("bits", range(1, 9))
def test_words_follow_the_file_rule(bits):
    rng = np.random.default_rng(bits)
    levels = np.vstack([_rows(rng, bits, 50), _rows(rng, bits, 50, spread=0.01)])
    words = table_words(levels)
    layout = StreamLayout(Encoding.DOUBLE, bits, 64)
    assert words.dtype == np.int16
    check_levels(words, layout, words.shape[0] - 1)  # -256 .. +256, strictly increasing
    s = 1 << bits
    i = np.arange(s + 1)
    assert np.all(words >= -LEVEL_ONE + i) and np.all(words <= LEVEL_ONE - (s - i))


def test_rounding_is_nearest_where_levels_are_far_apart():
    levels = np.array([[-1.0, -0.5 + 0.3 / 256, 0.1, 0.7 - 0.4 / 256, 1.0]])
    assert table_words(levels).tolist() == [[-256, -128, 26, 179, 256]]


def test_collisions_move_the_later_word_up():
    levels = np.array([[-1.0, -0.9999, -0.9998, -0.9997, 1.0],
                       [-1.0, 0.9997, 0.9998, 0.9999, 1.0],
                       [-1.0, 0.1, 0.1001, 0.1002, 1.0]])
    assert table_words(levels).tolist() == [[-256, -255, -254, -253, 256],
                                             [-256, 253, 254, 255, 256],
                                             [-256, 26, 27, 28, 256]]


@pytest.mark.parametrize("bits", range(1, 9))
def test_uniform_levels_give_the_uniform_table(bits):
    levels = np.tile(np.linspace(-1, 1, (1 << bits) + 1), (3, 1))
    assert np.array_equal(table_words(levels), uniform_levels(bits, 2))


def test_endpoints_become_the_table_endpoints():
    levels = np.array([[-0.5, 0.0, 0.2, 0.3, 0.6]])
    assert table_words(levels).tolist() == [[-256, 0, 51, 77, 256]]


def test_constant_rows_are_uniform():
    levels = np.array([[-1.0, -0.9, -0.8], [-1.0, -0.5, 1.0], [0.0, 0.5, 1.0]])
    words = table_words(levels, constant=[False, True, True])
    assert words.tolist() == [[-256, -230, 256], [-256, 0, 256], [-256, 0, 256]]


@pytest.mark.parametrize("levels, fragment", [
    (np.array([[-1.0, np.nan, 1.0]]), "row 0 .*entry 1: expected a finite value, found nan"),
    (np.array([[-1.0, 0.0, np.inf, 1.0]]), r"shape \(columns, 2\*\*b \+ 1\)"),
    (np.zeros((2, 513)), r"b = 1..8, found \(2, 513\)"),
])
def test_bad_levels_are_refused(levels, fragment):
    with pytest.raises(ConfigError, match=fragment):
        table_words(levels)


def test_solve_table_uses_minmax_endpoints_and_the_scaler():
    rng = np.random.default_rng(3)
    features = np.column_stack([rng.exponential(size=500), rng.normal(5, 2, 500),
                                np.full(500, 7.0)])
    labels = rng.normal(size=500)
    stats = LevelStats(3)
    stats.update(labels, features)
    scaler = Scaler.from_stats(ColumnStats.from_arrays(labels, features), "minmax",
                               intercept=True)
    offsets, scales = scaler.table()
    table = solve_table(stats, 3, offsets=offsets[:-1], scales=scales[:-1], intercept=True)
    assert table.shape == (5, 9)
    uniform = uniform_levels(3, 1)[0]
    assert np.array_equal(table[3], uniform) and np.array_equal(table[4], uniform)
    # The same as solving on the scaled data directly (affine maps commute with the problem).
    scaled = LevelStats(4)
    scaled.update(*scaler.transform(labels, features))
    assert np.abs(solve_table(scaled, 3).astype(int) - table).max() <= 1
    # Every scaled value lies within its row: the quantizer accepts the table.
    layout = StreamLayout(Encoding.DOUBLE, 3, 64)
    quantize_fields_levels(*scaler.transform(labels, features), layout, epoch_rng(0, 0),
                           table_levels(table))


@pytest.mark.parametrize("encoding", [Encoding.DOUBLE, Encoding.SINGLE])
@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_unbiased_against_the_stored_table_by_enumeration(encoding, bits):
    """Every outcome of a field's sample bits, weighted by its probability, decoded through the
    stored table by the spec decoder: the mean of each sample is the value (times 256)."""
    rng = np.random.default_rng(10 + bits)
    n = 4
    stats = LevelStats(n, points=16)
    data = rng.standard_normal((400, n + 1)) ** 3
    stats.update(data[:, 0], data[:, 1:])
    low, high = stats.range()
    scaler = Scaler((high + low) / 2, (high - low) / 2)
    table = solve_table(stats, bits, offsets=scaler.offsets, scales=scaler.scales)
    levels = table_levels(table)
    # Values: every stored level, every midpoint, and random points.
    values = np.vstack([levels.T, ((levels[:, 1:] + levels[:, :-1]) / 2).T,
                        rng.uniform(-1, 1, (40, n + 1))])
    layout = StreamLayout(encoding, bits, 64)
    index, prob = level_intervals(values, levels, bits)
    draws = 2 if encoding is Encoding.DOUBLE else 1
    mean_first = np.zeros(values.shape)
    mean_second = np.zeros(values.shape)
    mean_label = np.zeros(values.shape[0])
    for bits_up in itertools.product((0, 1), repeat=draws):
        weight = np.ones(values.shape)
        fields = index.astype(np.uint64)
        for k, up in enumerate(bits_up):
            weight = weight * (prob if up else 1 - prob)
            fields |= np.uint64(up << (bits + k))
        decoded = decode_fields(fields, layout, table)
        mean_first[:, 1:] += weight[:, 1:] * decoded.first
        mean_second[:, 1:] += weight[:, 1:] * decoded.second
        mean_label += weight[:, 0] * decoded.label
    np.testing.assert_allclose(mean_first[:, 1:], values[:, 1:] * LEVEL_ONE, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mean_second[:, 1:], values[:, 1:] * LEVEL_ONE, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mean_label, values[:, 0] * 2 * LEVEL_ONE, rtol=0, atol=1e-9)
    # The quantizer's fields are among the enumerated outcomes: the index is the same.
    fields = quantize_fields_levels(values[:, 0], values[:, 1:], layout, epoch_rng(1, 0), levels)
    assert np.array_equal(fields & np.uint64((1 << bits) - 1), index.astype(np.uint64))
