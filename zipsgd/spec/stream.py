"""The packed sample stream: the one definition of how samples become AXI4-Stream beats.

The host packer, the ``.zsgd`` file payload, the golden model's decoder, the hardware decoder and
the benches all use this module; ``docs/FORMAT.md`` shows it bit by bit.

A *sample* is ``n_features + 1`` *fields*: field 0 is the label, fields ``1..n`` the features.
Every field of a stream has the same width ``field_width`` (set by the encoding and bit width).
A *beat* of ``bus_width`` bits holds ``fields_per_beat = bus_width // field_width`` fields, field
``i`` of the beat at bits ``[i*field_width, (i+1)*field_width)``; the bits above the last field
are zero.  A sample starts on a new beat and takes ``beats_per_sample`` beats; the unused fields
of its last beat are zero and ``tlast`` is set on that beat.  Beats are stored little-endian:
byte ``k`` of a beat is ``tdata[8k+7:8k]``.

Field contents (``b`` = bits):

``DOUBLE``  ``b + 2`` bits: ``[b-1:0]`` interval index ``i``, ``[b]`` first sample bit ``s1``,
            ``[b+1]`` second sample bit ``s2``.  The two samples are the levels ``i + s1`` and
            ``i + s2`` of ``2**b`` equal intervals on [-1, 1].
``SINGLE``  ``b + 1`` bits: ``[b-1:0]`` interval index ``i``, ``[b]`` sample bit ``s``; both
            samples are the level ``i + s`` (the biased baseline).
``RAW32``   32 bits: a two's complement word with 30 fraction bits (the full-precision baseline).

Decoding (the engine's first stage, :func:`decode_fields`): a level ``q`` in ``0..2**b`` becomes
the feature word ``F = (2*q - 2**b) << (8 - b)`` with :data:`QUANT_FEATURE_FRAC` = 8 fraction
bits, so ``F / 256`` is the level's value in [-1, 1] for every ``b``.  A ``RAW32`` word is clamped
to ``[-2**30, 2**30]`` (the values [-1, 1]) and keeps :data:`RAW_FEATURE_FRAC` = 30 fraction bits.
The label word ``Y`` is ``F1 + F2`` with 9 fraction bits for ``DOUBLE`` (the mean of both samples,
still unbiased), ``2*F`` with 9 fraction bits for ``SINGLE`` and the clamped word with 30 fraction
bits for ``RAW32``.
"""

from __future__ import annotations

