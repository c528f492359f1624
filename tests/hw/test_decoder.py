"""``hw.decoder.FieldDecoder`` against the stream spec, bit for bit.

The reference for a beat is :func:`~zipsgd.spec.stream.unpack_beats_v1` of the beat as a one-beat
sample, then :func:`~zipsgd.spec.stream.decode_fields` (lane ``i`` = field ``i``; the label from
field 0).  Every setting (encoding x bits) is checked on random beats and on named edge beats
(all zeros/ones, alternating bits, fields across 64-bit word boundaries, per-lane distinct
fields, extreme raw32 words) for every bus width; one simulator per bus width runs them all.
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from zipsgd.hw.decoder import QUANT_SETTINGS, FieldDecoder, level_value
from zipsgd.spec.stream import Encoding, StreamLayout, decode_fields, pack_beats_v1, unpack_beats_v1

RAW_EDGE_WORDS = [0x7FFF_FFFF, 0x8000_0000, 0x4000_0000, 0x4000_0001, 0x3FFF_FFFF, 0xC000_0000,
                  0xBFFF_FFFF, 0xC000_0001, 0xFFFF_FFFF, 0x0000_0001, 0x0000_0000]
# Random beats per setting; wide buses take longer to simulate (~15 ms per beat at W=256,
# ~30 ms at W=512), so they get fewer random beats and only some of the edge beats.
RANDOM_BEATS = {64: 32, 128: 16, 256: 3, 512: 1}
WIDE_EDGE_BEATS = {"zeros", "ones", "across words", "all but across words", "lane index",
                   "raw words 0", "raw words 3", "raw words 6"}
SETTINGS = [*QUANT_SETTINGS, (Encoding.RAW32, 32)]


def ref_decode(beat: int, layout: StreamLayout):
    """The spec's decode of one beat: (fields_per_beat, valid mask, first, second, label)."""
    per_beat = layout.fields_per_beat
    payload = np.frombuffer(beat.to_bytes(layout.beat_bytes, "little"), dtype=np.uint8)
    fields = unpack_beats_v1(payload, layout, per_beat - 1)  # the beat as one whole sample
    # A dummy label column in front makes decode_fields return field 0 as a feature too.
    lanes = decode_fields(np.hstack([np.zeros((1, 1), np.uint64), fields]), layout)
    label = int(decode_fields(fields, layout).label[0])
    return (per_beat, (1 << per_beat) - 1, [int(v) for v in lanes.first[0]],
            [int(v) for v in lanes.second[0]], label)


def _beat(words64) -> int:
    return sum(int(w) << (64 * k) for k, w in enumerate(words64))


