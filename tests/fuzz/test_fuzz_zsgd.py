"""The ``.zsgd`` reader under fuzzed input: only ``StreamFormatError`` ever escapes.

Valid files (three layouts) are mutated: bytes flipped (with the header CRC left wrong or
recomputed, so the checks behind the CRC are reached too), cut at every length class (inside
the fixed header, the scale table, the header CRC, the payload), header fields set to extreme
or random values (huge, zero, all ones: the unsigned fields' "negative" values), bytes appended,
or replaced by random bytes.  A file the reader accepts must then be readable to its end.  The
named malformed classes are in ``tests/host/test_zsgd_file.py`` (bad magic, version, truncation,
header and payload CRC, absurd counts, header sizes); the tests at the end add the memory bound
for huge size claims.
"""

from __future__ import annotations

import struct
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from zipsgd.host.zsgd_file import (
    FIXED_BYTES,
    HEADER_FIELDS,
    Scaling,
    StreamFile,
    StreamHeader,
    write_stream,
)
from zipsgd.spec.errors import StreamFormatError
from zipsgd.spec.stream import Encoding, StreamLayout, pack_stream, uniform_levels

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_support import fuzz_settings, peak_allocation

#: Field name -> (offset, struct code) of the fixed header part.
FIELDS: dict[str, tuple[int, str]] = {}
_offset = 0
for _name, _code, _ in HEADER_FIELDS:
    FIELDS[_name] = (_offset, "<" + _code)
    _offset += struct.calcsize("<" + _code)


def valid_file(layout: StreamLayout, n_features: int, n_samples: int, epochs: int,
               levels: bool = False) -> bytes:
    rng = np.random.default_rng(n_features)
    header = StreamHeader(layout, n_features, n_samples, 7, Scaling.MAXABS,
                          np.zeros(n_features + 1), rng.uniform(0.5, 2, n_features + 1),
                          epoch_count=epochs,
                          levels=uniform_levels(layout.bits, n_features) if levels else None)
    width = layout.field_width
    payload = [pack_stream(rng.integers(0, 1 << width, (n_samples, n_features + 1),
                                        dtype=np.uint64), layout) for _ in range(epochs)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "valid.zsgd"
        write_stream(path, header, payload)
        return path.read_bytes()


VALID = [valid_file(StreamLayout(Encoding.DOUBLE, 3, 64), 5, 4, 2),
         valid_file(StreamLayout(Encoding.SINGLE, 8, 128), 1, 3, 1),
         valid_file(StreamLayout(Encoding.RAW32, 32, 64), 3, 2, 3),
         valid_file(StreamLayout(Encoding.DOUBLE, 2, 128), 4, 5, 2, levels=True)]


def header_size(data: bytes) -> int:
    """The header size the file's feature count, bits and level flag imply."""
    def value(name):
        return struct.unpack_from(FIELDS[name][1], data, FIELDS[name][0])[0]

    rows = value("n_features") + 1
    table = 2 * rows * ((1 << value("bits")) + 1) if value("levels") == 1 \
        and 1 <= value("bits") <= 8 else 0
    return FIXED_BYTES + 16 * rows + table + 4


def fix_header_crc(data: bytearray) -> None:
    """Recompute the header CRC over the header length the file's own feature count implies,
    when the file is that long (so mutations behind the CRC reach the later checks)."""
    if len(data) < FIXED_BYTES:
        return
    end = header_size(bytes(data)) - 4
    if end + 4 <= len(data):
        struct.pack_into("<I", data, end, zlib.crc32(bytes(data[:end])))


def field_value(code: str):
    bits = 8 * struct.calcsize(code)
    top = (1 << bits) - 1
    return st.one_of(st.sampled_from([0, 1, 2, top, top - 1, top >> 1, (top >> 1) + 1]),
                     st.integers(0, top), st.integers(0, min(top, 1 << 16)))


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    kind = draw(st.sampled_from(["flip", "truncate", "field", "append", "random"]))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 4))):
            position = draw(st.integers(0, len(data) - 1))
            data[position] ^= draw(st.integers(1, 255))
        if draw(st.booleans()):
            fix_header_crc(data)
    elif kind == "truncate":
        head = header_size(bytes(data))
        cut = draw(st.one_of(st.integers(0, FIXED_BYTES), st.integers(FIXED_BYTES, head),
                             st.integers(head - 4, head), st.integers(head, len(data) - 1)))
        data = data[:cut]
    elif kind == "field":
        for _ in range(draw(st.integers(1, 3))):
            name = draw(st.sampled_from([n for n in FIELDS if n != "magic"]))
            offset, code = FIELDS[name]
            struct.pack_into(code, data, offset, draw(field_value(code)))
        if draw(st.booleans()):
            fix_header_crc(data)
    elif kind == "append":
        data += draw(st.binary(min_size=1, max_size=64))
    else:
        prefix = bytes(data[:draw(st.integers(0, 12))])
        data = bytearray(prefix + draw(st.binary(max_size=300)))
    return bytes(data)


