"""The packed sample stream: the one definition of how samples become AXI4-Stream beats.

The host packer, the ``.zsgd`` file payload, the golden model's decoder, the hardware decoder and
the benches all use this module; ``docs/FORMAT.md`` shows it bit by bit.

A *sample* is ``n_features + 1`` *fields*: field 0 is the label, fields ``1..n`` the features.
Every field of a stream has the same width ``field_width`` (set by the encoding and bit width).

Stream format v2 (samples back to back; what ``.zsgd`` files hold and the v2 engine reads): a
sample of ``n + 1`` fields takes ``F = sample_fields(n)`` field slots: ``F = n + 1`` when
``n + 1 <= GROUP_LIMIT`` (512), else ``n + 1`` rounded up to a multiple of the smallest power
of two ``g`` with ``ceil((n + 1)/g) <= GROUP_LIMIT``, the slots after field ``n`` zero (the
engine's lanes hold at least 512 features each, ``docs/HARDWARE.md``; this costs under
``2/GROUP_LIMIT`` of the bits).  A stream with per-feature level tables (a level table whose
rows are not all the same, :func:`per_feature_levels`; ``StreamLayout.tables``) uses
``TABLE_GROUP_LIMIT`` (128, the features a lane's level tables hold) in place of
``GROUP_LIMIT``.  The slots of an epoch of ``K`` samples are numbered
``f = s*F + j`` (sample ``s``, field ``j``; ``j = 0`` is the label), and slot ``f`` occupies
stream bits ``[f*field_width, (f+1)*field_width)``, least significant bit first.  Beat ``t`` of
``bus_width`` bits holds stream bits ``[t*bus_width, (t+1)*bus_width)``, so a sample may start
anywhere in a beat and a field may cross a beat (and a 64-bit word) boundary.  The bits after
the epoch's last slot are zero; the epoch takes
``stream_beats = ceil(K*F*field_width / bus_width)`` beats and ``tlast`` is set on its last
beat only.  The engine is told ``K`` by a register, so padding is never taken for a sample.
Beats are stored little-endian: byte ``k`` of a beat is ``tdata[8k+7:8k]``.  On the wire a
feature value costs ``bits_per_value = stream_beats*bus_width / (K*n)`` bits, which tends to
``field_width*F/n`` as ``K`` grows.

Beat layout v1 (what the current engine in ``zipsgd/hw`` reads, until the v2 engine replaces
it): a sample starts on a new beat; a beat holds ``fields_per_beat = bus_width // field_width``
fields, field ``i`` of the beat at bits ``[i*field_width, (i+1)*field_width)``; a sample takes
``beats_per_sample`` beats, the bits above its last field are zero and ``tlast`` is set on its
last beat (:func:`pack_beats_v1`; :func:`restream_v1` converts a v2 stream).

Field contents (``b`` = bits):

``DOUBLE``  ``b + 2`` bits: ``[b-1:0]`` interval index ``i``, ``[b]`` first sample bit ``s1``,
            ``[b+1]`` second sample bit ``s2``.  The two samples are the levels ``i + s1`` and
            ``i + s2`` of ``2**b`` intervals on [-1, 1].
``SINGLE``  ``b + 1`` bits: ``[b-1:0]`` interval index ``i``, ``[b]`` sample bit ``s``; both
            samples are the level ``i + s`` (the biased baseline).
``RAW32``   32 bits: a two's complement word with 30 fraction bits (the full-precision baseline).

Decoding (the engine's first stage, :func:`decode_fields`): a level ``q`` in ``0..2**b`` becomes
the feature word ``F = (2*q - 2**b) << (8 - b)`` with :data:`QUANT_FEATURE_FRAC` = 8 fraction
bits, so ``F / 256`` is the level's value in [-1, 1] for every ``b`` (uniform levels).  With a
level table (a codebook: :func:`check_levels`), ``F = levels[j][q]`` for field ``j`` instead:
row ``j`` has ``2**b + 1`` int16 words, strictly increasing from ``-256`` to ``+256``
(:data:`LEVEL_ONE`), each ``value * 256``; the uniform table (:func:`uniform_levels`) gives
exactly the uniform words.  A ``RAW32`` word is clamped to ``[-2**30, 2**30]`` (the values
[-1, 1]) and keeps :data:`RAW_FEATURE_FRAC` = 30 fraction bits.  The label word ``Y`` is
``F1 + F2`` with 9 fraction bits for ``DOUBLE`` (the mean of both samples, still unbiased),
``2*F`` with 9 fraction bits for ``SINGLE`` and the clamped word with 30 fraction bits for
``RAW32``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

__all__ = [
    "Encoding",
    "StreamLayout",
    "BUS_WIDTHS",
    "MAX_FEATURES",
    "QUANT_FEATURE_FRAC",
    "RAW_FEATURE_FRAC",
    "QUANT_LABEL_FRAC",
    "RAW_LABEL_FRAC",
    "RAW_ONE",
    "LEVEL_FRAC",
    "LEVEL_ONE",
    "LEVEL_DTYPE",
    "uniform_levels",
    "check_levels",
    "pack_stream",
    "unpack_stream",
    "StreamPacker",
    "StreamUnpacker",
    "stream_padding_is_zero",
    "restream_v1",
    "pack_beats_v1",
    "unpack_beats_v1",
    "padding_is_zero_v1",
    "check_n_features",
    "sample_fields",
    "per_feature_levels",
    "GROUP_LIMIT",
    "TABLE_GROUP_LIMIT",
    "decode_fields",
    "DecodedSamples",
]

#: Field slots a sample's group may have (:func:`sample_fields`): each of the engine's lanes
#: holds the features of at most this many slots.
GROUP_LIMIT = 512
#: The same with per-feature level tables (``StreamLayout.tables``): the features a lane's
#: level tables hold.
TABLE_GROUP_LIMIT = 128

#: Supported AXI4-Stream data widths (bits per beat).
BUS_WIDTHS = (64, 128, 256, 512)
#: Largest feature count the format can describe (the engine's own N_max is a build parameter).
MAX_FEATURES = (1 << 24) - 1
#: Fraction bits of a decoded quantized feature word.
QUANT_FEATURE_FRAC = 8
#: Fraction bits of a decoded RAW32 feature word.
RAW_FEATURE_FRAC = 30
#: Fraction bits of a decoded quantized label word (mean of two samples: one more bit).
QUANT_LABEL_FRAC = QUANT_FEATURE_FRAC + 1
#: Fraction bits of a decoded RAW32 label word.
RAW_LABEL_FRAC = RAW_FEATURE_FRAC
#: The RAW32 word for the value 1.0; decoded RAW32 words are clamped to [-RAW_ONE, RAW_ONE].
RAW_ONE = 1 << RAW_FEATURE_FRAC
#: Fraction bits of a level-table word: ``word / 256`` is the level's value in [-1, 1].
LEVEL_FRAC = QUANT_FEATURE_FRAC
#: The level-table word of the value 1.0: every row runs from ``-LEVEL_ONE`` to ``+LEVEL_ONE``.
LEVEL_ONE = 1 << LEVEL_FRAC
#: How level-table words are stored (in ``.zsgd`` files too): little-endian int16.
LEVEL_DTYPE = np.dtype("<i2")


class Encoding(enum.IntEnum):
    """How a value is stored in a field.  The integer values are the file and register codes."""

    DOUBLE = 0
    SINGLE = 1
    RAW32 = 2

    @classmethod
    def parse(cls, name) -> Encoding:
        if isinstance(name, Encoding):
            return name
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            try:
                return cls(int(name))
            except ValueError:
                codes = ", ".join(f"{int(e)} ({e.name.lower()})" for e in cls)
                raise ConfigError(f"encoding code must be one of {codes}, found {name}") \
                    from None
        try:
            return cls[str(name).upper()]
        except KeyError:
            names = ", ".join(e.name.lower() for e in cls)
            raise ConfigError(f"encoding must be one of {names}, found {name!r}") from None


@dataclass(frozen=True)
class StreamLayout:
    """The layout of one packed stream.

    Parameters
    ----------
    encoding : Encoding
    bits : int
        Interval-index bits ``b`` in 1..8 for ``DOUBLE`` and ``SINGLE``; must be 32 for ``RAW32``.
    bus_width : int
        Bits per AXI4-Stream beat, one of :data:`BUS_WIDTHS`.
    tables : bool
        The stream has per-feature level tables (:func:`per_feature_levels`), so its samples
        are padded for :data:`TABLE_GROUP_LIMIT` (:func:`sample_fields`); quantized only.

    Raises
    ------
    ConfigError
        If a parameter is out of range.
    """

    encoding: Encoding
    bits: int
    bus_width: int = 64
    tables: bool = dataclasses.field(default=False, kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "encoding", Encoding.parse(self.encoding))
        if self.bus_width not in BUS_WIDTHS:
            raise ConfigError(f"bus width must be one of {BUS_WIDTHS}, found {self.bus_width!r}")
        if self.encoding is Encoding.RAW32:
            if self.bits != 32:
                raise ConfigError(f"raw32 stores 32 bits per value, found bits={self.bits!r}")
            if self.tables:
                raise ConfigError("raw32 streams have no level tables")
        elif not isinstance(self.bits, int) or not 1 <= self.bits <= 8:
            raise ConfigError(f"bits must be an integer in 1..8, found {self.bits!r}")

    @classmethod
    def make(cls, encoding, bits, bus_width: int = 64, tables: bool = False) -> StreamLayout:
        """Like the constructor, but ``bits`` is ignored (set to 32) for ``raw32``."""
        encoding = Encoding.parse(encoding)
        return cls(encoding, 32 if encoding is Encoding.RAW32 else bits, bus_width, tables=tables)

    def sample_fields(self, n_features: int) -> int:
        """A sample's slots in this stream (:func:`sample_fields`)."""
        return sample_fields(n_features, self.tables)

    @property
    def field_width(self) -> int:
        """Bits per field."""
        return {Encoding.DOUBLE: self.bits + 2, Encoding.SINGLE: self.bits + 1,
                Encoding.RAW32: 32}[self.encoding]

    @property
    def fields_per_beat(self) -> int:
        return self.bus_width // self.field_width

    @property
    def beat_bytes(self) -> int:
        return self.bus_width // 8

    # -- stream format v2: samples back to back --------------------------------------------

    def stream_bits(self, n_features: int, n_samples: int) -> int:
        """Slot bits of an epoch of ``n_samples`` samples (the final padding not counted)."""
        return _check_n_samples(n_samples) * self.sample_fields(n_features) * self.field_width

    def stream_beats(self, n_features: int, n_samples: int) -> int:
        """Beats of a v2 epoch: ``ceil(n_samples * sample_fields(n) * field_width / W)``."""
        return -(-self.stream_bits(n_features, n_samples) // self.bus_width)

    def stream_bytes(self, n_features: int, n_samples: int) -> int:
        """Bytes of a v2 epoch (whole beats)."""
        return self.stream_beats(n_features, n_samples) * self.beat_bytes

    def bits_per_value(self, n_features: int, n_samples: int) -> float:
        """Bits a v2 epoch moves per feature value, counting the label and the padding: at most
        ``field_width * F/n * (1 + W / (K*F*field_width))``, ``F = sample_fields(n)``."""
        return self.stream_beats(n_features, n_samples) * self.bus_width \
            / (n_samples * n_features)

    # -- beat layout v1: every sample on new beats (the current engine) ------------------

    def beats_per_sample(self, n_features: int) -> int:
        """Beats one sample of ``n_features`` features (plus its label field) takes in the v1
        beat layout."""
        check_n_features(n_features)
        return -(-(n_features + 1) // self.fields_per_beat)

    def slice_map(self, n_features: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
        """Where a v1 engine of ``lanes`` lanes handles each field of a sample.

        Each v1 beat is issued as slices of at most ``lanes`` fields (``ceil(per_beat/lanes)``
        slices; field ``f0 + i`` of a slice starting at field ``f0`` goes to lane ``i``), and a
        slice that would start past the last feature is skipped.  Returns ``(slice, lane)``:
        for every field ``0..n_features`` (0 is the label) the slice of the sample it is issued
        in and its lane.  With ``lanes >= fields_per_beat`` slices are beats.
        """
        check_n_features(n_features)
        if not isinstance(lanes, int) or lanes < 1:
            raise ConfigError(f"lanes must be a positive integer, found {lanes!r}")
        field = np.arange(n_features + 1)
        per_beat = self.fields_per_beat
        slices_per_beat = -(-per_beat // lanes)
        in_beat = field % per_beat
        # Every beat but the last has all its slices (a slice starts at most at field n).
        slice_index = (field // per_beat) * slices_per_beat + in_beat // lanes
        return slice_index, in_beat % lanes

    def slices_per_sample(self, n_features: int, lanes: int) -> int:
        """Cycles a v1 engine of ``lanes`` lanes takes to issue one sample (:meth:`slice_map`);
        equals :meth:`beats_per_sample` when ``lanes >= fields_per_beat``."""
        return int(self.slice_map(n_features, lanes)[0][-1]) + 1

    def sample_bytes_v1(self, n_features: int) -> int:
        """Bytes of one sample in the v1 beat layout."""
        return self.beats_per_sample(n_features) * self.beat_bytes

    @property
    def levels(self) -> int:
        """Quantization intervals ``2**b`` (0 for RAW32)."""
        return 0 if self.encoding is Encoding.RAW32 else 1 << self.bits

    def __str__(self):
        if self.encoding is Encoding.RAW32:
            return f"raw32/W{self.bus_width}"
        return f"{self.encoding.name.lower()}{self.bits}/W{self.bus_width}"


def check_n_features(n_features) -> int:
    if not isinstance(n_features, (int, np.integer)) or not 1 <= n_features <= MAX_FEATURES:
        raise ConfigError(f"feature count must be in 1..{MAX_FEATURES}, found {n_features!r}")
    return int(n_features)


def sample_fields(n_features, tables: bool = False) -> int:
    """Field slots of a sample in stream format v2: ``n + 1``, rounded up to a multiple of the
    smallest power of two ``g`` with ``ceil((n + 1)/g) <= GROUP_LIMIT`` (or
    :data:`TABLE_GROUP_LIMIT` with per-feature level ``tables``)."""
    fields = check_n_features(n_features) + 1
    limit = TABLE_GROUP_LIMIT if tables else GROUP_LIMIT
    g = 1
    while -(-fields // g) > limit:
        g *= 2
    return -(-fields // g) * g


def per_feature_levels(levels) -> bool:
    """Whether a level table is per feature: given, with rows not all the same (the engine
    then holds a table per feature; one shared row otherwise)."""
    if levels is None:
        return False
    levels = np.asarray(levels)
    return bool((levels != levels[:1]).any())


def _check_n_samples(n_samples) -> int:
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) \
            or n_samples < 1:
        raise ConfigError(f"sample count must be a positive integer, found {n_samples!r}")
    return int(n_samples)


# -- level tables (codebooks) ----------------------------------------------------------------

def uniform_levels(bits: int, n_features: int) -> np.ndarray:
    """The level table of uniform levels: ``(n_features + 1, 2**bits + 1)`` int16 words, every
    row ``(2*q - 2**b) << (8 - b)`` for ``q = 0..2**b`` (what :func:`decode_fields` uses
    without a table)."""
    if not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ConfigError(f"bits must be an integer in 1..8, found {bits!r}")
    row = (2 * np.arange((1 << bits) + 1) - (1 << bits)) << (LEVEL_FRAC - bits)
    return np.tile(row.astype(LEVEL_DTYPE), (check_n_features(n_features) + 1, 1))


def check_levels(levels, layout: StreamLayout, n_features: int) -> np.ndarray:
    """A level table checked against the level format; returns it as an int16 array.

    The table has ``n_features + 1`` rows (the label's first) of ``2**b + 1`` words; every row
    starts at ``-LEVEL_ONE``, ends at ``+LEVEL_ONE`` and strictly increases (so its interior
    words are in ``-255..255``).  Only ``DOUBLE`` and ``SINGLE`` streams have levels.

    Raises
    ------
    ConfigError
        Naming the first row (``label`` or ``feature k``, 1-based) and entry that breaks a rule.
    """
    if layout.encoding is Encoding.RAW32:
        raise ConfigError("a level table is for double and single streams, found raw32")
    shape = (check_n_features(n_features) + 1, layout.levels + 1)
    table = np.asarray(levels)
    if table.shape != shape:
        raise ConfigError(f"level table: expected shape {shape} (label row first, 2**b + 1 "
                          f"levels a row), found {table.shape}")
    if table.dtype.kind not in "iu":
        raise ConfigError(f"level table: expected integer words, found {table.dtype}")
    words = table.astype(np.int64)
    edge = np.zeros(shape, dtype=bool)
    first, last, rising = edge.copy(), edge.copy(), edge.copy()
    first[:, 0] = words[:, 0] != -LEVEL_ONE
    last[:, -1] = words[:, -1] != LEVEL_ONE
    rising[:, 1:] = np.diff(words, axis=1) <= 0  # marks the entry that fails to rise
    rules = ((first, f"expected first entry {-LEVEL_ONE}"),
             (last, f"expected last entry {LEVEL_ONE}"),
             ((words < -LEVEL_ONE) | (words > LEVEL_ONE),
              f"expected entries in {-LEVEL_ONE}..{LEVEL_ONE}"),
             (rising, "expected strictly increasing entries"))
    for bad, rule in rules:
        if bad.any():
            row, entry = (int(i) for i in np.argwhere(bad)[0])
            name = "label" if row == 0 else f"feature {row}"
            raise ConfigError(f"level table row {row} ({name}), entry {entry}: {rule}, found "
                              f"{int(words[row, entry])}")
    return words.astype(LEVEL_DTYPE)


# -- stream format v2 -----------------------------------------------------------------------

def _word_period(fw: int) -> tuple[int, int]:
    """(fields, 64-bit words) of the shortest run of fields that ends on a word boundary."""
    bits = math.lcm(fw, 64)
    return bits // fw, bits // 64


def _slots(fw: int):
    """For each field of a word period: (word, shift, spill) -- the word it starts in, its bit
    offset there and whether it runs into the next word (fields are at most 32 bits)."""
    fields, _ = _word_period(fw)
    for slot in range(fields):
        word, shift = divmod(slot * fw, 64)
        yield slot, word, shift, shift + fw > 64


def _check_field_values(fields: np.ndarray, fw: int) -> None:
    if fields.size and int(fields.max()) >> fw:
        raise ValueError(f"a field value does not fit in {fw} bits")


def _pack_words(flat: np.ndarray, fw: int) -> np.ndarray:
    """uint64 words of fields ``flat`` laid end to end (zero-padded to a word period)."""
    per, n_words = _word_period(fw)
    groups = -(-flat.size // per)
    padded = np.zeros(groups * per, dtype=np.uint64)
    padded[:flat.size] = flat
    # Slot-major copies make every column operation below contiguous.
    slots = np.ascontiguousarray(padded.reshape(groups, per).T)
    words = np.zeros((n_words, groups), dtype=np.uint64)
    for slot, word, shift, spill in _slots(fw):
        words[word] |= slots[slot] << np.uint64(shift)
        if spill:
            words[word + 1] |= slots[slot] >> np.uint64(64 - shift)
    return words.T.reshape(-1)


def _unpack_words(words: np.ndarray, fw: int) -> np.ndarray:
    """The fields in uint64 ``words`` (a whole number of word periods), in stream order."""
    per, n_words = _word_period(fw)
    columns = np.ascontiguousarray(words.reshape(-1, n_words).T)
    mask = np.uint64((1 << fw) - 1)
    slots = np.empty((per, columns.shape[1]), dtype=np.uint64)
    for slot, word, shift, spill in _slots(fw):
        value = columns[word] >> np.uint64(shift)
        if spill:
            value |= columns[word + 1] << np.uint64(64 - shift)
        slots[slot] = value & mask
    return slots.T.reshape(-1)


def _words_to_bytes(words: np.ndarray) -> np.ndarray:
    return words.astype("<u8", copy=False).view(np.uint8)


def _as_bytes(payload) -> np.ndarray:
    return payload if isinstance(payload, np.ndarray) else np.frombuffer(payload, np.uint8)


def _check_fields(fields, n_fields: int | None = None) -> np.ndarray:
    fields = np.asarray(fields)
    if fields.ndim != 2 or fields.shape[1] < 2 or (n_fields and fields.shape[1] != n_fields):
        expected = "n_features + 1" if n_fields is None else str(n_fields)
        raise ValueError(f"fields must be (n_samples, {expected}), found {fields.shape}")
    return fields.astype(np.uint64, copy=False)


class StreamPacker:
    """Packs an epoch's samples into v2 beats chunk by chunk.

    :meth:`pack` returns the whole beats its samples complete and keeps the rest (less than
    ``lcm(field_width, W)`` bits) for the next call; :meth:`finish` returns the last beat,
    zero-padded.  The bytes do not depend on how the samples are split into calls.
    """

    def __init__(self, layout: StreamLayout, n_features: int):
        self.layout = layout
        self.n_fields = check_n_features(n_features) + 1
        self._slots = layout.sample_fields(n_features)
        fw = layout.field_width
        # Whole beats come out only at multiples of lcm(fw, W) bits: carry the fields after.
        self._step = math.lcm(fw, layout.bus_width) // fw
        self._carry = np.zeros(0, dtype=np.uint64)

    def pack(self, fields) -> np.ndarray:
        """Append samples (uint64 ``(k, n_features + 1)``, label first); returns uint8 bytes
        of the beats now complete (possibly none)."""
        fields = _check_fields(fields, self.n_fields)
        _check_field_values(fields, self.layout.field_width)
        if self._slots > self.n_fields:
            fields = np.pad(fields, ((0, 0), (0, self._slots - self.n_fields)))
        flat = np.concatenate([self._carry, fields.reshape(-1)])
        whole = flat.size - flat.size % self._step
        self._carry = flat[whole:].copy()
        return _words_to_bytes(_pack_words(flat[:whole], self.layout.field_width))

    def finish(self) -> np.ndarray:
        """The rest of the epoch: its last beats, the bits after the last field zero."""
        carry, self._carry = self._carry, np.zeros(0, dtype=np.uint64)
        beats = -(-carry.size * self.layout.field_width // self.layout.bus_width)
        out = np.zeros(beats * self.layout.beat_bytes, dtype=np.uint8)
        packed = _words_to_bytes(_pack_words(carry, self.layout.field_width))[:out.size]
        out[:packed.size] = packed
        return out


def pack_stream(fields, layout: StreamLayout) -> np.ndarray:
    """Pack an epoch's samples into v2 beats.

    Parameters
    ----------
    fields : uint64 array, shape ``(n_samples, n_features + 1)``
        Field values (label first), each below ``2**field_width``.
    layout : StreamLayout

    Returns
    -------
    uint8 array of ``layout.stream_bytes(n_features, n_samples)`` bytes.
    """
    fields = _check_fields(fields)
    packer = StreamPacker(layout, fields.shape[1] - 1)
    return np.concatenate([packer.pack(fields), packer.finish()])


class StreamUnpacker:
    """Reads the samples' fields back from a v2 epoch given chunk by chunk.

    :meth:`feed` takes the next bytes of the epoch (any whole number of 64-bit words: a whole
    number of beats is always one) and yields the samples they complete as uint64 arrays of
    ``max_samples`` rows (the epoch's last block may be shorter), carrying the rest, a partial
    sample included, to the next chunk.
    After the epoch's ``n_samples`` samples the rest is padding, not read as samples;
    :meth:`finish` checks that the epoch was whole.
    """

    def __init__(self, layout: StreamLayout, n_features: int, n_samples: int,
                 max_samples: int = 65536):
        self.layout = layout
        self.n_fields = check_n_features(n_features) + 1
        self._slots = layout.sample_fields(n_features)
        self.n_samples = _check_n_samples(n_samples)
        self.max_samples = max(1, int(max_samples))
        self.samples_read = 0
        self._bytes = 0
        self._epoch_bytes = layout.stream_bytes(n_features, n_samples)
        self._words = np.zeros(0, dtype=np.uint64)   # less than a word period
        self._fields = np.zeros(0, dtype=np.uint64)  # less than a block of samples

    def feed(self, chunk):
        raw = _as_bytes(chunk)
        if raw.size % 8:
            raise ValueError(f"a chunk of {raw.size} bytes is not a whole number of 64-bit "
                             "words")
        self._bytes += raw.size
        fw = self.layout.field_width
        _, period = _word_period(fw)
        # Unpack a bounded number of words at a time: fields take 64/fw times their bytes.
        step = max(1, self.max_samples * self._slots * fw // (64 * period) + 1) * period
        words = raw.view("<u8").astype(np.uint64, copy=False)
        for start in range(0, words.size, step):
            part = np.concatenate([self._words, words[start:start + step]])
            whole = part.size - part.size % period
            self._words = part[whole:].copy()
            yield from self._samples(_unpack_words(part[:whole], fw))
        if self._words.size and self._bytes >= self._epoch_bytes:
            # The epoch's last words end inside a word period: the rest of it is padding.
            last = np.zeros(period, dtype=np.uint64)
            last[:self._words.size] = self._words
            self._words = self._words[:0]
            yield from self._samples(_unpack_words(last, fw))

    def _samples(self, new: np.ndarray):
        remaining = (self.n_samples - self.samples_read) * self._slots
        pending = np.concatenate([self._fields, new[:max(0, remaining - self._fields.size)]])
        block = self.max_samples * self._slots
        # Full blocks only, but the epoch's last samples as soon as they are all here.
        while pending.size >= block or (pending.size and pending.size == remaining):
            rows = pending[:block].reshape(-1, self._slots)
            pending, remaining = pending[rows.size:], remaining - rows.size
            if self._slots > self.n_fields:
                bad = np.flatnonzero(rows[:, self.n_fields:].any(axis=1))
                if bad.size:
                    raise ValueError(f"sample {self.samples_read + int(bad[0])} has a nonzero "
                                     f"padding slot after its {self.n_fields} fields")
                rows = np.ascontiguousarray(rows[:, :self.n_fields])
            self.samples_read += rows.shape[0]
            yield rows
        self._fields = pending.copy()

    def finish(self) -> None:
        """Raise ValueError unless exactly the epoch's bytes were fed."""
        if self._bytes != self._epoch_bytes:
            raise ValueError(f"a v2 epoch of {self.n_samples} samples takes "
                             f"{self._epoch_bytes} bytes, found {self._bytes}")


def unpack_stream(payload, layout: StreamLayout, n_features: int, n_samples: int) -> np.ndarray:
    """Inverse of :func:`pack_stream`: the ``(n_samples, n_features + 1)`` uint64 fields of a
    v2 epoch.  The padding slots inside samples must be zero (ValueError); the bits after the
    last slot are not checked here (:func:`stream_padding_is_zero` does)."""
    unpacker = StreamUnpacker(layout, n_features, n_samples, max_samples=n_samples)
    raw = _as_bytes(payload)
    expected = layout.stream_bytes(n_features, n_samples)
    if raw.size != expected:
        raise ValueError(f"a v2 epoch of {n_samples} samples takes {expected} bytes, found "
                         f"{raw.size}")
    blocks = list(unpacker.feed(raw))
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def stream_padding_is_zero(payload, layout: StreamLayout, n_features: int,
                           n_samples: int) -> bool:
    """True when every bit of the v2 epoch ``payload`` after its last slot is zero (the
    padding slots inside samples are checked by :class:`StreamUnpacker`)."""
    raw = _as_bytes(payload)
    used = layout.stream_bits(n_features, n_samples)
    full, rest = divmod(used, 8)
    if raw.size != layout.stream_bytes(n_features, n_samples):
        raise ValueError(f"a v2 epoch of {n_samples} samples takes "
                         f"{layout.stream_bytes(n_features, n_samples)} bytes, found {raw.size}")
    tail = raw[full:]
    return not (tail.size and (int(tail[0]) >> rest or tail[1:].any()))


def restream_v1(chunks, layout: StreamLayout, n_features: int, n_samples: int,
                max_bytes: int = 16 << 20):
    """Convert a v2 epoch, given as byte chunks, into the v1 beats of the current engine.

    Yields uint8 chunks of whole v1 samples, each about ``max_bytes`` at most (at least one
    sample), so memory stays bounded whatever the sizes of the epoch and of its chunks.

    Raises
    ------
    ValueError
        If the chunks do not add up to the epoch's v2 bytes.
    """
    per_sample = max(layout.sample_bytes_v1(n_features), 8 * (n_features + 1))
    unpacker = StreamUnpacker(layout, n_features, n_samples,
                              max_samples=max(1, max_bytes // per_sample))
    for chunk in chunks:
        for fields in unpacker.feed(chunk):
            yield pack_beats_v1(fields, layout)
    unpacker.finish()


# -- beat layout v1 -------------------------------------------------------------------------

def _lane_slots(layout: StreamLayout):
    """For each lane of a v1 beat: (64-bit word index, bit shift, bits spilling into the next
    word)."""
    fw = layout.field_width
    for lane in range(layout.fields_per_beat):
        offset = lane * fw
        word, shift = divmod(offset, 64)
        yield lane, word, shift, max(0, shift + fw - 64)


def pack_beats_v1(fields: np.ndarray, layout: StreamLayout) -> np.ndarray:
    """Pack samples' fields into v1 beats (every sample on new beats).

    Parameters
    ----------
    fields : uint64 array, shape ``(n_samples, n_features + 1)``
        Field values (label first), each below ``2**field_width``.
    layout : StreamLayout

    Returns
    -------
    uint8 array, shape ``(n_samples * beats_per_sample * beat_bytes,)``
    """
    fields = _check_fields(fields)
    fw = layout.field_width
    _check_field_values(fields, fw)
    n_samples, n_fields = fields.shape
    per_beat = layout.fields_per_beat
    beats = layout.beats_per_sample(n_fields - 1)
    padded = np.zeros((n_samples, beats * per_beat), dtype=np.uint64)
    padded[:, :n_fields] = fields
    lanes = padded.reshape(n_samples * beats, per_beat)
    words = np.zeros((n_samples * beats, layout.bus_width // 64), dtype=np.uint64)
    for lane, word, shift, spill in _lane_slots(layout):
        words[:, word] |= lanes[:, lane] << np.uint64(shift)
        if spill:
            words[:, word + 1] |= lanes[:, lane] >> np.uint64(64 - shift)
    return _words_to_bytes(words).reshape(-1)


def unpack_beats_v1(payload, layout: StreamLayout, n_features: int) -> np.ndarray:
    """Inverse of :func:`pack_beats_v1`: the fields of every sample in ``payload``.

    ``payload`` (bytes-like or uint8 array) must hold a whole number of samples.  Returns a uint64
    array of shape ``(n_samples, n_features + 1)``.  Padding bits are not checked here (the engine
    ignores them too); :func:`padding_is_zero_v1` checks them.
    """
    raw = _as_bytes(payload)
    sample_bytes = layout.sample_bytes_v1(n_features)
    if raw.size % sample_bytes:
        raise ValueError(f"payload of {raw.size} bytes is not a whole number of "
                         f"{sample_bytes}-byte samples")
    words = raw.view("<u8").astype(np.uint64, copy=False).reshape(-1, layout.bus_width // 64)
    fw = layout.field_width
    mask = np.uint64((1 << fw) - 1)
    lanes = np.empty((words.shape[0], layout.fields_per_beat), dtype=np.uint64)
    for lane, word, shift, spill in _lane_slots(layout):
        value = words[:, word] >> np.uint64(shift)
        if spill:
            value |= words[:, word + 1] << np.uint64(64 - shift)
        lanes[:, lane] = value & mask
    n_samples = raw.size // sample_bytes
    return lanes.reshape(n_samples, -1)[:, : n_features + 1]


def padding_is_zero_v1(payload, layout: StreamLayout, n_features: int) -> bool:
    """True when every bit of the v1 ``payload`` outside the sample fields is zero."""
    fields = unpack_beats_v1(payload, layout, n_features)
    repacked = pack_beats_v1(fields, layout)
    return bool(np.array_equal(repacked, _as_bytes(payload)))


@dataclass(frozen=True)
class DecodedSamples:
    """What the engine's decoder produces for a block of samples (all int64 arrays).

    Members
    -------
    label : shape ``(n_samples,)``, ``label_frac`` fraction bits.
    first, second : shape ``(n_samples, n_features)``, ``feature_frac`` fraction bits: the two
        samples of every feature (equal for ``SINGLE`` and ``RAW32``).
    """

    label: np.ndarray
    first: np.ndarray
    second: np.ndarray
    label_frac: int
    feature_frac: int


def decode_fields(fields: np.ndarray, layout: StreamLayout, levels=None) -> DecodedSamples:
    """The engine's decoder stage applied to fields from :func:`unpack_stream`.

    ``levels``, if given, is a level table (:func:`check_levels`; ``DOUBLE`` and ``SINGLE``
    only): field ``j`` at level ``q`` decodes to ``levels[j][q]`` instead of the uniform word.
    """
    fields = np.asarray(fields, dtype=np.uint64)
    if layout.encoding is Encoding.RAW32:
        if levels is not None:
            raise ConfigError("a level table is for double and single streams, found raw32")
        words = fields.astype(np.uint32).view(np.int32).astype(np.int64)
        words = np.clip(words, -RAW_ONE, RAW_ONE)
        features = words[:, 1:]
        return DecodedSamples(words[:, 0].copy(), features, features, RAW_LABEL_FRAC,
                              RAW_FEATURE_FRAC)
    b = layout.bits
    index = (fields & np.uint64((1 << b) - 1)).astype(np.int64)
    level1 = index + ((fields >> np.uint64(b)) & np.uint64(1)).astype(np.int64)
    if layout.encoding is Encoding.DOUBLE:
        level2 = index + ((fields >> np.uint64(b + 1)) & np.uint64(1)).astype(np.int64)
    else:
        level2 = level1
    if levels is None:
        shift = QUANT_FEATURE_FRAC - b
        first = (2 * level1 - (1 << b)) << shift
        second = first if level2 is level1 else (2 * level2 - (1 << b)) << shift
    else:
        table = check_levels(levels, layout, fields.shape[1] - 1).astype(np.int64)
        column = np.arange(fields.shape[1])
        first = table[column, level1]
        second = first if level2 is level1 else table[column, level2]
    label = first[:, 0] + second[:, 0]
    return DecodedSamples(label, first[:, 1:], second[:, 1:], QUANT_LABEL_FRAC,
                          QUANT_FEATURE_FRAC)