def edge_beats(layout: StreamLayout) -> dict[str, int]:
    """Named edge beats for one setting."""
    width, fw, per_beat = layout.bus_width, layout.field_width, layout.fields_per_beat
    ones = (1 << width) - 1
    beats = {"zeros": 0, "ones": ones, "0x55": ones // 3, "0xaa": ones // 3 * 2,
             "top bit": 1 << (width - 1), "bit 0": 1}
    # The fields around every 64-bit word boundary inside the beat (and everything else).
    across = 0
    for k in range(1, width // 64):
        across |= ((1 << (2 * fw)) - 1) << (64 * k - fw)
    if across:
        beats["across words"] = across
        beats["all but across words"] = ones ^ across
    distinct = np.arange(per_beat, dtype=np.uint64) % np.uint64(1 << min(fw, 32))
    for name, fields in (("lane index", distinct), ("lane index reversed", distinct[::-1]),
                         ("lane index inverted", np.uint64((1 << fw) - 1) - distinct)):
        packed = pack_beats_v1(fields.reshape(1, -1), layout)
        beats[name] = int.from_bytes(packed.tobytes(), "little")
    if layout.encoding is Encoding.RAW32:
        slots = width // 32
        for r in range(len(RAW_EDGE_WORDS)):  # every edge word in every slot
            words = [RAW_EDGE_WORDS[(r + k) % len(RAW_EDGE_WORDS)] for k in range(slots)]
            beats[f"raw words {r}"] = sum(w << (32 * k) for k, w in enumerate(words))
    return beats


def random_beats(rng, width: int, count: int) -> list[int]:
    """Uniform beats, plus sparse and dense ones (AND / OR of two uniform beats)."""
    def uniform():
        return _beat(rng.integers(0, 1 << 64, size=width // 64, dtype=np.uint64,
                                  endpoint=False))
    beats = []
    for k in range(count):
        beat = uniform()
        if k % 3 == 1:
            beat &= uniform()
        elif k % 3 == 2:
            beat |= uniform()
        beats.append(beat)
    return beats


def lane_words(bits: int, lanes: int) -> list[int]:
    """Split the raw bits of a ``data.ArrayLayout(signed(32), lanes)`` port into lane words."""
    words = [(bits >> (32 * i)) & 0xFFFF_FFFF for i in range(lanes)]
    return [w - (1 << 32) if w >> 31 else w for w in words]


def run_decoder(dut: FieldDecoder, cases):
    """Apply ``cases`` = [(name, beat, encoding, bits, expected)], return mismatch messages.

    A testbench's ``ctx.set`` settles the combinational logic at once, so each case reads the
    outputs right after setting the inputs; unchanged setting inputs are not set again (every
    set costs one evaluation of the whole design).
    """
    mismatches = []

    async def testbench(ctx):
        setting = None
        for name, beat, encoding, bits, (per_beat, valid, first, second, label) in cases:
            if (encoding, bits) != setting:
                setting = encoding, bits
                ctx.set(dut.encoding, encoding)
                ctx.set(dut.bits, bits)
            ctx.set(dut.data, beat)
            got = (ctx.get(dut.fields_per_beat), ctx.get(dut.valid),
                   lane_words(ctx.get(dut.first.as_value()), dut.lanes),
                   lane_words(ctx.get(dut.second.as_value()), dut.lanes), ctx.get(dut.label))
            pad = [0] * (dut.lanes - len(first))  # invalid lanes read 0
            want = (per_beat, valid, first + pad, second + pad, label)
            if got != want:
                what = [n for n, g, w in zip(("fields_per_beat", "valid", "first", "second",
                                              "label"), got, want, strict=True) if g != w]
                mismatches.append(f"{name} (encoding {encoding}, bits {bits}, "
                                  f"beat {beat:#x}): {', '.join(what)} differ")

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()
    return mismatches


@pytest.mark.parametrize("bus_width", [64, 128, 256, 512])
def test_decoder_matches_spec(bus_width):
    rng = np.random.default_rng(20240 + bus_width)
    cases = []
    for encoding, bits in SETTINGS:
        layout = StreamLayout(encoding, bits, bus_width)
        beats = [(name, beat) for name, beat in edge_beats(layout).items()
                 if bus_width <= 128 or name in WIDE_EDGE_BEATS]
        beats += [(f"random {k}", b) for k, b in
                  enumerate(random_beats(rng, bus_width, RANDOM_BEATS[bus_width]))]
        for k, (name, beat) in enumerate(beats):
            # raw32 ignores the bits input: drive it with anything.
            bits_in = (k * 7) % 16 if encoding is Encoding.RAW32 else bits
            cases.append((f"{layout} {name}", beat, int(encoding), bits_in,
                          ref_decode(beat, layout)))
    mismatches = run_decoder(FieldDecoder(bus_width=bus_width), cases)
    assert not mismatches, f"{len(mismatches)} mismatches, first: " + "; ".join(mismatches[:5])


@pytest.mark.parametrize(("bus_width", "lanes"), [(64, 4), (128, 2)])
def test_decoder_with_fewer_lanes_is_the_first_lanes(bus_width, lanes):
    """``lanes=L`` decodes fields 0 .. L-1 exactly as the full decoder does (raw32 included,
    with fewer lanes than raw words at W = 128, L = 2); fields_per_beat stays the beat's."""
    rng = np.random.default_rng(300 + bus_width + lanes)
    cases = []
    for encoding, bits in SETTINGS:
        layout = StreamLayout(encoding, bits, bus_width)
        for k, beat in enumerate(random_beats(rng, bus_width, 4)):
            per_beat, valid, first, second, label = ref_decode(beat, layout)
            cases.append((f"{layout} random {k}", beat, int(encoding), bits & 15,
                          (per_beat, valid & ((1 << lanes) - 1), first[:lanes], second[:lanes],
                           label)))
    dut = FieldDecoder(bus_width=bus_width, lanes=lanes)
    assert (dut.lanes, dut.raw_lanes) == (lanes, min(bus_width // 32, lanes))
    mismatches = run_decoder(dut, cases)
    assert not mismatches, f"{len(mismatches)} mismatches, first: " + "; ".join(mismatches[:5])


def test_decoder_undefined_settings_decode_nothing():
    dut = FieldDecoder(bus_width=64)
    nothing = (0, 0, [], [], 0)
    cases = [(f"encoding {e} bits {b}", beat, e, b, nothing)
             for beat in (0, (1 << 64) - 1, 0x0123_4567_89AB_CDEF)
             for e, b in [(3, 0), (3, 4), (3, 15), (0, 0), (1, 0), (0, 9), (1, 12), (0, 15)]]
    mismatches = run_decoder(dut, cases)
    assert not mismatches, "; ".join(mismatches[:5])


@pytest.mark.parametrize("settings_latency", [0, 1])
@pytest.mark.parametrize("latency", [1, 2])
def test_decoder_latency(latency, settings_latency):
    """Outputs are the decode of the beat ``latency`` cycles earlier (0 after reset), with
    the settings changing from beat to beat: the settings set with the beat, or those of the
    cycle before it (``settings_latency`` = 1).  A beat with ``zero`` set decodes as 0."""
    dut = FieldDecoder(bus_width=64, latency=latency, settings_latency=settings_latency)
    rng = np.random.default_rng(7)
    cases = []
    for encoding, bits in [(Encoding.DOUBLE, 1), (Encoding.SINGLE, 8), (Encoding.RAW32, 32),
                           (Encoding.DOUBLE, 5)]:
        layout = StreamLayout(encoding, bits, 64)
        for k, beat in enumerate(random_beats(rng, 64, 4)):
            zero = k == 2
            cases.append((beat, int(encoding), bits & 15, zero,
                          ref_decode(0 if zero else beat, layout)))
    reset_value = (0, 0, [], [], 0)
    expected = [reset_value] * latency + [case[4] for case in cases]
    checked = []

    # The settings driven with each beat: its own, or those of the next beat (a cycle ahead).
    settings = [case[1:3] for case in cases]
    if settings_latency:
        settings = settings[1:] + settings[-1:]

    async def testbench(ctx):
        if settings_latency:
            # The first beat's settings, a cycle ahead; the beat in that cycle is 0 with the
            # settings before (encoding 0, bits 0: undefined), which decodes to nothing.
            ctx.set(dut.encoding, cases[0][1])
            ctx.set(dut.bits, cases[0][2])
            await ctx.tick()
        for cycle, (beat, _, _, zero, _) in enumerate(cases + cases[:latency]):
            encoding, bits = settings[cycle % len(cases)]
            per_beat, _, first, second, label = want = expected[cycle]
            assert ctx.get(dut.fields_per_beat) == per_beat, cycle
            got_first, got_second = ctx.get(dut.first), ctx.get(dut.second)
            assert [got_first[i] for i in range(per_beat)] == first, cycle
            assert [got_second[i] for i in range(per_beat)] == second, cycle
            assert ctx.get(dut.label) == label, cycle
            checked.append(want)
            ctx.set(dut.data, beat)
            ctx.set(dut.zero, zero)
            ctx.set(dut.encoding, encoding)
            ctx.set(dut.bits, bits)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert len(checked) == len(cases) + latency


@pytest.mark.parametrize("bits", range(1, 9))
def test_level_value_is_the_uniform_grid(bits):
    for q in range((1 << bits) + 1):
        assert level_value(q << (8 - bits), bits) == (2 * q - (1 << bits)) << (8 - bits)




@pytest.mark.parametrize(("kwargs", "error", "named"), [
    ({"bus_width": 96}, ValueError, "96"), ({"bus_width": 32}, ValueError, "32"),
    ({"bus_width": "64"}, TypeError, "'64'"), ({"bus_width": True}, TypeError, "True"),
    ({"bus_width": 64, "latency": True}, TypeError, "True"),
    ({"bus_width": 64, "latency": 3}, ValueError, "3"),
    ({"bus_width": 64, "settings_latency": 2}, ValueError, "2"),
    ({"bus_width": 64, "lanes": 3}, ValueError, "3"),
    ({"bus_width": 64, "lanes": 64}, ValueError, "64"),
    ({"bus_width": 64, "lanes": 1}, ValueError, "1"),
    ({"bus_width": 64, "lanes": 4.0}, TypeError, "4.0"),
    ({"bus_width": 64, "settings_latency": False}, TypeError, "False"),
])
def test_decoder_rejects_bad_parameters(kwargs, error, named):
    # The half-built component is an elaboratable that is never used: that warning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(error, match=f"not {named}$"):
            FieldDecoder(**kwargs)
        gc.collect()


def test_decoder_ports_and_verilog():
    dut = FieldDecoder(bus_width=64)
    assert (dut.bus_width, dut.lanes, dut.raw_lanes, dut.latency) == (64, 32, 2, 0)
    assert len(dut.data) == 64 and len(dut.valid) == 32 and len(dut.label) == 32
    assert dut.first.shape().length == 32 and dut.fields_per_beat.shape().width == 6
    text = verilog.convert(dut, name="zipsgd_field_decoder", emit_src=False)
    assert "module zipsgd_field_decoder" in text
    assert "/work" not in text  # no absolute source paths
