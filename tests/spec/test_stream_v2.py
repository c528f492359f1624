"""Stream format v2 (:mod:`zipsgd.spec.stream`: samples back to back) and level tables, against
independent references.

The reference packer builds the whole epoch as one Python integer (field ``f`` at bits
``[f*fw, (f+1)*fw)``) and cuts it into little-endian beats; nothing of the module's own
arithmetic is reused.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from zipsgd.host.datasets import open_source
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.stream import (
    BUS_WIDTHS,
    GROUP_LIMIT,
    LEVEL_ONE,
    TABLE_GROUP_LIMIT,
    Encoding,
    StreamLayout,
    StreamPacker,
    StreamUnpacker,
    check_levels,
    decode_fields,
    pack_beats_v1,
    pack_stream,
    per_feature_levels,
    restream_v1,
    sample_fields,
    stream_padding_is_zero,
    uniform_levels,
    unpack_stream,
)

LAYOUTS = ([(Encoding.DOUBLE, b) for b in range(1, 9)] + [(Encoding.SINGLE, b) for b in range(1, 9)]
           + [(Encoding.RAW32, 32)])
LAYOUT_IDS = [f"{e.name.lower()}{b}" for e, b in LAYOUTS]


def ref_pack(fields: np.ndarray, fw: int, bus_width: int) -> bytes:
    """Independent packer: the epoch as one integer, fields LSB first, cut into beats."""
    stream = 0
    for f, value in enumerate(fields.reshape(-1).tolist()):
        stream |= value << (f * fw)
    beats = -(-fields.size * fw // bus_width)
    return stream.to_bytes(beats * bus_width // 8, "little")


def random_fields(rng, layout: StreamLayout, n: int, k: int) -> np.ndarray:
    fields = rng.integers(0, 1 << layout.field_width, (k, n + 1), dtype=np.uint64)
    fields[0] = (1 << layout.field_width) - 1  # all ones: catches bits leaking into neighbours
    return fields


CASES = [(enc, bits, width, n, k) for enc, bits in LAYOUTS for width in BUS_WIDTHS
         for n in (1, 2, 11, 100) for k in (1, 2, 3, 4, 5)]


@pytest.mark.parametrize("encoding, bits, width, n, k", CASES,
                         ids=[f"{e.name.lower()}{b}-W{w}-n{n}-K{k}" for e, b, w, n, k in CASES])
def test_round_trip_against_reference(encoding, bits, width, n, k):
    layout = StreamLayout(encoding, bits, width)
    fields = random_fields(np.random.default_rng([int(encoding), bits, width, n, k]), layout, n,
                           k)
    payload = pack_stream(fields, layout)
    assert payload.dtype == np.uint8
    beats = math.ceil(k * (n + 1) * layout.field_width / width)
    assert layout.stream_beats(n, k) == beats
    assert payload.size == layout.stream_bytes(n, k) == beats * width // 8
    assert payload.tobytes() == ref_pack(fields, layout.field_width, width)
    np.testing.assert_array_equal(unpack_stream(payload, layout, n, k), fields)
    np.testing.assert_array_equal(unpack_stream(payload.tobytes(), layout, n, k), fields)
    assert stream_padding_is_zero(payload, layout, n, k)
    assert layout.bits_per_value(n, k) == beats * width / (k * n)


@pytest.mark.parametrize("encoding, bits", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", BUS_WIDTHS)
def test_random_shapes_and_chunking(encoding, bits, width):
    """Random n and K; the chunked packer gives the same bytes for any split of the samples,
    and the chunked unpacker the same fields for any split of the bytes into whole beats."""
    layout = StreamLayout(encoding, bits, width)
    rng = np.random.default_rng([int(encoding), bits, width])
    for _ in range(4):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 200))
        fields = random_fields(rng, layout, n, k)
        whole = pack_stream(fields, layout)
        assert whole.tobytes() == ref_pack(fields, layout.field_width, width)
        packer, parts, start = StreamPacker(layout, n), [], 0
        while start < k:
            stop = start + int(rng.integers(0, 9))  # empty chunks too
            parts.append(packer.pack(fields[start:stop]))
            start = stop
        parts.append(packer.finish())
        assert all(part.size % layout.beat_bytes == 0 for part in parts)
        np.testing.assert_array_equal(np.concatenate(parts), whole)
        beats = whole.size // layout.beat_bytes
        cuts = np.sort(rng.integers(0, beats + 1, 4)) * layout.beat_bytes
        bounds = [0, *cuts.tolist(), whole.size]
        unpacker = StreamUnpacker(layout, n, k, max_samples=int(rng.integers(1, 7)))
        blocks = [b for lo, hi in zip(bounds, bounds[1:], strict=False)
                  for b in unpacker.feed(whole[lo:hi])]
        unpacker.finish()
        assert all(b.shape[0] == unpacker.max_samples for b in blocks[:-1])
        np.testing.assert_array_equal(np.concatenate(blocks), fields)


def test_chunking_never_changes_the_bytes_large():
    """A few MB in uneven chunks, every field width's longest carry included."""
    for encoding, bits in ((Encoding.DOUBLE, 7), (Encoding.SINGLE, 1), (Encoding.RAW32, 32)):
        layout = StreamLayout(encoding, bits, 512)
        rng = np.random.default_rng(bits)
        fields = rng.integers(0, 1 << layout.field_width, (20011, 37), dtype=np.uint64)
        packer = StreamPacker(layout, 36)
        cuts = [0, 1, 2, 997, 5003, 5004, 12000, 20011]
        chunked = np.concatenate([packer.pack(fields[a:b]) for a, b in zip(cuts, cuts[1:],
                                                                           strict=False)]
                                 + [packer.finish()])
        np.testing.assert_array_equal(chunked, pack_stream(fields, layout))