def read_all(path: Path) -> None:
    """Open the file and read the samples of every epoch (what training does)."""
    stream = StreamFile(path)
    header = stream.header
    for epoch in range(header.epoch_count):
        total = sum(block.shape[0] for block in stream.iter_fields(epoch, max_samples=3))
        assert total == header.n_samples


def refusal(data: bytes) -> str | None:
    """Write ``data`` as a file and read it all: None if accepted, else the error message
    (any other exception propagates, failing the test)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzzed.zsgd"
        path.write_bytes(data)
        try:
            read_all(path)
        except StreamFormatError as error:
            return str(error)
    return None


@fuzz_settings(400)
@given(data=mutated())
def test_reader_raises_only_stream_format_error(data):
    error = refusal(data)
    assert error is None or "\n" not in error  # one line, for the CLI


def test_mutations_reach_every_check():
    """The mutations are not stuck at the first check: over a fixed set of examples the
    reader refuses files for each of these reasons, and accepts some (e.g. a changed seed)."""
    reasons, accepted = set(), []

    @settings(derandomize=True, database=None, max_examples=400, deadline=None)
    @given(data=mutated())
    def collect(data):
        error = refusal(data)
        if error is None:
            accepted.append(data)
        else:
            reasons.add(error.split(":")[0])

    collect()
    assert accepted
    for reason in ("not a .zsgd file", "unsupported .zsgd version", "header CRC-32 mismatch",
                   "payload CRC-32 mismatch", "truncated header", "truncated", "header size"):
        assert reason in reasons, sorted(reasons)


# -- huge size claims are refused before anything is allocated ---------------------------

def test_huge_sample_count_refused_before_allocating(tmp_path):
    """A header claiming 2**40 samples of 2**16 epochs (with every other field and both CRC
    consistent) is refused by the size check, allocating well under a megabyte."""
    data = bytearray(VALID[0])
    header = header_size(bytes(data))
    n_samples, epochs = 1 << 40, 1 << 16
    epoch_bytes = StreamLayout(Encoding.DOUBLE, 3, 64).stream_bytes(5, n_samples)
    for name, value in (("n_samples", n_samples), ("epoch_count", epochs),
                        ("beats_per_epoch", epoch_bytes // 8),
                        ("payload_bytes", epochs * epoch_bytes)):
        struct.pack_into(FIELDS[name][1], data, FIELDS[name][0], value)
    fix_header_crc(data)
    path = tmp_path / "huge.zsgd"
    path.write_bytes(bytes(data))

    def refuse():
        try:
            StreamFile(path)
        except StreamFormatError as error:
            assert "truncated" in str(error) and str(header + epochs * epoch_bytes) \
                in str(error)
        else:
            raise AssertionError("a file claiming 2**56 bytes was accepted")

    assert peak_allocation(refuse) < 1 << 20
