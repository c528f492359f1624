"""The ``.zsgd`` container (:mod:`zipsgd.host.zsgd_file`): round trips, the documented byte
layout, every malformed-file class (one ``StreamFormatError`` naming expected and found) and
atomic writing."""

from __future__ import annotations

import os
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from zipsgd.host import zsgd_file
from zipsgd.host.zsgd_file import (
    FIXED_BYTES,
    HEADER_FIELDS,
    MAGIC,
    VERSION,
    Scaling,
    StreamFile,
    StreamHeader,
    StreamWriter,
    with_epochs,
    write_stream,
)
from zipsgd.spec.errors import ConfigError, OutputExistsError, StreamFormatError
from zipsgd.spec.stream import (
    Encoding,
    StreamLayout,
    pack_beats_v1,
    pack_stream,
    uniform_levels,
    unpack_stream,
)

FORMAT_DOC = (Path(__file__).resolve().parents[2] / "docs" / "FORMAT.md").read_text("utf-8")


def documented_layout() -> tuple[dict[str, tuple[int, str]], int]:
    """The fixed header fields as docs/FORMAT.md's table gives them: name -> (offset, struct
    code), and the offset of the scale table (the size of the fixed part)."""
    rows = re.findall(r"^\| (\d+) \| (\d+) \| `(\w+)` \|", FORMAT_DOC, flags=re.M)
    codes = {1: "B", 2: "<H", 4: "<I", 8: "<Q"}
    fields = {name: (int(off), "8s" if name == "magic" else codes[int(size)])
              for off, size, name in rows}
    (table,) = re.findall(r"^\| (\d+) \| 16 \(n\+1\) \| `scale_table` \|", FORMAT_DOC,
                          flags=re.M)
    return fields, int(table)


OFFSETS, FIXED_PART = documented_layout()


def test_documented_layout_is_the_code_layout():
    """docs/FORMAT.md's offsets are contiguous and agree with HEADER_FIELDS."""
    offset = 0
    assert [name for name, _, _ in HEADER_FIELDS] == list(OFFSETS)
    for name, code, _ in HEADER_FIELDS:
        assert OFFSETS[name][0] == offset, name
        assert struct.calcsize("<" + code) == struct.calcsize(OFFSETS[name][1]), name
        offset += struct.calcsize("<" + code)
    assert offset == FIXED_PART == FIXED_BYTES
    assert re.search(rf"^\| {FIXED_PART} \+ 16 \(n\+1\) \| 2 \(n\+1\) \(2\^b\+1\), if `levels` = 1 "
                     r"\| `level_table` \|", FORMAT_DOC, flags=re.M)
    assert re.search(rf"^\| {FIXED_PART} \+ 16 \(n\+1\) \[\+ level table\] \| 4 \| "
                     r"`header_crc32` \|", FORMAT_DOC, flags=re.M)


def make_header(n_features=5, n_samples=7, epoch_count=3, layout=None, seed=1234,
                intercept=False, levels=None):
    layout = layout or StreamLayout(Encoding.DOUBLE, 3, 64)
    rng = np.random.default_rng(n_features)
    offsets, scales = rng.normal(size=n_features + 1), rng.uniform(0.5, 2, n_features + 1)
    if intercept:  # the intercept column is the constant 1: offset 0, scale 1
        offsets[-1], scales[-1] = 0.0, 1.0
    return StreamHeader(layout, n_features, n_samples, seed, Scaling.MINMAX, offsets, scales,
                        epoch_first=5, epoch_count=epoch_count, intercept=intercept,
                        levels=levels)


def make_epochs(header: StreamHeader) -> list[np.ndarray]:
    rng = np.random.default_rng(header.seed)
    fw = header.layout.field_width
    return [pack_stream(rng.integers(0, 1 << fw, (header.n_samples, header.n_features + 1),
                                     dtype=np.uint64), header.layout)
            for _ in range(header.epoch_count)]


@pytest.fixture
def good(tmp_path):
    header = make_header()
    epochs = make_epochs(header)
    path = tmp_path / "good.zsgd"
    write_stream(path, header, epochs)
    return path, header, epochs


def field(data: bytes, name: str):
    offset, fmt = OFFSETS[name]
    return struct.unpack_from(fmt, data, offset)[0]