def test_fields_cross_beats_and_64bit_words_by_hand():
    """double b = 8 (10-bit fields), W = 64: field 6 is stream bits [69:60], so beat 0 holds its
    low 4 bits at [63:60] and beat 1 its high 6 bits at [5:0]; with W = 128 the same field
    crosses the two 64-bit words of one beat.  A second sample (n = 3) starts at bit 40."""
    value = 0b11_0101_1011
    fields = np.zeros((2, 4), dtype=np.uint64)
    fields[1, 2] = value  # field 6 of the stream
    for width in (64, 128):
        layout = StreamLayout(Encoding.DOUBLE, 8, width)
        payload = pack_stream(fields, layout).tobytes()
        assert int.from_bytes(payload, "little") == value << 60
        assert payload[7] == 0xB0 and payload[8] == 0x35
        assert len(payload) == 16  # 80 bits: two 64-bit beats or one 128-bit beat
        np.testing.assert_array_equal(unpack_stream(payload, layout, 3, 2), fields)


def test_padding_is_zero_and_checked():
    layout = StreamLayout(Encoding.DOUBLE, 3, 128)  # 5-bit fields
    n, k = 4, 3  # 75 bits: 53 padding bits in the only beat
    fields = np.full((k, n + 1), 31, dtype=np.uint64)
    payload = pack_stream(fields, layout)
    assert int.from_bytes(payload.tobytes(), "little") == (1 << 75) - 1
    for bit in range(75, 128):
        corrupt = payload.copy()
        corrupt[bit // 8] |= np.uint8(1 << (bit % 8))
        assert not stream_padding_is_zero(corrupt, layout, n, k)
        np.testing.assert_array_equal(unpack_stream(corrupt, layout, n, k), fields)


def test_sizes_and_errors():
    layout = StreamLayout(Encoding.DOUBLE, 2, 64)
    with pytest.raises(ValueError, match="fit in 4 bits"):
        pack_stream(np.array([[0, 16]], dtype=np.uint64), layout)
    with pytest.raises(ValueError, match="n_features"):
        pack_stream(np.array([1, 2, 3], dtype=np.uint64), layout)
    with pytest.raises(ValueError, match=r"\(n_samples, 4\)"):
        StreamPacker(layout, 3).pack(np.zeros((2, 5), dtype=np.uint64))
    with pytest.raises(ValueError, match="takes 8 bytes, found 16"):
        unpack_stream(np.zeros(16, dtype=np.uint8), layout, 3, 2)
    with pytest.raises(ValueError, match="64-bit words"):
        list(StreamUnpacker(layout, 3, 2).feed(np.zeros(4, dtype=np.uint8)))
    unpacker = StreamUnpacker(layout, 3, 5)
    list(unpacker.feed(np.zeros(8, dtype=np.uint8)))
    with pytest.raises(ValueError, match="takes 16 bytes, found 8"):
        unpacker.finish()
    for k in (0, -1, 2.0, True):
        with pytest.raises(ConfigError, match="sample count"):
            layout.stream_beats(3, k)


# -- bits per value --------------------------------------------------------------------------

def min_samples(layout: StreamLayout, n: int) -> int:
    """The K from which the final padding costs under 0.5 %: K (n+1) fw >= 200 W (with a long
    sample's padding slots, under 1/512 of its fields, under 1 % in all)."""
    return math.ceil(200 * layout.bus_width / ((n + 1) * layout.field_width))


@pytest.mark.parametrize("encoding, bits", LAYOUTS, ids=LAYOUT_IDS)
def test_bits_per_value_within_one_percent_of_the_limit(encoding, bits):
    """For every n >= 1 at every W: within 1 % of fw (n+1)/n once K >= 200 W / ((n+1) fw)
    (checked at that K and at K = 25600, which is that bound's largest value, for n = 1..3000
    and for larger n up to the format's limit; the final padding is W / (K (n+1) fw) at most
    and a long sample's padding under 1/256 of its fields)."""
    for width in BUS_WIDTHS:
        layout = StreamLayout(encoding, bits, width)
        ns = [*range(1, 3001), 4095, 65535, 1 << 20, (1 << 24) - 1]
        for n in ns:
            limit = layout.field_width * (n + 1) / n
            for k in (min_samples(layout, n), 25600):
                value = layout.bits_per_value(n, k)
                assert limit <= value <= 1.01 * limit, (width, n, k, value, limit)
        assert max(min_samples(layout, n) for n in ns) <= 25600


@pytest.mark.parametrize("bits", range(1, 9))
def test_sklearn_diabetes_at_w512(bits):
    """sklearn:diabetes (442 samples, 10 features) at W = 512: an epoch of double b moves
    at least 0.9 x 32/(b+2) times fewer bytes than raw32 (v1 moved the same: one beat a
    sample).  442 samples are too few for the 1 % bound at every b (that needs
    K >= 100 W / (11 (b+2))), so bits per value is checked against its exact bound
    (b+2) 11/10 (1 + W / (K 11 (b+2)))."""
    source = open_source("sklearn:diabetes")
    n, k = source.n_features, source.n_samples
    double = StreamLayout(Encoding.DOUBLE, bits, 512)
    raw = StreamLayout(Encoding.RAW32, 32, 512)
    ratio = raw.stream_bytes(n, k) / double.stream_bytes(n, k)
    assert ratio >= 0.9 * 32 / (bits + 2), ratio
    fw = bits + 2
    assert double.bits_per_value(n, k) <= fw * (n + 1) / n * (1 + 512 / (k * (n + 1) * fw))
    assert raw.sample_bytes_v1(n) == double.sample_bytes_v1(n)  # v1: 1.00x at every b


# -- conversion to the v1 beats of the current engine ----------------------------------------

@pytest.mark.parametrize("encoding, bits", [(Encoding.DOUBLE, 1), (Encoding.SINGLE, 5),
                                            (Encoding.RAW32, 32)])
@pytest.mark.parametrize("width", BUS_WIDTHS)
def test_restream_v1_is_the_v1_packing(encoding, bits, width):
    layout = StreamLayout(encoding, bits, width)
    rng = np.random.default_rng([bits, width])
    for n, k in ((1, 1), (2, 7), (11, 300), (100, 33)):
        fields = random_fields(rng, layout, n, k)
        payload = pack_stream(fields, layout)
        beats = payload.size // layout.beat_bytes
        cut = int(rng.integers(0, beats + 1)) * layout.beat_bytes
        for max_bytes in (1, 1000, 1 << 24):
            out = list(restream_v1([payload[:cut], payload[cut:]], layout, n, k, max_bytes))
            np.testing.assert_array_equal(np.concatenate(out), pack_beats_v1(fields, layout))
            per_sample = max(layout.sample_bytes_v1(n), 8 * (n + 1))
            assert all(c.size <= max(max_bytes, per_sample) for c in out)
    with pytest.raises(ValueError, match="takes"):
        list(restream_v1([payload[:-layout.beat_bytes]], layout, 100, 33))


# -- level tables -----------------------------------------------------------------------------

def random_levels(rng, bits: int, n: int) -> np.ndarray:
    size = (1 << bits) + 1
    inner = [np.sort(rng.choice(np.arange(-255, 256), size - 2, replace=False))
             for _ in range(n + 1)]
    return np.array([[-LEVEL_ONE, *row, LEVEL_ONE] for row in inner], dtype=np.int16)


@pytest.mark.parametrize("encoding", [Encoding.DOUBLE, Encoding.SINGLE])
@pytest.mark.parametrize("bits", range(1, 9))
def test_uniform_table_decodes_exactly_as_no_table(encoding, bits):
    layout = StreamLayout(encoding, bits, 64)
    every = np.arange(1 << layout.field_width, dtype=np.uint64)
    fields = np.column_stack([every, every[::-1], every])
    plain = decode_fields(fields, layout)
    table = decode_fields(fields, layout, uniform_levels(bits, 2))
    for name in ("label", "first", "second"):
        np.testing.assert_array_equal(getattr(table, name), getattr(plain, name))
    assert (table.label_frac, table.feature_frac) == (plain.label_frac, plain.feature_frac)


@pytest.mark.parametrize("encoding", [Encoding.DOUBLE, Encoding.SINGLE])
@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_a_table_decodes_each_field_by_its_row(encoding, bits):
    layout = StreamLayout(encoding, bits, 64)
    rng = np.random.default_rng(bits)
    n = 3
    levels = random_levels(rng, bits, n)
    fields = rng.integers(0, 1 << layout.field_width, (50, n + 1), dtype=np.uint64)
    decoded = decode_fields(fields, layout, levels)
    for s in range(50):
        for j in range(n + 1):
            f = int(fields[s, j])
            index, s1 = f & ((1 << bits) - 1), (f >> bits) & 1
            s2 = f >> (bits + 1) if encoding is Encoding.DOUBLE else s1
            w1, w2 = int(levels[j, index + s1]), int(levels[j, index + s2])
            if j == 0:
                assert decoded.label[s] == w1 + w2
            else:
                assert (decoded.first[s, j - 1], decoded.second[s, j - 1]) == (w1, w2)


def test_check_levels_names_the_row_and_entry():
    layout = StreamLayout(Encoding.SINGLE, 2, 64)
    good = uniform_levels(2, 2)
    assert good.dtype == np.int16 and good.shape == (3, 5)
    np.testing.assert_array_equal(good[1], [-256, -128, 0, 128, 256])
    np.testing.assert_array_equal(check_levels(good.astype(np.int64), layout, 2), good)
    for row, entry, value, rule in ((0, 0, -200, "first entry -256"),
                                    (1, 4, 255, "last entry 256"),
                                    (2, 2, -300, "entries in -256..256"),
                                    (2, 2, -128, "strictly increasing")):
        table = good.astype(np.int64)
        table[row, entry] = value
        name = "label" if row == 0 else f"feature {row}"
        with pytest.raises(ConfigError,
                           match=rf"row {row} \({name}\), entry {entry}: expected {rule}"):
            check_levels(table, layout, 2)
    with pytest.raises(ConfigError, match="shape"):
        check_levels(good[:, :4], layout, 2)
    with pytest.raises(ConfigError, match="integer"):
        check_levels(good.astype(float), layout, 2)
    with pytest.raises(ConfigError, match="raw32"):
        check_levels(good, StreamLayout(Encoding.RAW32, 32, 64), 2)
    with pytest.raises(ConfigError, match="raw32"):
        decode_fields(np.zeros((1, 3), np.uint64), StreamLayout(Encoding.RAW32, 32, 64), good)


@pytest.mark.parametrize("tables, limit, n", [
    *((False, GROUP_LIMIT, n) for n in (1, 100, 510, 511, 512, 600, 1000, 1023, 1024, 2047, 5000,
                                       8191, 16383, 100000)),
    *((True, TABLE_GROUP_LIMIT, n) for n in (1, 127, 128, 200, 256, 1000, 4095))])
def test_long_samples_are_padded_to_groups(tables, limit, n):
    """``n + 1`` slots up to the group limit (512; 128 with per-feature level tables); beyond, a
    multiple of the smallest power of two g with ceil((n+1)/g) <= limit: under 2/limit of the
    fields are padding."""
    slots = sample_fields(n, tables)
    assert StreamLayout(Encoding.DOUBLE, 2, 64, tables=tables).stream_bits(n, 3) == 3 * slots * 4
    if n + 1 <= limit:
        assert slots == n + 1
        return
    g = 1
    while -(-(n + 1) // g) > limit:
        g *= 2
    assert slots % g == 0 and slots // g <= limit and n + 1 <= slots < n + 1 + g
    assert (slots - n - 1) / (n + 1) < 2 / limit


@pytest.mark.parametrize("n", [600, 1000])
def test_padded_samples_round_trip_and_padding_must_be_zero(n):
    layout = StreamLayout(Encoding.DOUBLE, 3, 64)
    fields = np.random.default_rng(n).integers(0, 32, (9, n + 1), dtype=np.uint64)
    payload = pack_stream(fields, layout)
    slots = sample_fields(n)
    assert payload.size == layout.stream_bytes(n, 9) == -(-9 * slots * 5 // 64) * 8
    assert np.array_equal(unpack_stream(payload, layout, n, 9), fields)
    # The padding is zero on the wire: sample 4's first padding slot, bit 2.
    bit = (4 * slots + n + 1) * layout.field_width + 2
    bits = np.unpackbits(payload, bitorder="little")
    assert bits[(np.arange(9)[:, None] * slots + np.arange(n + 1, slots)) * 5].sum() == 0
    bits[bit] = 1
    with pytest.raises(ValueError, match="sample 4 has a nonzero padding slot"):
        unpack_stream(np.packbits(bits, bitorder="little"), layout, n, 9)


def test_per_feature_levels_and_raw32_tables():
    assert not per_feature_levels(None)
    assert not per_feature_levels(uniform_levels(2, 5))      # one row for every feature
    table = uniform_levels(2, 5).copy()
    table[3, 1] += 1
    assert per_feature_levels(table)
    with pytest.raises(ConfigError, match="raw32 streams have no level tables"):
        StreamLayout(Encoding.RAW32, 32, 64, tables=True)
