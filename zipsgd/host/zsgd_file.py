"""The ``.zsgd`` file: a versioned, CRC-protected container for packed sample streams.

The header's fixed part is :data:`HEADER_FIELDS` (all integers little-endian), followed by the
scale table (``(offset, scale)`` float64 pairs, label first), the level table if the header's
``levels`` is 1 (``(n_features + 1) x (2**b + 1)`` int16 words, label row first, checked by
:func:`~zipsgd.spec.stream.check_levels`) and a CRC-32 of everything before it;
``docs/FORMAT.md`` is generated from these definitions and has a worked example.

The payload follows the header: ``epoch_count`` v2 streams (samples back to back, a
sample of more than 512 fields, or 128 with per-feature level tables, padded,
:mod:`zipsgd.spec.stream`) of ``n_samples`` samples
each, every one starting on a fresh beat.  A scaled value ``v`` stands for the original value
``offset + scale * v``.  Files of versions 1 (every sample on new beats) and 2 (long samples
not padded) are refused with a message asking to re-pack them.

Every problem with a file raises :class:`~zipsgd.spec.errors.StreamFormatError`.  Files are
published with :class:`zipsgd.host.output.atomic_output`: an existing file is replaced only with
``force=True``.
"""

from __future__ import annotations

import enum
import os
import stat
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..spec.errors import ConfigError, StreamFormatError
from ..spec.stream import (
    GROUP_LIMIT,
    LEVEL_DTYPE,
    MAX_FEATURES,
    Encoding,
    StreamLayout,
    StreamUnpacker,
    check_levels,
    per_feature_levels,
)
from .output import atomic_output

__all__ = ["MAGIC", "VERSION", "HEADER_FIELDS", "FIXED_BYTES", "FLAG_INTERCEPT", "Scaling",
           "LabelFormat", "StreamHeader", "StreamWriter", "EpochStreams", "StreamFile",
           "atomic_output", "write_stream", "with_epochs"]

MAGIC = b"\x89ZSGD\r\n\x1a"
#: The payload is read and checked in chunks of at most this many bytes (whole beats).
CHUNK_BYTES = 1 << 24
#: Version 2: samples back to back (stream format v2), optional level table.
VERSION = 3
#: The fixed part of the header, in order: (name, struct code, meaning).  The one definition
#: the reader, the writer and docs/FORMAT.md use.
HEADER_FIELDS = (
    ("magic", "8s", 'b"\\x89ZSGD\\r\\n\\x1a"'),
    ("version", "H", f"format version ({VERSION})"),
    ("header_bytes", "I", "size of the whole header: fixed part, scale table, level table (if any) "
                         "and header CRC"),
    ("encoding", "B", "0 double, 1 single, 2 raw32"),
    ("bits", "B", "interval-index bits b (1..8; 32 for raw32)"),
    ("bus_width", "H", "bits per beat: 64, 128, 256 or 512"),
    ("label_format", "B", "0: the label is field 0 of every sample, encoded like a feature"),
    ("scaling", "B", "0 maxabs, 1 minmax"),
    ("levels", "B", "0: uniform levels; 1: a level table follows the scale table (double and "
                    "single only; if its rows differ, samples are padded for per-feature "
                    "tables: sample_fields(n, tables))"),
    ("flags", "I", "bit 0: the last feature is an added intercept column (constant 1); "
                   "other bits zero"),
    ("n_features", "I", "features per sample (the label not counted)"),
    ("n_samples", "Q", "samples per epoch"),
    ("epoch_first", "I", "epoch index of the first stream in the payload"),
    ("epoch_count", "I", "streams in the payload: epochs epoch_first, epoch_first + 1, ..."),
    ("seed", "Q", "quantization seed: epoch k used SeedSequence([seed, k])"),
    ("beats_per_epoch", "Q", "beats of one epoch's stream: ceil(n_samples F "
                             "field_width / bus_width), F = sample_fields(n, tables) (checked "
                             "against the layout)"),
    ("payload_bytes", "Q", "bytes of payload after the header"),
    ("payload_crc32", "I", "CRC-32 (zlib) of the payload"),
)
_FIXED = struct.Struct("<" + "".join(code for _, code, _ in HEADER_FIELDS))
FIXED_BYTES = _FIXED.size
#: The magic and the version, read first: every version keeps them where they are.
_START = struct.Struct("<8sH")
_VERSION_END = _START.size
_MAX_U32 = (1 << 32) - 1
_SCALE_ENTRY = 16
_CRC_BYTES = 4
#: Header flag: the last feature is an intercept column added by the packer.
FLAG_INTERCEPT = 1
#: Upper bound on the number of samples in one epoch the format accepts.
MAX_SAMPLES = 1 << 40
#: Upper bound on epochs stored in one file.
MAX_EPOCHS = 1 << 16