def patched(data: bytes, fix_crc: bool = True, **fields) -> bytes:
    """``data`` with fixed header fields replaced; the header CRC is recomputed over the
    header length the (original) file declares when ``fix_crc``."""
    out = bytearray(data)
    for name, value in fields.items():
        offset, fmt = OFFSETS[name]
        struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        end = field(data, "header_bytes") - 4
        struct.pack_into("<I", out, end, zlib.crc32(bytes(out[:end])))
    return bytes(out)


def expect_error(path, *patterns):
    with pytest.raises(StreamFormatError) as info:
        StreamFile(path)
    message = str(info.value)
    for pattern in patterns:
        assert pattern in message, message
    return message


# -- round trip and layout ------------------------------------------------------------------

@pytest.mark.parametrize("layout, n_features, intercept", [
    (StreamLayout(Encoding.DOUBLE, 3, 64), 5, False),
    (StreamLayout(Encoding.SINGLE, 8, 512), 100, True),
    (StreamLayout(Encoding.RAW32, 32, 128), 1, False),
    (StreamLayout(Encoding.DOUBLE, 1, 256), 127, True),
], ids=["double3-W64", "single8-W512", "raw32-W128", "double1-W256"])
def test_round_trip_several_epochs(tmp_path, layout, n_features, intercept):
    header = make_header(n_features=n_features, n_samples=11, epoch_count=4, layout=layout,
                         intercept=intercept)
    epochs = make_epochs(header)
    path = tmp_path / "s.zsgd"
    with StreamWriter(path, header) as writer:
        for payload in epochs:
            writer.write(payload[:5])  # uneven chunks
            writer.write(payload[5:])
    stream = StreamFile(path)
    got = stream.header
    assert got.layout == layout
    assert (got.n_features, got.n_samples, got.seed, got.scaling, got.epoch_first,
            got.epoch_count, got.intercept) == (n_features, 11, header.seed, Scaling.MINMAX, 5,
                                                4, intercept)
    np.testing.assert_array_equal(got.offsets, header.offsets)
    np.testing.assert_array_equal(got.scales, header.scales)
    for k, payload in enumerate(epochs):
        np.testing.assert_array_equal(stream.epoch_payload(k), payload)
        blocks = list(stream.iter_fields(k, max_samples=3))
        assert [b.shape for b in blocks] == [(3, n_features + 1)] * 3 + [(2, n_features + 1)]
        np.testing.assert_array_equal(np.concatenate(blocks),
                                      unpack_stream(payload, layout, n_features, 11))
    with pytest.raises(IndexError):
        stream.epoch_payload(4)
    assert stream.payload_crc32 == zlib.crc32(b"".join(p.tobytes() for p in epochs))


