"""The packed sample stream (:mod:`zipsgd.spec.stream`) against independent references.

The reference packer builds every beat as one Python integer (field ``i`` of the beat at bits
``[i*fw, (i+1)*fw)``) and writes it little-endian; the reference decoder computes level values
with :class:`fractions.Fraction` (value = -1 + 2q/2^b, F = 256 * value exactly).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from zipsgd.spec.errors import ConfigError
from zipsgd.spec.stream import (
    BUS_WIDTHS,
    MAX_FEATURES,
    QUANT_FEATURE_FRAC,
    QUANT_LABEL_FRAC,
    RAW_FEATURE_FRAC,
    RAW_LABEL_FRAC,
    RAW_ONE,
    Encoding,
    StreamLayout,
    check_n_features,
    decode_fields,
    pack_beats_v1,
    padding_is_zero_v1,
    unpack_beats_v1,
)

LAYOUTS = ([(Encoding.DOUBLE, b) for b in range(1, 9)] + [(Encoding.SINGLE, b) for b in range(1, 9)]
           + [(Encoding.RAW32, 32)])
LAYOUT_IDS = [f"{e.name.lower()}{b}" for e, b in LAYOUTS]


def field_width(encoding: Encoding, bits: int) -> int:
    return {Encoding.DOUBLE: bits + 2, Encoding.SINGLE: bits + 1, Encoding.RAW32: 32}[encoding]


def ref_pack(fields: np.ndarray, fw: int, bus_width: int) -> bytes:
    """Independent packer: one Python int per beat, fields LSB first, little-endian bytes."""
    per_beat = bus_width // fw
    out = bytearray()
    for sample in fields.tolist():
        for start in range(0, len(sample), per_beat):
            beat = 0
            for lane, value in enumerate(sample[start:start + per_beat]):
                beat |= value << (lane * fw)
            out += beat.to_bytes(bus_width // 8, "little")
    return bytes(out)


def feature_counts(per_beat: int) -> list[int]:
    return sorted({n for n in (1, per_beat - 1, per_beat, per_beat + 1, 300) if n >= 1})


CASES = [(enc, bits, width, n) for enc, bits in LAYOUTS for width in BUS_WIDTHS
         for n in feature_counts(width // field_width(enc, bits))]


@pytest.mark.parametrize("encoding, bits, width, n", CASES,
                         ids=[f"{e.name.lower()}{b}-W{w}-n{n}" for e, b, w, n in CASES])
def test_pack_unpack_round_trip(encoding, bits, width, n):
    layout = StreamLayout(encoding, bits, width)
    fw = field_width(encoding, bits)
    per_beat = width // fw
    assert layout.field_width == fw and layout.fields_per_beat == per_beat
    beats = -(-(n + 1) // per_beat)
    assert layout.beats_per_sample(n) == beats
    assert layout.sample_bytes_v1(n) == beats * width // 8
    rng = np.random.default_rng([int(encoding), bits, width, n])
    n_samples = 3
    fields = rng.integers(0, 1 << fw, size=(n_samples, n + 1), dtype=np.uint64)
    fields[0, :] = (1 << fw) - 1  # all ones: catches bits leaking into padding or neighbours
    payload = pack_beats_v1(fields, layout)
    assert payload.dtype == np.uint8
    assert payload.shape == (n_samples * beats * width // 8,)
    assert payload.tobytes() == ref_pack(fields, fw, width)
    np.testing.assert_array_equal(unpack_beats_v1(payload, layout, n), fields)
    np.testing.assert_array_equal(unpack_beats_v1(payload.tobytes(), layout, n), fields)
    assert padding_is_zero_v1(payload, layout, n)


@pytest.mark.parametrize("encoding, bits", LAYOUTS, ids=LAYOUT_IDS)
def test_padding_bits_are_zero_and_checked(encoding, bits):
    """Every bit outside a field is zero after packing; setting any one of them is detected by
    padding_is_zero_v1 and ignored by unpack_beats_v1."""
    width = 128
    layout = StreamLayout(encoding, bits, width)
    fw, per_beat = layout.field_width, layout.fields_per_beat
    n = per_beat + 1  # second beat is mostly padding (fields 0..1 used)
    fields = np.full((1, n + 1), (1 << fw) - 1, dtype=np.uint64)
    payload = pack_beats_v1(fields, layout)
    beats = [int.from_bytes(payload[k * 16:(k + 1) * 16].tobytes(), "little") for k in range(2)]
    used = [per_beat * fw, (n + 1 - per_beat) * fw]
    for beat, bits_used in zip(beats, used, strict=True):
        assert beat == (1 << bits_used) - 1  # every used bit set, every padding bit clear
    for k, bits_used in enumerate(used):
        for bit in range(bits_used, width):
            corrupt = payload.copy()
            corrupt[k * 16 + bit // 8] |= np.uint8(1 << (bit % 8))
            assert not padding_is_zero_v1(corrupt, layout, n)
            np.testing.assert_array_equal(unpack_beats_v1(corrupt, layout, n), fields)


def test_hand_worked_beat_double4_w64():
    """double, b = 4, W = 64: 6-bit fields [i(4) | s1 | s2], 10 fields per beat (bits 0..59),
    bits 60..63 padding.  A sample of label + 3 features fits one beat:

    field 0 (label): i=9,  s1=1, s2=0 -> 0b01_1001 = 25  at bits [5:0]
    field 1:         i=0,  s1=0, s2=1 -> 0b10_0000 = 32  at bits [11:6]
    field 2:         i=15, s1=1, s2=1 -> 0b11_1111 = 63  at bits [17:12]
    field 3:         i=5,  s1=0, s2=0 -> 0b00_0101 = 5   at bits [23:18]

    beat = 0b000101_111111_100000_011001 = 0x17F819, little-endian bytes 19 f8 17 00 00 00 00 00.
    """
    layout = StreamLayout(Encoding.DOUBLE, 4, 64)
    fields = np.array([[25, 32, 63, 5]], dtype=np.uint64)
    payload = pack_beats_v1(fields, layout)
    assert payload.tobytes() == bytes([0x19, 0xF8, 0x17, 0, 0, 0, 0, 0])
    assert 25 | 32 << 6 | 63 << 12 | 5 << 18 == 0x17F819
    decoded = decode_fields(unpack_beats_v1(payload, layout, 3), layout)
    # F = (2*(i+s) - 16) << 4 with 8 fraction bits:
    #   label: levels 10 and 9 -> F1 = 64 (0.25), F2 = 32 (0.125); Y = 96 / 2**9 = 0.1875
    #   f1: levels 0 and 1 -> -256 (-1.0), -224 (-0.875); f2: 16, 16 -> 256, 256 (+1.0);
    #   f3: 5, 5 -> -96, -96 (-0.375)
    np.testing.assert_array_equal(decoded.label, [96])
    np.testing.assert_array_equal(decoded.first, [[-256, 256, -96]])
    np.testing.assert_array_equal(decoded.second, [[-224, 256, -96]])
    assert (decoded.label_frac, decoded.feature_frac) == (9, 8)


def test_hand_worked_spill_across_64bit_words():
    """double b=8 (10-bit fields), W=128: field 6 sits at bits [69:60] and straddles the two
    64-bit words; byte 7 holds its low 4 bits in its high nibble."""
    layout = StreamLayout(Encoding.DOUBLE, 8, 128)
    fields = np.zeros((1, 12), dtype=np.uint64)  # 12 fields per beat: bits 0..119
    fields[0, 6] = 0b11_0101_1011
    payload = pack_beats_v1(fields, layout).tobytes()
    assert int.from_bytes(payload, "little") == 0b11_0101_1011 << 60
    assert payload[7] == 0xB0 and payload[8] == 0x35 and len(payload) == 16


def ref_level_word(q: int, bits: int) -> int:
    """F = 256 * (-1 + 2q / 2**b), exact."""
    value = -1 + Fraction(2 * q, 1 << bits)
    word = value * (1 << QUANT_FEATURE_FRAC)
    assert word.denominator == 1
    return int(word)


@pytest.mark.parametrize("encoding, bits", LAYOUTS[:-1], ids=LAYOUT_IDS[:-1])
def test_decode_quantized_against_fraction_reference(encoding, bits):
    """Every field value of the layout, as a label and as a feature."""
    layout = StreamLayout(encoding, bits, 64)
    fw = layout.field_width
    every = np.arange(1 << fw, dtype=np.uint64)
    fields = np.column_stack([every, every])  # label column and one feature column
    decoded = decode_fields(fields, layout)
    mask = (1 << bits) - 1
    f1, f2, y = [], [], []
    for f in every.tolist():
        index, s1 = f & mask, (f >> bits) & 1
        s2 = (f >> (bits + 1)) & 1 if encoding is Encoding.DOUBLE else s1
        w1, w2 = ref_level_word(index + s1, bits), ref_level_word(index + s2, bits)
        assert -256 <= w1 <= 256 and -256 <= w2 <= 256
        f1.append(w1)
        f2.append(w2)
        # label: mean of the two level values, with 9 fraction bits, exact
        label = (Fraction(w1, 256) + Fraction(w2, 256)) / 2 * (1 << QUANT_LABEL_FRAC)
        assert label.denominator == 1
        y.append(int(label))
    np.testing.assert_array_equal(decoded.first[:, 0], f1)
    np.testing.assert_array_equal(decoded.second[:, 0], f2)
    np.testing.assert_array_equal(decoded.label, y)
    assert decoded.first.dtype == np.int64 and decoded.label.dtype == np.int64
    assert (decoded.label_frac, decoded.feature_frac) == (QUANT_LABEL_FRAC, QUANT_FEATURE_FRAC)


def test_decode_raw32_clamps():
    layout = StreamLayout(Encoding.RAW32, 32, 64)
    words = [0, 1, RAW_ONE, RAW_ONE + 1, 0x7FFF_FFFF, -RAW_ONE, -RAW_ONE - 1, -(1 << 31), -1,
             123456789, -987654321]
    expected = [min(max(w, -RAW_ONE), RAW_ONE) for w in words]
    assert expected[3] == RAW_ONE and expected[8] == -1 and expected[7] == -RAW_ONE
    unsigned = np.array([w & 0xFFFF_FFFF for w in words], dtype=np.uint64)
    fields = np.column_stack([unsigned, unsigned, unsigned[::-1]])
    decoded = decode_fields(fields, layout)
    np.testing.assert_array_equal(decoded.label, expected)
    np.testing.assert_array_equal(decoded.first[:, 0], expected)
    np.testing.assert_array_equal(decoded.first[:, 1], expected[::-1])
    np.testing.assert_array_equal(decoded.second, decoded.first)
    assert (decoded.label_frac, decoded.feature_frac) == (RAW_LABEL_FRAC, RAW_FEATURE_FRAC)
    # and through a packed stream
    payload = pack_beats_v1(fields, layout)
    again = decode_fields(unpack_beats_v1(payload, layout, 2), layout)
    np.testing.assert_array_equal(again.first, decoded.first)


def test_layout_parameters_and_errors():
    assert StreamLayout("double", 3).bus_width == 64
    assert StreamLayout.make("raw32", 4, 128).bits == 32
    assert StreamLayout.make(Encoding.SINGLE, 4, 256) == StreamLayout(Encoding.SINGLE, 4, 256)
    assert StreamLayout(Encoding.DOUBLE, 4, 64).levels == 16
    assert StreamLayout(Encoding.RAW32, 32, 64).levels == 0
    double = Encoding.DOUBLE
    bad = [{"encoding": "quad", "bits": 4}, {"encoding": double, "bits": 0},
           {"encoding": double, "bits": 9}, {"encoding": Encoding.SINGLE, "bits": 4.0},
           {"encoding": Encoding.RAW32, "bits": 16}, {"encoding": double, "bits": 4,
                                                      "bus_width": 32},
           {"encoding": double, "bits": 4, "bus_width": 1024},
           {"encoding": double, "bits": 4, "bus_width": 96}]
    for kwargs in bad:
        with pytest.raises(ConfigError, match="found"):
            StreamLayout(**kwargs)
    layout = StreamLayout(Encoding.DOUBLE, 4, 64)
    for n in (0, -1, MAX_FEATURES + 1, 2.0, "3"):
        with pytest.raises(ConfigError, match="feature count"):
            layout.beats_per_sample(n)
        with pytest.raises(ConfigError):
            check_n_features(n)
    assert check_n_features(np.int64(MAX_FEATURES)) == MAX_FEATURES
    assert layout.beats_per_sample(MAX_FEATURES) == -(-(MAX_FEATURES + 1) // 10)


def test_pack_unpack_reject_bad_shapes():
    layout = StreamLayout(Encoding.DOUBLE, 2, 64)  # 4-bit fields
    with pytest.raises(ValueError, match="fit in 4 bits"):
        pack_beats_v1(np.array([[0, 16]], dtype=np.uint64), layout)
    with pytest.raises(ValueError):
        pack_beats_v1(np.array([1, 2, 3], dtype=np.uint64), layout)
    with pytest.raises(ValueError, match="whole number"):
        unpack_beats_v1(np.zeros(12, dtype=np.uint8), layout, 3)


def _walk_slices(n_features: int, per_beat: int, lanes: int) -> list[tuple[int, int]]:
    """The slice walk of the hardware (``_Slicer`` in ``zipsgd/hw/core.py``) step by step: the
    ``(f0, fields)`` of every slice of one sample."""
    slices, beat_f0, index = [], 0, 0
    while True:
        f0 = beat_f0 + index * lanes
        slices.append((f0, min(lanes, per_beat - index * lanes)))
        slice_last = per_beat - index * lanes <= lanes or f0 + lanes > n_features
        if slice_last:
            if beat_f0 + per_beat > n_features:
                return slices
            beat_f0, index = beat_f0 + per_beat, 0
        else:
            index += 1


@pytest.mark.parametrize("bus_width", BUS_WIDTHS)
def test_slice_map_follows_the_hardware_walk(bus_width):
    for encoding, bits in (("double", 1), ("double", 3), ("single", 1), ("single", 6),
                           ("raw32", 32)):
        layout = StreamLayout.make(encoding, bits, bus_width)
        for lanes in (2, 4, 8, bus_width // 2):
            for n in (1, 2, lanes - 1, lanes, lanes + 1, layout.fields_per_beat,
                      layout.fields_per_beat + 1, 3 * layout.fields_per_beat - 1, 100):
                if n < 1:
                    continue
                walk = _walk_slices(n, layout.fields_per_beat, lanes)
                slice_of, lane_of = layout.slice_map(n, lanes)
                expected_slice, expected_lane = [], []
                for s, (f0, count) in enumerate(walk):
                    for i in range(count):
                        if f0 + i <= n:
                            expected_slice.append(s)
                            expected_lane.append(i)
                assert slice_of.tolist() == expected_slice
                assert lane_of.tolist() == expected_lane
                assert layout.slices_per_sample(n, lanes) == len(walk)
                if lanes >= layout.fields_per_beat:
                    assert len(walk) == layout.beats_per_sample(n)