class Scaling(enum.IntEnum):
    """How original values were mapped to [-1, 1]: ``v = (x - offset) / scale``."""

    MAXABS = 0  #: offset 0, scale max|x| (zeros stay zero: sparse data stays sparse)
    MINMAX = 1  #: offset (max+min)/2, scale (max-min)/2

    @classmethod
    def parse(cls, name) -> Scaling:
        if isinstance(name, Scaling):
            return name
        try:
            return cls[str(name).upper()]
        except KeyError:
            raise ConfigError(f"scaling must be maxabs or minmax, found {name!r}") from None


class LabelFormat(enum.IntEnum):
    #: The label is field 0 of every sample, quantized with the stream's encoding.
    FIELD0 = 0


@dataclass(frozen=True)
class StreamHeader:
    """Everything the header of a ``.zsgd`` file says (CRCs apart).

    ``levels`` is None for uniform levels, or the level table (checked and stored as int16 on
    construction).

    Raises
    ------
    ConfigError
        For a level table that breaks the level format, or a header too large for its size
        field.
    """

    layout: StreamLayout
    n_features: int
    n_samples: int
    seed: int
    scaling: Scaling
    offsets: np.ndarray  # float64, shape (n_features + 1,), label first
    scales: np.ndarray   # float64, shape (n_features + 1,), label first
    epoch_first: int = 0
    epoch_count: int = 1
    label_format: LabelFormat = LabelFormat.FIELD0
    intercept: bool = False
    levels: np.ndarray | None = None  # int16, shape (n_features + 1, 2**b + 1), label first

    def __post_init__(self):
        if self.levels is not None:
            object.__setattr__(self, "levels",
                               check_levels(self.levels, self.layout, self.n_features))
        # A per-feature table pads long samples for the lanes' tables (``sample_fields``).
        object.__setattr__(self, "layout",
                           replace(self.layout, tables=per_feature_levels(self.levels)))
        if self.header_bytes > _MAX_U32:
            raise ConfigError(f"header of {self.header_bytes} bytes: expected at most "
                              f"{_MAX_U32} (fewer features or a smaller level table)")

    @property
    def beats_per_epoch(self) -> int:
        return self.layout.stream_beats(self.n_features, self.n_samples)

    @property
    def epoch_bytes(self) -> int:
        return self.layout.stream_bytes(self.n_features, self.n_samples)

    @property
    def payload_bytes(self) -> int:
        return self.epoch_bytes * self.epoch_count

    @property
    def bits_per_value(self) -> float:
        return self.layout.bits_per_value(self.n_features, self.n_samples)

    @property
    def header_bytes(self) -> int:
        return _header_bytes(self.layout, self.n_features, self.levels is not None)

    def encode(self, payload_crc32: int) -> bytes:
        """The header bytes, header CRC included."""
        fixed = _FIXED.pack(
            MAGIC, VERSION, self.header_bytes, int(self.layout.encoding), self.layout.bits,
            self.layout.bus_width, int(self.label_format), int(self.scaling),
            int(self.levels is not None), FLAG_INTERCEPT if self.intercept else 0,
            self.n_features, self.n_samples, self.epoch_first, self.epoch_count, self.seed,
            self.beats_per_epoch, self.payload_bytes, payload_crc32)
        table = np.column_stack([self.offsets, self.scales]).astype("<f8").tobytes()
        levels = b"" if self.levels is None else self.levels.astype(LEVEL_DTYPE).tobytes()
        body = fixed + table + levels
        return body + struct.pack("<I", zlib.crc32(body))


