"""Packing with level tables: the statistics pass keeps LevelStats, the table goes into the
header and every epoch is quantized onto the table's levels."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import zipsgd
from zipsgd.host.datasets import NpySource
from zipsgd.host.levels import LevelStats, solve_table
from zipsgd.host.pack import pack_source, quantize_epoch
from zipsgd.host.scaling import ColumnStats, Scaler
from zipsgd.host.zsgd_file import Scaling, StreamFile
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.stream import StreamLayout, uniform_levels

LAYOUT = StreamLayout.make("double", 3, 64)


@pytest.fixture
def skewed(tmp_path):
    """Skewed columns, one constant (column 3) and one with 3 distinct values (column 5)."""
    rng = np.random.default_rng(8)
    table = np.column_stack([rng.normal(size=300), rng.exponential(size=300),
                             rng.standard_normal(300) ** 3, np.full(300, 4.0),
                             rng.lognormal(size=300), rng.integers(0, 3, 300) * 2.0])
    np.save(tmp_path / "s.npy", table)
    return NpySource(tmp_path / "s.npy", block_rows=64)


@pytest.mark.parametrize("intercept", [False, True])
def test_optimal_table_in_header_and_epochs_quantized_onto_it(tmp_path, skewed, intercept):
    header = pack_source(skewed, tmp_path / "o.zsgd", LAYOUT, seed=4, epochs=2,
                         scaling="minmax", add_intercept=intercept, levels="optimal",
                         levels_method="exact", levels_points=512, chunk_rows=50)
    stream = StreamFile(tmp_path / "o.zsgd")
    assert_array_equal(stream.header.levels, header.levels)
    labels, features = skewed.arrays()
    stats = LevelStats(5, points=512)
    stats.update(labels, features)
    scaler = Scaler.from_stats(ColumnStats.from_arrays(labels, features), Scaling.MINMAX,
                               intercept=intercept)
    table = solve_table(stats, 3, "exact", offsets=scaler.offsets, scales=scaler.scales,
                        intercept=intercept)
    assert_array_equal(header.levels, table)
    uniform = uniform_levels(3, 1)[0]
    assert_array_equal(table[3], uniform)  # the constant column
    if intercept:
        assert_array_equal(table[-1], uniform)
    # The column of three values: -1, 0 and +1 after minmax scaling, all on levels.
    assert {-256, 0, 256} <= set(table[5].tolist())
    scaled = scaler.transform(labels, features)
    for k in range(2):
        assert_array_equal(stream.epoch_payload(k),
                           quantize_epoch(*scaled, LAYOUT, 4, k, levels=table))


def test_chunking_does_not_change_the_file_while_columns_keep_their_values(tmp_path, skewed):
    payloads = []
    for rows in (7, 300):
        pack_source(skewed, tmp_path / f"{rows}.zsgd", LAYOUT, scaling="minmax",
                    levels="optimal", levels_points=512, chunk_rows=rows)
        payloads.append((tmp_path / f"{rows}.zsgd").read_bytes())
    assert payloads[0] == payloads[1]


def test_uniform_table_gives_the_same_fields(tmp_path, skewed):
    plain = pack_source(skewed, tmp_path / "a.zsgd", LAYOUT, seed=2)
    table = pack_source(skewed, tmp_path / "b.zsgd", LAYOUT, seed=2, levels="uniform")
    assert plain.levels is None
    assert_array_equal(table.levels, uniform_levels(3, 5))
    assert_array_equal(StreamFile(tmp_path / "a.zsgd").epoch_payload(0),
                       StreamFile(tmp_path / "b.zsgd").epoch_payload(0))


@pytest.mark.parametrize("kwargs, fragment", [
    ({"levels": "optimal"}, "minmax .* found scaling maxabs"),
    ({"levels": "best", "scaling": "minmax"}, "levels must be one of uniform, optimal"),
    ({"levels": "optimal", "scaling": "minmax", "levels_points": 7},
     r"M must be an even integer in 8..4096, found 7"),
    ({"levels": "optimal", "scaling": "minmax", "levels_points": 8192}, "found 8192"),
    ({"levels": "optimal", "scaling": "minmax", "levels_method": "greedy"},
     "method must be one of exact, discretized, approx2"),
    ({"levels": "optimal", "scaling": "minmax", "levels_method": "exact", "levels_points": 8},
     "exact solver needs every column's distinct values"),
])
def test_bad_level_options_leave_no_file(tmp_path, skewed, kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        pack_source(skewed, tmp_path / "o.zsgd", LAYOUT, **kwargs)
    assert not (tmp_path / "o.zsgd").exists()


def test_raw32_has_no_levels(tmp_path, skewed):
    with pytest.raises(ConfigError, match="raw32"):
        pack_source(skewed, tmp_path / "o.zsgd", StreamLayout.make("raw32", 32, 64),
                    levels="uniform")


def test_the_python_api_packs_the_same_file(tmp_path, skewed):
    """zipsgd.quantize(levels=...) is zipsgd quantize --levels: minmax scaling unless given,
    the same bytes as pack_source, and a PackedData that decodes through the table."""
    labels, features = skewed.arrays()
    packed = zipsgd.quantize(features, labels, bits=3, seed=4, epochs=2, levels="optimal",
                             levels_method="exact", levels_points=512)
    assert packed.header.scaling is Scaling.MINMAX and packed.header.levels is not None
    pack_source(skewed, tmp_path / "o.zsgd", LAYOUT, seed=4, epochs=2, scaling="minmax",
                levels="optimal", levels_method="exact", levels_points=512)
    packed.save(tmp_path / "p.zsgd")
    assert (tmp_path / "p.zsgd").read_bytes() == (tmp_path / "o.zsgd").read_bytes()
    with pytest.raises(ConfigError, match="scales every column with minmax"):
        zipsgd.quantize(features, labels, levels="optimal", scaling="maxabs")
    assert zipsgd.quantize(features, labels).header.levels is None