import enum
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
    "pack_fields",
    "unpack_fields",
    "padding_is_zero",
    "check_n_features",
    "decode_fields",
    "DecodedSamples",
]

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

    Raises
    ------
    ConfigError
        If a parameter is out of range.
    """

    encoding: Encoding
    bits: int
    bus_width: int = 64

    def __post_init__(self):
        object.__setattr__(self, "encoding", Encoding.parse(self.encoding))
        if self.bus_width not in BUS_WIDTHS:
            raise ConfigError(f"bus width must be one of {BUS_WIDTHS}, found {self.bus_width!r}")
        if self.encoding is Encoding.RAW32:
            if self.bits != 32:
                raise ConfigError(f"raw32 stores 32 bits per value, found bits={self.bits!r}")
        elif not isinstance(self.bits, int) or not 1 <= self.bits <= 8:
            raise ConfigError(f"bits must be an integer in 1..8, found {self.bits!r}")

    @classmethod
    def make(cls, encoding, bits, bus_width: int = 64) -> StreamLayout:
        """Like the constructor, but ``bits`` is ignored (set to 32) for ``raw32``."""
        encoding = Encoding.parse(encoding)
        return cls(encoding, 32 if encoding is Encoding.RAW32 else bits, bus_width)

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

    def beats_per_sample(self, n_features: int) -> int:
        """Beats one sample of ``n_features`` features (plus its label field) takes."""
        check_n_features(n_features)
        return -(-(n_features + 1) // self.fields_per_beat)

    def slice_map(self, n_features: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
        """Where an engine of ``lanes`` lanes handles each field of a sample.

        Each beat is issued as slices of at most ``lanes`` fields (``ceil(per_beat/lanes)``
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
        """Cycles an engine of ``lanes`` lanes takes to issue one sample (:meth:`slice_map`);
        equals :meth:`beats_per_sample` when ``lanes >= fields_per_beat``."""
        return int(self.slice_map(n_features, lanes)[0][-1]) + 1

    def sample_bytes(self, n_features: int) -> int:
        return self.beats_per_sample(n_features) * self.beat_bytes

    def stored_bits_per_value(self, n_features: int) -> float:
        """Bits streamed per feature value, counting the label and the padding."""
        return self.beats_per_sample(n_features) * self.bus_width / n_features

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


def _lane_slots(layout: StreamLayout):
    """For each lane of a beat: (64-bit word index, bit shift, bits spilling into the next word)."""
    fw = layout.field_width
    for lane in range(layout.fields_per_beat):
        offset = lane * fw
        word, shift = divmod(offset, 64)
        yield lane, word, shift, max(0, shift + fw - 64)


def pack_fields(fields: np.ndarray, layout: StreamLayout) -> np.ndarray:
    """Pack samples' fields into beats.

    Parameters
    ----------
    fields : uint64 array, shape ``(n_samples, n_features + 1)``
        Field values (label first), each below ``2**field_width``.
    layout : StreamLayout

    Returns
    -------
    uint8 array, shape ``(n_samples * beats_per_sample * beat_bytes,)``
    """
    fields = np.asarray(fields)
    if fields.ndim != 2 or fields.shape[1] < 2:
        raise ValueError(f"fields must be (n_samples, n_features + 1), found {fields.shape}")
    fields = fields.astype(np.uint64, copy=False)
    fw = layout.field_width
    if fields.size and int(fields.max()) >> fw:
        raise ValueError(f"a field value does not fit in {fw} bits")
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
    return words.astype("<u8", copy=False).view(np.uint8).reshape(-1)


def unpack_fields(payload, layout: StreamLayout, n_features: int) -> np.ndarray:
    """Inverse of :func:`pack_fields`: the fields of every sample in ``payload``.

    ``payload`` (bytes-like or uint8 array) must hold a whole number of samples.  Returns a uint64
    array of shape ``(n_samples, n_features + 1)``.  Padding bits are not checked here (the engine
    ignores them too); :func:`padding_is_zero` checks them.
    """
    raw = np.frombuffer(payload, dtype=np.uint8) if not isinstance(payload, np.ndarray) else payload
    sample_bytes = layout.sample_bytes(n_features)
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


def padding_is_zero(payload, layout: StreamLayout, n_features: int) -> bool:
    """True when every bit of ``payload`` outside the sample fields is zero."""
    fields = unpack_fields(payload, layout, n_features)
    repacked = pack_fields(fields, layout)
    return bool(np.array_equal(repacked, np.frombuffer(payload, dtype=np.uint8)))


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


def decode_fields(fields: np.ndarray, layout: StreamLayout) -> DecodedSamples:
    """The engine's decoder stage applied to fields from :func:`unpack_fields`."""
    fields = np.asarray(fields, dtype=np.uint64)
    if layout.encoding is Encoding.RAW32:
        words = fields.astype(np.uint32).view(np.int32).astype(np.int64)
        words = np.clip(words, -RAW_ONE, RAW_ONE)
        features = words[:, 1:]
        return DecodedSamples(words[:, 0].copy(), features, features, RAW_LABEL_FRAC,
                              RAW_FEATURE_FRAC)
    b = layout.bits
    index = (fields & np.uint64((1 << b) - 1)).astype(np.int64)
    bit1 = ((fields >> np.uint64(b)) & np.uint64(1)).astype(np.int64)
    shift = QUANT_FEATURE_FRAC - b
    first = (2 * (index + bit1) - (1 << b)) << shift
    if layout.encoding is Encoding.DOUBLE:
        bit2 = ((fields >> np.uint64(b + 1)) & np.uint64(1)).astype(np.int64)
        second = (2 * (index + bit2) - (1 << b)) << shift
    else:
        second = first
    label = first[:, 0] + second[:, 0]
    return DecodedSamples(label, first[:, 1:], second[:, 1:], QUANT_LABEL_FRAC,
                          QUANT_FEATURE_FRAC)