def _level_bytes(layout: StreamLayout, n_features: int) -> int:
    return (n_features + 1) * (layout.levels + 1) * LEVEL_DTYPE.itemsize


def _header_bytes(layout: StreamLayout, n_features: int, levels: bool) -> int:
    return FIXED_BYTES + _SCALE_ENTRY * (n_features + 1) + _CRC_BYTES \
        + (_level_bytes(layout, n_features) if levels else 0)


def _check_code(name: str, value: int, kind) -> None:
    if value not in set(kind):
        codes = ", ".join(f"{int(e)} ({e.name.lower()})" for e in kind)
        raise StreamFormatError(f"{name}: expected one of {codes}, found {value}")


def _header_layout(encoding: int, bits: int, bus_width: int) -> StreamLayout:
    _check_code("encoding", encoding, Encoding)
    try:
        return StreamLayout(Encoding(encoding), bits, bus_width)
    except ConfigError as error:
        raise StreamFormatError(f"invalid layout in header: {error}") from None


def _decode_header(read) -> tuple[StreamHeader, int]:
    """Parse a header from ``read(n) -> bytes``; returns (header, payload_crc32)."""
    start = read(_VERSION_END)
    if len(start) < _VERSION_END:
        raise StreamFormatError(f"truncated header: expected {FIXED_BYTES} bytes, "
                                f"found {len(start)}")
    magic, version = _START.unpack(start)
    if magic != MAGIC:
        raise StreamFormatError(f"not a .zsgd file: expected magic {MAGIC!r}, found {magic!r}")
    if version != VERSION:
        raise StreamFormatError(f"unsupported .zsgd version: expected version {VERSION} "
                                "(samples back to back, samples of more than "
                                f"{GROUP_LIMIT} fields padded), found version {version}; "
                                "re-pack the data with `zipsgd quantize`")
    fixed = start + read(FIXED_BYTES - _VERSION_END)
    if len(fixed) < FIXED_BYTES:
        raise StreamFormatError(f"truncated header: expected {FIXED_BYTES} bytes, "
                                f"found {len(fixed)}")
    (_, _, header_bytes, encoding, bits, bus_width, label_format, scaling, levels, flags,
     n_features, n_samples, epoch_first, epoch_count, seed, beats_per_epoch, payload_bytes,
     payload_crc) = _FIXED.unpack(fixed)
    if flags & ~FLAG_INTERCEPT:
        raise StreamFormatError(f"flags: expected only bit 0 to be used, found {flags:#x}")
    if not 1 <= n_features <= MAX_FEATURES:
        raise StreamFormatError(f"feature count must be in 1..{MAX_FEATURES}, found {n_features}")
    if levels not in (0, 1):
        raise StreamFormatError(f"levels: expected 0 (uniform) or 1 (a level table), found "
                                f"{levels}")
    # The level table's size depends on the layout: check it first only when there is one.
    layout = _header_layout(encoding, bits, bus_width) if levels else None
    if levels and layout.encoding is Encoding.RAW32:
        raise StreamFormatError("levels: expected 0 for raw32 (a level table is for double and "
                                "single streams), found 1")
    expected_header = _header_bytes(layout, n_features, bool(levels))
    if header_bytes != expected_header:
        with_table = " and a level table" if levels else ""
        raise StreamFormatError(f"header size: expected {expected_header} bytes for "
                                f"{n_features} features{with_table}, found {header_bytes}")
    rest = read(header_bytes - FIXED_BYTES)
    if len(rest) < header_bytes - FIXED_BYTES:
        raise StreamFormatError(f"truncated header: expected {header_bytes} bytes, found "
                                f"{FIXED_BYTES + len(rest)}")
    body, (header_crc,) = fixed + rest[:-_CRC_BYTES], struct.unpack("<I", rest[-_CRC_BYTES:])
    if zlib.crc32(body) != header_crc:
        raise StreamFormatError(f"header CRC-32 mismatch: stored {header_crc:#010x}, "
                                f"computed {zlib.crc32(body):#010x}")
    for name, value, kind in (("scaling", scaling, Scaling),
                              ("label_format", label_format, LabelFormat)):
        _check_code(name, value, kind)
    layout = layout or _header_layout(encoding, bits, bus_width)
    scaling, label_format = Scaling(scaling), LabelFormat(label_format)
    if not 1 <= n_samples <= MAX_SAMPLES:
        raise StreamFormatError(f"sample count must be in 1..{MAX_SAMPLES}, found {n_samples}")
    if not 1 <= epoch_count <= MAX_EPOCHS:
        raise StreamFormatError(f"epoch count must be in 1..{MAX_EPOCHS}, found {epoch_count}")
    if epoch_first + epoch_count - 1 > 0xFFFF_FFFF:  # the writer refuses such a range too
        raise StreamFormatError(f"epochs {epoch_first}..{epoch_first + epoch_count - 1}: "
                                "expected the last epoch index to fit 32 bits")
    table_end = FIXED_BYTES + _SCALE_ENTRY * (n_features + 1)
    table = np.frombuffer(body[FIXED_BYTES:table_end], dtype="<f8").reshape(n_features + 1, 2)
    level_table = None
    if levels:
        level_table = np.frombuffer(body[table_end:], dtype=LEVEL_DTYPE).reshape(
            n_features + 1, layout.levels + 1)
    try:
        header = StreamHeader(layout, n_features, n_samples, seed, scaling,
                              table[:, 0].astype(np.float64), table[:, 1].astype(np.float64),
                              epoch_first, epoch_count, label_format,
                              bool(flags & FLAG_INTERCEPT), level_table)
    except ConfigError as error:
        raise StreamFormatError(str(error)) from None
    if beats_per_epoch != header.beats_per_epoch:
        raise StreamFormatError(f"beats per epoch: expected {header.beats_per_epoch} for "
                                f"this layout, found {beats_per_epoch}")
    if payload_bytes != header.payload_bytes:
        raise StreamFormatError(f"payload size: expected {header.payload_bytes} bytes, "
                                f"found {payload_bytes}")
    if not (np.isfinite(header.offsets).all() and np.isfinite(header.scales).all()
            and (header.scales > 0).all()):
        raise StreamFormatError("scale table: expected finite offsets and positive scales")
    if header.intercept and (header.offsets[-1] != 0.0 or header.scales[-1] != 1.0):
        raise StreamFormatError("the intercept flag is set: expected the last feature's scale "
                                f"entry to be offset 0 and scale 1, found {header.offsets[-1]!r} "
                                f"and {header.scales[-1]!r}")
    return header, payload_crc


