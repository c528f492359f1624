"""The quantize-and-pack pipeline: files read back to exactly what the quantizer produces."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from zipsgd.host.datasets import ArraySource, DataSource, NpySource, SyntheticSource, _Block
from zipsgd.host.pack import default_chunk_rows, pack_source, quantize_epoch
from zipsgd.host.quantize import epoch_rng, quantize_fields
from zipsgd.host.scaling import ColumnStats, Scaler
from zipsgd.host.zsgd_file import Scaling, StreamFile
from zipsgd.spec.errors import ConfigError, DatasetError, OutputExistsError
from zipsgd.spec.stream import StreamLayout, decode_fields, stream_padding_is_zero, unpack_stream

LAYOUTS = [
    StreamLayout.make("double", 3, 64),
    StreamLayout.make("single", 5, 128),
    StreamLayout.make("raw32", 32, 256),
]


def scaled_data(source: DataSource, scaling=Scaling.MAXABS, intercept=False):
    labels, features = source.arrays()
    scaler = Scaler.from_stats(ColumnStats.from_arrays(labels, features), scaling,
                               intercept=intercept)
    return scaler, *scaler.transform(labels, features)


@pytest.fixture
def npy_source(tmp_path):
    rng = np.random.default_rng(5)
    table = rng.normal(size=(37, 6)) * [1, 2, 3, 0, 5, 6] + [0, 1, -1, 0, 0, 9]
    np.save(tmp_path / "d.npy", table)
    return NpySource(tmp_path / "d.npy", block_rows=10)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("scaling", list(Scaling), ids=lambda s: s.name.lower())
def test_file_holds_the_quantized_epochs(tmp_path, npy_source, layout, scaling):
    header = pack_source(npy_source, tmp_path / "o.zsgd", layout, seed=9, epochs=2,
                         epoch_first=3, scaling=scaling, chunk_rows=7)
    stream = StreamFile(tmp_path / "o.zsgd")
    assert_array_equal(stream.header.scales, header.scales)  # what was written is returned
    assert (stream.header.n_features, stream.header.n_samples) == (5, 37)
    assert (stream.header.seed, stream.header.epoch_first, stream.header.epoch_count) == (9, 3, 2)
    assert stream.header.scaling is scaling and stream.layout == layout
    scaler, labels, features = scaled_data(npy_source, scaling)
    offsets, scales = scaler.table()
    assert_array_equal(stream.header.offsets, offsets)
    assert_array_equal(stream.header.scales, scales)
    for k in range(2):
        payload = stream.epoch_payload(k)
        assert payload.size == layout.stream_bytes(5, 37)  # samples back to back (v2)
        assert stream_padding_is_zero(payload, layout, 5, 37)
        want = quantize_fields(labels, features, layout, epoch_rng(9, 3 + k))
        assert_array_equal(unpack_stream(payload, layout, 5, 37), want)
        assert_array_equal(np.concatenate(list(stream.iter_fields(k, max_samples=5))), want)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_quantize_epoch_matches_the_file(tmp_path, layout):
    source = SyntheticSource(4, 300, seed=2)
    pack_source(source, tmp_path / "o.zsgd", layout, seed=1, epochs=2)
    _, labels, features = scaled_data(source)
    stream = StreamFile(tmp_path / "o.zsgd")
    for epoch in range(2):
        assert_array_equal(quantize_epoch(labels, features, layout, 1, epoch),
                           stream.epoch_payload(epoch))


def test_chunk_size_does_not_change_the_file(tmp_path, npy_source):
    layout = LAYOUTS[0]
    for rows in (1, 3, 7, None):  # chunks that end inside a beat, with a partial beat carried
        pack_source(npy_source, tmp_path / f"o{rows}.zsgd", layout, seed=4, chunk_rows=rows,
                    epochs=2)
    reference = (tmp_path / "oNone.zsgd").read_bytes()
    assert (tmp_path / "o1.zsgd").read_bytes() == reference
    assert (tmp_path / "o3.zsgd").read_bytes() == reference
    assert (tmp_path / "o7.zsgd").read_bytes() == reference


def test_epochs_differ_and_repeat(tmp_path, npy_source):
    layout = LAYOUTS[0]
    pack_source(npy_source, tmp_path / "a.zsgd", layout, seed=4, epochs=2)
    pack_source(npy_source, tmp_path / "b.zsgd", layout, seed=4, epoch_first=1)
    pack_source(npy_source, tmp_path / "c.zsgd", layout, seed=5, epoch_first=1)
    a, b, c = (StreamFile(tmp_path / f"{n}.zsgd") for n in "abc")
    assert not np.array_equal(a.epoch_payload(0), a.epoch_payload(1))  # refetching
    assert_array_equal(a.epoch_payload(1), b.epoch_payload(0))  # same (seed, epoch)
    assert not np.array_equal(b.epoch_payload(0), c.epoch_payload(0))  # other seed


def test_raw32_is_deterministic_across_epochs(tmp_path, npy_source):
    pack_source(npy_source, tmp_path / "o.zsgd", LAYOUTS[2], epochs=2)
    stream = StreamFile(tmp_path / "o.zsgd")
    assert_array_equal(stream.epoch_payload(0), stream.epoch_payload(1))


def test_intercept_column(tmp_path, npy_source):
    layout = LAYOUTS[0]
    header = pack_source(npy_source, tmp_path / "o.zsgd", layout, add_intercept=True)
    assert header.n_features == 6
    assert (header.offsets[-1], header.scales[-1]) == (0.0, 1.0)
    fields = unpack_stream(StreamFile(tmp_path / "o.zsgd").epoch_payload(0), layout, 6, 37)
    decoded = decode_fields(fields, layout)
    one = 1 << decoded.feature_frac
    assert (decoded.first[:, -1] == one).all() and (decoded.second[:, -1] == one).all()


def test_refuses_to_overwrite(tmp_path, npy_source):
    out = tmp_path / "o.zsgd"
    out.write_bytes(b"precious")
    with pytest.raises(OutputExistsError, match="exists; pass --force"):
        pack_source(npy_source, out, LAYOUTS[0])
    assert out.read_bytes() == b"precious"
    pack_source(npy_source, out, LAYOUTS[0], force=True)
    assert StreamFile(out).header.n_samples == 37
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


def test_constant_label_leaves_no_file(tmp_path):
    source = ArraySource(np.ones(5), np.arange(10.0).reshape(5, 2))
    with pytest.raises(DatasetError, match="expected a label that varies"):
        pack_source(source, tmp_path / "o.zsgd", LAYOUTS[0])
    assert list(tmp_path.iterdir()) == []


class ShrinkingSource(DataSource):
    """Loses a row on every pass: the input changed between the passes."""

    def __init__(self):
        super().__init__("shrinking")
        self.rows = 10

    @property
    def n_features(self):
        return 2

    def _blocks(self):
        rows, self.rows = self.rows, self.rows - 1
        yield _Block(np.arange(rows, dtype=float), np.ones((rows, 2)))


def test_source_changing_between_passes_leaves_no_file(tmp_path):
    with pytest.raises(DatasetError, match="did the input change"):
        pack_source(ShrinkingSource(), tmp_path / "o.zsgd", LAYOUTS[0])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, fragment", [
    ({"epochs": 0}, "epochs must be an integer in 1..65536, found 0"),
    ({"epochs": 2.0}, "epochs must be an integer"),
    ({"seed": -1}, "seed must be an integer in 0.."),
    ({"epoch_first": -1}, "epoch_first must be an integer in 0.."),
    ({"scaling": "zscore"}, "scaling must be maxabs or minmax"),
])
def test_bad_parameters(tmp_path, npy_source, kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        pack_source(npy_source, tmp_path / "o.zsgd", LAYOUTS[0], **kwargs)
    assert not (tmp_path / "o.zsgd").exists()


def test_progress_bar_is_silent_when_not_a_terminal(tmp_path, npy_source, capsys):
    pack_source(npy_source, tmp_path / "o.zsgd", LAYOUTS[0], progress=True)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_default_chunk_rows_is_about_16_mib():
    assert default_chunk_rows(1023) == 2048
    assert default_chunk_rows(10**8) == 1