@pytest.mark.parametrize("n_features", [1, 2, 9, 300])
def test_header_is_exactly_documented_size_and_layout(tmp_path, n_features):
    header = make_header(n_features=n_features, n_samples=2, epoch_count=2)
    epochs = make_epochs(header)
    path = tmp_path / "h.zsgd"
    write_stream(path, header, epochs)
    data = path.read_bytes()
    size = FIXED_PART + 16 * (n_features + 1) + 4
    assert header.header_bytes == size
    payload = b"".join(p.tobytes() for p in epochs)
    assert len(data) == size + len(payload) and data[size:] == payload
    layout = header.layout
    assert {name: field(data, name) for name in OFFSETS} == {
        "magic": MAGIC, "version": VERSION, "header_bytes": size, "encoding": int(layout.encoding),
        "bits": layout.bits, "bus_width": layout.bus_width, "label_format": 0,
        "scaling": int(Scaling.MINMAX), "levels": 0, "flags": 0, "n_features": n_features,
        "n_samples": 2, "epoch_first": 5, "epoch_count": 2, "seed": header.seed,
        "beats_per_epoch": -(-2 * (n_features + 1) * layout.field_width // layout.bus_width),
        "payload_bytes": len(payload), "payload_crc32": zlib.crc32(payload)}
    table = np.frombuffer(data[FIXED_PART:size - 4], dtype="<f8").reshape(-1, 2)
    np.testing.assert_array_equal(table[:, 0], header.offsets)
    np.testing.assert_array_equal(table[:, 1], header.scales)
    assert struct.unpack("<I", data[size - 4:size])[0] == zlib.crc32(data[:size - 4])
    assert MAGIC == b"\x89ZSGD\r\n\x1a"


# -- malformed files ------------------------------------------------------------------------

def write_bytes(tmp_path, data: bytes, name="bad.zsgd"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_bad_magic(good, tmp_path):
    path, _, _ = good
    data = bytearray(path.read_bytes())
    data[1] = ord("X")
    expect_error(write_bytes(tmp_path, bytes(data)), "magic", "expected", "found",
                 repr(MAGIC), repr(bytes(data[:8])))


def test_wrong_version(good, tmp_path):
    path, _, _ = good
    for version in (2, 4):   # (version 2 did not pad samples of more than 512 fields)
        data = patched(path.read_bytes(), version=version)
        message = expect_error(write_bytes(tmp_path, data), "unsupported .zsgd version",
                               "expected version 3", f"found version {version}", "re-pack",
                               "zipsgd quantize")
        assert "\n" not in message


#: The version 1 header (every sample on new beats), as the version 1 writer wrote it.
_V1_FIXED = struct.Struct("<8sHIBBHBBIIQIIQIQI")


def write_v1_file(path, layout: StreamLayout, fields: np.ndarray) -> None:
    n_samples, n_fields = fields.shape
    payload = pack_beats_v1(fields, layout).tobytes()
    header_bytes = _V1_FIXED.size + 16 * n_fields + 4
    fixed = _V1_FIXED.pack(MAGIC, 1, header_bytes, int(layout.encoding), layout.bits,
                           layout.bus_width, 0, 0, 0, n_fields - 1, n_samples, 0, 1, 0,
                           layout.beats_per_sample(n_fields - 1), len(payload),
                           zlib.crc32(payload))
    body = fixed + np.column_stack([np.zeros(n_fields), np.ones(n_fields)]).astype(
        "<f8").tobytes()
    path.write_bytes(body + struct.pack("<I", zlib.crc32(body)) + payload)


@pytest.mark.parametrize("n_features", [1, 3, 40])
def test_a_version_1_file_is_refused_with_advice(tmp_path, n_features):
    """A real version 1 file (short ones too: smaller than a version 2 fixed header)."""
    layout = StreamLayout(Encoding.DOUBLE, 2, 64)
    fields = np.random.default_rng(n_features).integers(0, 16, (3, n_features + 1),
                                                        dtype=np.uint64)
    path = tmp_path / "old.zsgd"
    write_v1_file(path, layout, fields)
    message = expect_error(path, "unsupported .zsgd version", f"expected version {VERSION}",
                           "found version 1", "re-pack the data with `zipsgd quantize`")
    assert "\n" not in message


def test_header_crc_mismatch(good, tmp_path):
    path, header, _ = good
    data = bytearray(path.read_bytes())
    seed_offset = OFFSETS["seed"][0]
    for offset in (seed_offset, FIXED_PART + 3, header.header_bytes - 5):  # seed, scale table
        bad = bytearray(data)
        bad[offset] ^= 0x10
        message = expect_error(write_bytes(tmp_path, bytes(bad)), "header CRC", "stored",
                               "computed")
        assert f"{field(bytes(data), 'payload_crc32'):#010x}" not in message
    bad = bytearray(data)
    bad[header.header_bytes - 1] ^= 0x01  # the stored CRC itself
    expect_error(write_bytes(tmp_path, bytes(bad)), "header CRC")


def test_payload_crc_mismatch(good, tmp_path):
    path, header, _ = good
    data = bytearray(path.read_bytes())
    for offset in (header.header_bytes, len(data) - 1, header.header_bytes + 37):
        bad = bytearray(data)
        bad[offset] ^= 0x80
        bad_path = write_bytes(tmp_path, bytes(bad))
        expect_error(bad_path, "payload CRC", "stored", "computed")
        StreamFile(bad_path, verify_payload=False)  # the header alone is fine


def test_truncated_header(good, tmp_path):
    path, header, _ = good
    data = path.read_bytes()
    fixed = f"expected {FIXED_PART}"
    expect_error(write_bytes(tmp_path, b""), "truncated header", fixed, "found 0")
    expect_error(write_bytes(tmp_path, data[:10]), "truncated header", fixed, "found 10")
    expect_error(write_bytes(tmp_path, data[:FIXED_PART - 1]), "truncated header",
                 f"found {FIXED_PART - 1}")
    expect_error(write_bytes(tmp_path, data[:FIXED_PART + 6]), "truncated header",
                 f"expected {header.header_bytes}", f"found {FIXED_PART + 6}")
    expect_error(write_bytes(tmp_path, data[:header.header_bytes - 1]), "truncated header",
                 f"found {header.header_bytes - 1}")


def test_truncated_payload_and_trailing_bytes(good, tmp_path):
    path, header, _ = good
    data = path.read_bytes()
    total = header.header_bytes + header.payload_bytes
    assert len(data) == total
    expect_error(write_bytes(tmp_path, data[:-1]), "truncated", f"expected {total}",
                 f"found {total - 1}")
    expect_error(write_bytes(tmp_path, data[:header.header_bytes]), "truncated",
                 f"found {header.header_bytes}")
    expect_error(write_bytes(tmp_path, data + b"\0"), "trailing", f"expected {total}",
                 f"found {total + 1}")


def test_absurd_feature_count(good, tmp_path):
    """n_features = 2**32 - 1 (and 2**24, 0) with a CRC consistent over the bytes present: refused
    before anything of that size is read or allocated."""
    path, _, _ = good
    data = path.read_bytes()
    for n in (2**32 - 1, 2**24, 0):
        bad = patched(data, n_features=n, header_bytes=(FIXED_PART + 16 * (n + 1) + 4) % 2**32)
        expect_error(write_bytes(tmp_path, bad), "feature count", f"found {n}")


def test_header_size_field_inconsistent(good, tmp_path):
    path, header, _ = good
    for size in (header.header_bytes + 16, header.header_bytes - 1, 2**32 - 1, 0):
        bad = patched(path.read_bytes(), fix_crc=False, header_bytes=size)
        expect_error(write_bytes(tmp_path, bad), "header size",
                     f"expected {header.header_bytes}", f"found {size}")


def test_absurd_sample_and_epoch_counts(good, tmp_path):
    path, header, _ = good
    data = path.read_bytes()
    for n in (2**64 - 1, 2**40 + 1, 0):
        expect_error(write_bytes(tmp_path, patched(data, n_samples=n)), "sample count",
                     f"found {n}")
    for count in (0, 2**32 - 1):
        expect_error(write_bytes(tmp_path, patched(data, epoch_count=count)), "epoch count",
                     f"found {count}")
    # the largest allowed sample count with a consistent payload size: the size check refuses
    # it (expected vs found file size) without mapping anything
    n = 2**40
    payload = header.layout.stream_bytes(header.n_features, n) * header.epoch_count
    bad = patched(data, n_samples=n, payload_bytes=payload,
                  beats_per_epoch=header.layout.stream_beats(header.n_features, n))
    expect_error(write_bytes(tmp_path, bad), "truncated",
                 f"expected {header.header_bytes + payload}", f"found {len(data)}")


def test_inconsistent_beats_and_payload_size(good, tmp_path):
    path, header, _ = good
    data = path.read_bytes()
    beats = header.beats_per_epoch
    expect_error(write_bytes(tmp_path, patched(data, beats_per_epoch=beats + 1)),
                 "beats per epoch", f"expected {beats}", f"found {beats + 1}")
    expect_error(write_bytes(tmp_path, patched(data, payload_bytes=header.payload_bytes - 8)),
                 "payload size", f"expected {header.payload_bytes}",
                 f"found {header.payload_bytes - 8}")
    expect_error(write_bytes(tmp_path, patched(data, payload_bytes=2**64 - 1)),
                 "payload size", f"found {2**64 - 1}")


@pytest.mark.parametrize("changes, expected, found", [
    ({"bits": 9}, "1..8", "found 9"), ({"bits": 0}, "1..8", "found 0"),
    ({"encoding": 2, "bits": 8}, "32 bits", "found bits=8"),
    ({"bus_width": 96}, "(64, 128, 256, 512)", "found 96"),
    ({"encoding": 7}, "encoding: expected one of 0 (double)", "found 7"),
    ({"scaling": 5}, "scaling: expected one of 0 (maxabs)", "found 5"),
    ({"label_format": 1}, "label_format: expected one of 0 (field0)", "found 1"),
], ids=["bits9", "bits0", "raw32-bits8", "bus96", "encoding7", "scaling5", "label_format1"])
def test_invalid_enumerated_fields(good, tmp_path, changes, expected, found):
    path, _, _ = good
    expect_error(write_bytes(tmp_path, patched(path.read_bytes(), **changes)), expected, found)


def test_unknown_flag_bits(good, tmp_path):
    path, _, _ = good
    for flags in (2, 0x8000_0001, 2**32 - 1):
        expect_error(write_bytes(tmp_path, patched(path.read_bytes(), flags=flags)), "flags",
                     "expected", f"found {flags:#x}")
    # The intercept flag needs the last feature's table entry to be the constant column's.
    expect_error(write_bytes(tmp_path, patched(path.read_bytes(), flags=1), name="i.zsgd"),
                 "the intercept flag is set", "offset 0 and scale 1")
    header = make_header(intercept=True)
    write_stream(tmp_path / "intercept.zsgd", header, make_epochs(header))
    assert StreamFile(tmp_path / "intercept.zsgd").header.intercept


@pytest.mark.parametrize("bad_scale, bad_offset", [(0.0, 0.0), (-1.0, 0.0), (np.nan, 0.0),
                                                   (np.inf, 0.0), (1.0, np.nan),
                                                   (1.0, -np.inf)])
def test_nonpositive_or_nonfinite_scale_table(tmp_path, bad_scale, bad_offset):
    header = make_header(epoch_count=1)
    header.scales[2] = bad_scale
    header.offsets[3] = bad_offset
    path = tmp_path / "scale.zsgd"
    write_stream(path, header, make_epochs(header))
    expect_error(path, "scale table", "expected")


def test_directory_and_missing_path(tmp_path):
    expect_error(tmp_path, "expected a regular .zsgd file, found a folder")
    expect_error(tmp_path / "missing.zsgd", "expected a readable .zsgd file", "missing.zsgd")


def test_a_fifo_is_refused_at_once(tmp_path):
    """Opening a FIFO for reading would wait for a writer forever."""
    fifo = tmp_path / "pipe.zsgd"
    os.mkfifo(fifo)
    expect_error(fifo, "expected a regular .zsgd file, found a FIFO")


def _rewrite(path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as file:  # in place, as another program would
        file.seek(offset)
        file.write(data)


@pytest.mark.parametrize("change", ["overwrite", "truncate"])
def test_a_file_changed_after_it_was_verified_is_refused(good, change, monkeypatch):
    """What a run reads is exactly what was verified: every chunk is checked again."""
    path, header, epochs = good
    beat = header.layout.beat_bytes
    monkeypatch.setattr(zsgd_file, "CHUNK_BYTES", beat)  # a chunk per beat
    stream = StreamFile(path)
    chunks = stream.iter_epoch_chunks(1)
    np.testing.assert_array_equal(next(chunks), epochs[1][:beat])
    end = header.header_bytes + 2 * header.epoch_bytes
    if change == "overwrite":
        _rewrite(path, end - beat, b"\xff" * beat)
        with pytest.raises(StreamFormatError, match="changed after it was opened and verified"):
            list(chunks)
    else:
        os.truncate(path, end - 1)
        with pytest.raises(StreamFormatError, match="truncated after it was opened"):
            list(chunks)
    with pytest.raises(StreamFormatError):
        stream.epoch_payload(1)
    np.testing.assert_array_equal(stream.epoch_payload(0), epochs[0])  # untouched: still fine


# -- atomic writing -------------------------------------------------------------------------

def test_refuses_to_overwrite_without_force(good, tmp_path):
    path, header, epochs = good
    before = path.read_bytes()
    other = with_epochs(header, 9, 1)
    with pytest.raises(OutputExistsError):
        write_stream(path, other, epochs[:1])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    write_stream(path, other, epochs[:1], force=True)
    assert StreamFile(path).header.epoch_first == 9
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_writer_accepts_bytes_chunks(tmp_path):
    header = make_header(epoch_count=1)
    (payload,) = make_epochs(header)
    path = tmp_path / "bytes.zsgd"
    write_stream(path, header, [payload[:3].tobytes(), bytearray(payload[3:].tobytes())])
    np.testing.assert_array_equal(StreamFile(path).epoch_payload(0), payload)


def test_failing_writer_leaves_nothing_behind(tmp_path):
    header = make_header()
    epochs = make_epochs(header)
    path = tmp_path / "new.zsgd"
    with pytest.raises(RuntimeError, match="boom"), StreamWriter(path, header) as writer:
        writer.write(epochs[0])
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    # too few payload bytes: refused on exit, nothing left either
    with pytest.raises(ValueError, match="promises"):
        write_stream(path, header, epochs[:2])
    assert list(tmp_path.iterdir()) == []


def test_failing_forced_rewrite_keeps_old_file(good, tmp_path):
    path, header, epochs = good
    before = path.read_bytes()

    def chunks():
        yield epochs[0]
        raise KeyboardInterrupt  # even a BaseException cleans up

    with pytest.raises(KeyboardInterrupt):
        write_stream(path, header, chunks(), force=True)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


# -- chunks of whole beats, samples across them ------------------------------------------

@pytest.mark.parametrize("chunk_beats", [1, 2, 5])
def test_samples_split_between_chunks_come_whole(good, monkeypatch, chunk_beats):
    """Chunks are whole beats (each with its CRC); a sample across two comes back whole."""
    path, header, epochs = good
    monkeypatch.setattr(zsgd_file, "CHUNK_BYTES", chunk_beats * header.layout.beat_bytes)
    stream = StreamFile(path)
    for k, payload in enumerate(epochs):
        chunks = list(stream.iter_epoch_chunks(k))
        assert all(c.size % header.layout.beat_bytes == 0 for c in chunks)
        assert len(chunks) == -(-header.beats_per_epoch // chunk_beats)
        blocks = list(stream.iter_fields(k, max_samples=2))
        np.testing.assert_array_equal(np.concatenate(blocks), unpack_stream(
            payload, header.layout, header.n_features, header.n_samples))


# -- level tables ---------------------------------------------------------------------------

def _random_levels(rng, layout: StreamLayout, n_features: int) -> np.ndarray:
    size = layout.levels + 1
    rows = [np.concatenate([[-256], np.sort(rng.choice(np.arange(-255, 256), size - 2,
                                                       replace=False)), [256]])
            for _ in range(n_features + 1)]
    return np.array(rows, dtype=np.int16)


@pytest.mark.parametrize("layout", [StreamLayout(Encoding.DOUBLE, 3, 64),
                                    StreamLayout(Encoding.SINGLE, 8, 512),
                                    StreamLayout(Encoding.DOUBLE, 1, 128)],
                         ids=["double3", "single8", "double1"])
def test_level_table_round_trip(tmp_path, layout):
    rng = np.random.default_rng(layout.bits)
    levels = _random_levels(rng, layout, 4)
    header = make_header(n_features=4, layout=layout, levels=levels)
    epochs = make_epochs(header)
    path = tmp_path / "levels.zsgd"
    write_stream(path, header, epochs)
    data = path.read_bytes()
    assert field(data, "levels") == 1
    table_at = FIXED_PART + 16 * 5
    assert header.header_bytes == table_at + 2 * 5 * (layout.levels + 1) + 4
    np.testing.assert_array_equal(
        np.frombuffer(data[table_at:header.header_bytes - 4], "<i2").reshape(5, -1), levels)
    stream = StreamFile(path)
    np.testing.assert_array_equal(stream.header.levels, levels)
    assert stream.header.levels.dtype == np.int16
    np.testing.assert_array_equal(stream.epoch_payload(2), epochs[2])
    uniform = make_header(n_features=4, layout=layout, levels=uniform_levels(layout.bits, 4))
    write_stream(tmp_path / "uniform.zsgd", uniform, epochs)
    np.testing.assert_array_equal(StreamFile(tmp_path / "uniform.zsgd").header.levels,
                                  uniform_levels(layout.bits, 4))


def _bad_tables():
    base = uniform_levels(3, 2).astype(np.int64)
    cases = []
    for row, entry, value, words in ((0, 0, -255, "first entry -256"),
                                     (2, 8, 255, "last entry 256"),
                                     (1, 4, 300, "entries in -256..256"),
                                     (2, 3, -128, "strictly increasing"),
                                     (1, 5, -10, "strictly increasing")):
        table = base.copy()
        table[row, entry] = value
        name = "label" if row == 0 else f"feature {row}"
        cases.append((table, f"level table row {row} ({name}), entry {entry}", words))
    return cases


@pytest.mark.parametrize("table, where, rule", _bad_tables(),
                         ids=["first", "last", "range", "equal", "decreasing"])
def test_a_bad_level_table_is_refused_on_write_and_read(tmp_path, table, where, rule):
    layout = StreamLayout(Encoding.DOUBLE, 3, 64)
    with pytest.raises(ConfigError) as info:
        make_header(n_features=2, layout=layout, levels=table)
    assert where in str(info.value) and rule in str(info.value)
    # The same table in a file (header CRC consistent): the reader names it too.
    good = make_header(n_features=2, layout=layout, levels=uniform_levels(3, 2))
    path = tmp_path / "table.zsgd"
    write_stream(path, good, make_epochs(good))
    data = bytearray(path.read_bytes())
    table_at = FIXED_PART + 16 * 3
    data[table_at:good.header_bytes - 4] = table.astype("<i2").tobytes()
    end = good.header_bytes - 4
    struct.pack_into("<I", data, end, zlib.crc32(bytes(data[:end])))
    expect_error(write_bytes(tmp_path, bytes(data)), where, rule)


def test_level_table_shape_and_encoding_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="raw32"):
        make_header(layout=StreamLayout(Encoding.RAW32, 32, 64),
                    levels=np.zeros((6, 2), np.int16))
    with pytest.raises(ConfigError, match=r"expected shape \(6, 9\)"):
        make_header(levels=uniform_levels(4, 5))  # b = 3 layout: 9 levels a row
    header = make_header(epoch_count=1)
    path = tmp_path / "raw.zsgd"
    raw = make_header(epoch_count=1, layout=StreamLayout(Encoding.RAW32, 32, 64))
    write_stream(path, raw, make_epochs(raw))
    expect_error(write_bytes(tmp_path, patched(path.read_bytes(), levels=1)), "levels",
                 "raw32")
    write_stream(tmp_path / "h.zsgd", header, make_epochs(header))
    expect_error(write_bytes(tmp_path, patched((tmp_path / "h.zsgd").read_bytes(), levels=2)),
                 "levels", "found 2")
    # levels = 1 without the table's bytes: the header size no longer matches
    expect_error(write_bytes(tmp_path, patched((tmp_path / "h.zsgd").read_bytes(), levels=1)),
                 "header size", "level table", f"found {header.header_bytes}")


def test_a_nonzero_padding_slot_is_refused(tmp_path):
    """Samples of more than 512 fields are padded on the wire; a reader refuses a padding slot
    that is not zero, naming the epoch and the sample."""
    header = make_header(n_features=600, n_samples=4, epoch_count=1)
    payload = make_epochs(header)[0]
    bits = np.unpackbits(payload, bitorder="little")
    bits[(2 * 602 + 601) * header.layout.field_width] = 1      # sample 2's padding slot
    path = tmp_path / "padded.zsgd"
    write_stream(path, header, [np.packbits(bits, bitorder="little")])
    data = StreamFile(path)
    with pytest.raises(StreamFormatError) as info:
        list(data.iter_fields(0))
    assert "epoch 0" in str(info.value) and "sample 2 has a nonzero padding slot" in str(
        info.value)


def test_a_per_feature_table_pads_for_the_lanes_tables(tmp_path):
    """201 fields with a per-feature level table are 202 slots (a lane's tables hold 128
    features); with the same table in every row, 201 (one shared table)."""
    layout = StreamLayout(Encoding.DOUBLE, 2, 64)
    rng = np.random.default_rng(5)
    table = np.array([[-256, *sorted(rng.choice(np.arange(-255, 256), 3, replace=False)), 256]
                      for _ in range(201)])
    for levels, slots in ((table, 202), (np.repeat(table[:1], 201, axis=0), 201)):
        header = make_header(n_features=200, n_samples=5, epoch_count=1, layout=layout,
                             levels=levels)
        assert header.layout.sample_fields(200) == slots
        fields = rng.integers(0, 16, (5, 201), dtype=np.uint64)
        payload = pack_stream(fields, header.layout)
        assert payload.size == -(-5 * slots * 4 // 64) * 8
        path = tmp_path / f"t{slots}.zsgd"
        write_stream(path, header, [payload])
        data = StreamFile(path)
        assert data.header.layout.tables == (slots == 202)
        assert np.array_equal(np.concatenate(list(data.iter_fields(0))), fields)