class StreamWriter:
    """Writes a ``.zsgd`` file from payload chunks, atomically.

    Use as a context manager; call :meth:`write` with payload chunks (uint8 arrays or bytes) in
    order.  On exit the byte count is checked against the header, the CRCs are filled in and the
    file is renamed into place.
    """

    def __init__(self, path, header: StreamHeader, force: bool = False):
        self.header = header
        self._output = atomic_output(path, force)
        self._crc = 0
        self._written = 0

    def __enter__(self):
        self._file = self._output.__enter__()
        self._file.write(b"\0" * self.header.header_bytes)
        return self

    def write(self, chunk) -> None:
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            chunk = np.frombuffer(chunk, dtype=np.uint8)
        data = memoryview(np.ascontiguousarray(chunk, dtype=np.uint8)).cast("B")
        self._crc = zlib.crc32(data, self._crc)
        self._written += len(data)
        self._file.write(data)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                if self._written != self.header.payload_bytes:
                    raise ValueError(f"payload: header promises {self.header.payload_bytes} "
                                     f"bytes, {self._written} were written")
                self._file.seek(0)
                self._file.write(self.header.encode(self._crc))
            except BaseException as error:
                self._output.__exit__(type(error), error, error.__traceback__)
                raise
        return self._output.__exit__(exc_type, exc, tb)


class EpochStreams:
    """The epochs of a packed data set, wherever they are: a ``.zsgd`` file
    (:class:`StreamFile`) or memory (:class:`zipsgd.host.packed.PackedData`).  A subclass sets
    ``header`` and ``payload_crc32`` and gives :meth:`iter_epoch_chunks`."""

    header: StreamHeader
    payload_crc32: int
    #: What reports call the data (the file's path, or the name of the arrays).
    name: str

    @property
    def layout(self) -> StreamLayout:
        return self.header.layout

    def iter_epoch_chunks(self, index: int) -> Iterator[np.ndarray]:
        """The packed stream of the ``index``-th epoch stored (0-based) as uint8 chunks of
        whole beats."""
        raise NotImplementedError

    def epoch_payload(self, index: int) -> np.ndarray:
        """The packed stream of the ``index``-th epoch stored, whole, in memory."""
        return np.concatenate(list(self.iter_epoch_chunks(index)))

    def iter_fields(self, index: int, max_samples: int = 65536) -> Iterator[np.ndarray]:
        """The samples of the ``index``-th stored epoch as uint64 field arrays ``(k,
        n_features + 1)`` (label first) of at most ``max_samples`` rows, read chunk by chunk
        (:meth:`iter_epoch_chunks`); a sample split between two chunks comes whole."""
        header = self.header
        unpacker = StreamUnpacker(header.layout, header.n_features, header.n_samples,
                                  max_samples)
        try:
            for chunk in self.iter_epoch_chunks(index):
                yield from unpacker.feed(chunk)
            unpacker.finish()
        except ValueError as error:
            raise StreamFormatError(f"epoch {index} of {self.name}: {error}") from None

    def info(self) -> dict:
        """The header and sizes, as ``zipsgd inspect`` prints them."""
        h = self.header
        raw = StreamLayout.make("raw32", 32, h.layout.bus_width)
        raw_bytes = raw.stream_bytes(h.n_features, h.n_samples) * h.epoch_count
        return {
            "file": self.name, "version": VERSION,
            "encoding": h.layout.encoding.name.lower(), "bits": h.layout.bits,
            "bus_width": h.layout.bus_width, "field_width": h.layout.field_width,
            "levels": "uniform" if h.levels is None else "table",
            "n_samples": h.n_samples, "n_features": h.n_features,
            "beats_per_epoch": h.beats_per_epoch, "epoch_first": h.epoch_first,
            "epoch_count": h.epoch_count, "seed": h.seed, "scaling": h.scaling.name.lower(),
            "label_format": h.label_format.name.lower(), "header_bytes": h.header_bytes,
            "payload_bytes": h.payload_bytes, "payload_crc32": f"{self.payload_crc32:#010x}",
            "bits_per_value": h.bits_per_value,
            "bits_per_value_limit": h.layout.field_width * (h.n_features + 1) / h.n_features,
            "raw32_payload_bytes": raw_bytes,
            "compression_vs_raw32": raw_bytes / h.payload_bytes,
        }


class StreamFile(EpochStreams):
    """A ``.zsgd`` file opened for reading.

    Opening checks the header (magic, version, CRC, consistency) and the file size; with
    ``verify_payload`` (the default) it also reads the payload once in chunks, checks its CRC
    and keeps a CRC-32 of every chunk.  The payload is then read again chunk by chunk as it is
    used, each chunk checked against its CRC, so what a run trains on is exactly what was
    verified: a file changed or truncated in the meantime raises :class:`StreamFormatError`.
    Files larger than RAM stream in chunks of at most :data:`CHUNK_BYTES`.

    Raises
    ------
    StreamFormatError
        For any malformed, truncated or corrupt file, one that is not a regular file, or one
        that cannot be read.
    """

    def __init__(self, path, verify_payload: bool = True):
        self.path = Path(path)
        self.name = str(self.path)
        try:
            kind = self.path.stat().st_mode
            if not stat.S_ISREG(kind):  # opening a FIFO would wait for a writer forever
                raise StreamFormatError(f"{path}: expected a regular .zsgd file, found "
                                        f"{_file_kind(kind)}")
            with open(self.path, "rb") as file:
                self.header, self.payload_crc32 = _decode_header(file.read)
            size = self.path.stat().st_size
        except OSError as error:
            raise StreamFormatError(f"{path}: expected a readable .zsgd file, found "
                                    f"{(error.strerror or str(error)).lower()}") from None
        expected = self.header.header_bytes + self.header.payload_bytes
        if size != expected:
            kind = "truncated" if size < expected else "trailing bytes after payload"
            raise StreamFormatError(f"{kind}: expected {expected} bytes, found {size}")
        self._chunk_crcs: list[list[int]] | None = None
        if verify_payload:
            self.verify_payload()

    def _chunks(self, index: int) -> list[tuple[int, int]]:
        """(file offset, size) of the chunks of stored epoch ``index``: whole beats, at most
        :data:`CHUNK_BYTES` (at least one beat)."""
        header = self.header
        beat_bytes = header.layout.beat_bytes
        step = max(1, CHUNK_BYTES // beat_bytes) * beat_bytes
        start = header.header_bytes + index * header.epoch_bytes
        return [(start + offset, min(step, header.epoch_bytes - offset))
                for offset in range(0, header.epoch_bytes, step)]

    def _read(self, file, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset``, from the file itself (unbuffered: nothing read ahead
        before it was checked)."""
        data = bytearray()
        while len(data) < size:
            part = os.pread(file.fileno(), size - len(data), offset + len(data))
            if not part:
                break
            data += part
        if len(data) != size:
            raise StreamFormatError(f"{self.path} was truncated after it was opened: expected "
                                    f"{size} bytes at offset {offset}, found {len(data)}")
        return data

    def verify_payload(self) -> None:
        """Read the whole payload, check its CRC-32 and keep every chunk's CRC."""
        crc, chunk_crcs = 0, []
        try:
            with open(self.path, "rb", buffering=0) as file:
                for index in range(self.header.epoch_count):
                    crcs = []
                    for offset, size in self._chunks(index):
                        data = self._read(file, offset, size)
                        crc = zlib.crc32(data, crc)
                        crcs.append(zlib.crc32(data))
                    chunk_crcs.append(crcs)
        except OSError as error:
            raise StreamFormatError(f"{self.path}: cannot read the payload: "
                                    f"{(error.strerror or str(error)).lower()}") from None
        if crc != self.payload_crc32:
            raise StreamFormatError(f"payload CRC-32 mismatch: stored {self.payload_crc32:#010x},"
                                    f" computed {crc:#010x}")
        self._chunk_crcs = chunk_crcs

    def iter_epoch_chunks(self, index: int) -> Iterator[np.ndarray]:
        """The packed stream of the ``index``-th epoch stored (0-based), as uint8 chunks of
        whole beats read from the file, each checked against the CRC taken when the file was
        verified.

        Raises
        ------
        IndexError
            If there is no such epoch.
        StreamFormatError
            If the file changed or shrank since it was opened and verified.
        """
        if not 0 <= index < self.header.epoch_count:
            raise IndexError(f"epoch index {index} outside 0..{self.header.epoch_count - 1}")
        try:
            with open(self.path, "rb", buffering=0) as file:
                for k, (offset, size) in enumerate(self._chunks(index)):
                    data = self._read(file, offset, size)
                    if self._chunk_crcs is not None and \
                            zlib.crc32(data) != self._chunk_crcs[index][k]:
                        raise StreamFormatError(f"{self.path} changed after it was opened and "
                                                f"verified (bytes {offset}..{offset + size - 1})")
                    yield np.frombuffer(data, dtype=np.uint8)
        except OSError as error:
            raise StreamFormatError(f"{self.path}: cannot read the payload: "
                                    f"{(error.strerror or str(error)).lower()}") from None


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def write_stream(path, header: StreamHeader, chunks: Iterable, force: bool = False) -> None:
    """Write ``chunks`` (payload pieces) as a ``.zsgd`` file described by ``header``."""
    with StreamWriter(path, header, force) as writer:
        for chunk in chunks:
            writer.write(chunk)


def with_epochs(header: StreamHeader, epoch_first: int, epoch_count: int) -> StreamHeader:
    return replace(header, epoch_first=epoch_first, epoch_count=epoch_count)
