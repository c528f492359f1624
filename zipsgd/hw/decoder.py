"""The engine's first stage: one stream beat in, every lane's decoded feature words out.

The hardware twin of :func:`zipsgd.spec.stream.unpack_beats_v1` followed by
:func:`zipsgd.spec.stream.decode_fields` (``docs/ENGINE.md``, stage 1), for one beat at a time
and with the encoding and bit width chosen at run time.

Cost model.  Lane ``i``'s field starts at bit ``i * fw`` with ``fw`` one of only ten run-time
widths (2..10 and 32), so each output bit of a lane is an AND-OR of at most 16 *fixed* beat bits
(one per quantized setting, several settings sharing a bit are merged) under one-hot setting
selects shared by all lanes: no barrel shifter.  A setting is left out of lane ``i`` when the
lane can never be valid in it (``i >= bus_width // fw``), so high lanes shrink to the few
narrow settings that reach them.  The interval index is gathered *left-aligned* to 8 bits, which
puts every level on one 256-step grid and makes the level lookup a constant map (no per-lane
shifter by ``8 - b``).
"""

from __future__ import annotations

import functools
import operator

from amaranth.hdl import Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zipsgd.hw.arith import any_of
from zipsgd.spec.stream import (
    BUS_WIDTHS,
    QUANT_FEATURE_FRAC,
    RAW_ONE,
    Encoding,
    StreamLayout,
)

__all__ = ["FieldDecoder", "level_value", "QUANT_SETTINGS", "LEVEL_WIDTH", "WORD_WIDTH"]

#: Width of the aligned level ``q << (8 - b)`` (0..256) that :func:`level_value` takes.
LEVEL_WIDTH = QUANT_FEATURE_FRAC + 1
#: Width of every decoded word port (``first``, ``second``, ``label``).
WORD_WIDTH = 32
#: Every quantized (encoding, bits) setting the decoder accepts.
QUANT_SETTINGS = tuple((encoding, bits) for encoding in (Encoding.DOUBLE, Encoding.SINGLE)
                       for bits in range(1, 9))


def level_value(q, bits):
    """The feature word of a quantization level: the uniform level lookup.

    Kept apart from the field extraction so that a per-feature codebook (variance-optimal
    levels) can replace it.

    Parameters
    ----------
    q : Value or int
        The level ``q`` in ``0..2**b`` *aligned to 8 bits*: ``q << (8 - b)``, in ``0..256``
        (``LEVEL_WIDTH`` = 9 bits, unsigned).  A level of ``b`` bits becomes its position on the
        256-step grid, which is what makes the uniform lookup independent of ``b``.
    bits : Value or int
        The interval-index bits ``b`` (1..8).  The uniform grid does not need it (``q`` is
        aligned); it is part of the interface for a codebook, which maps ``(q, bits)`` to a word.

    Returns
    -------
    Value or int
        ``2 q - 256`` = ``(2 q_b - 2**b) << (8 - b)``: a signed word in ``[-256, 256]`` with
        ``QUANT_FEATURE_FRAC`` = 8 fraction bits (an Amaranth value of shape ``signed(11)`` for
        a 9-bit ``q``; the decoder narrows it to ``signed(10)``, exact for ``q <= 256``).
    """
    del bits  # the aligned level already carries the scale
    return (q << 1) - (1 << QUANT_FEATURE_FRAC)


class FieldDecoder(wiring.Component):
    """Decodes one beat of the packed stream into lanes of feature words (fields 0 .. L-1).

    Exactly :func:`~zipsgd.spec.stream.unpack_beats_v1` + :func:`~zipsgd.spec.stream.decode_fields`
    of the beat, lane ``i`` being field ``i`` of the beat (bits ``[i*fw, (i+1)*fw)``).  Every
    output is the decode of the inputs ``latency`` clock cycles earlier (``sync`` domain,
    registers without a reset whose initial value is 0); latency 0 is purely combinational.

    Parameters
    ----------
    bus_width : int
        Beat width ``W``: 64, 128, 256 or 512.
    lanes : int or None
        ``L``, the fields decoded: the first ``L`` of the beat, a power of two from 2 to
        ``W // 2`` (``None``, the default: ``W // 2``, every field of the densest beat).  The
        engine decodes a slice of ``L`` fields at a time and brings each slice to field 0.
    latency : int
        0 (default), 1: a register on every output, or 2: registers also between the
        gathering of each lane's bits from the beat and the arithmetic on them (the engine's
        choice, so that neither is in the same cycle as the other).
    settings_latency : int
        0 (default): the encoding and bits are used in the cycle they are set.  1 (the
        engine's choice): every decode of them (the gathering's per-bit selects, which fan out
        to every lane) is registered first, so the outputs are the decode of ``data``
        ``latency`` cycles earlier *with the settings of the cycle before that*.  The engine
        latches its settings at a start, a cycle before any beat (its START state).

    Members
    -------
    data : In(W)
        The beat (``tdata``).
    zero : In(1)
        Decode an all-zero beat instead of ``data`` (the engine's flush).  At latency 2 it
        clears the gathering's registers (a synchronous clear: nothing in front of them).
    encoding : In(2)
        :class:`~zipsgd.spec.stream.Encoding` code: 0 double, 1 single, 2 raw32.
    bits : In(4)
        Interval-index bits ``b`` (1..8); ignored for raw32.
    valid : Out(L)
        Bit ``i`` is set when lane ``i`` holds a field: ``i < fields_per_beat``.
    first, second : Out(data.ArrayLayout(signed(32), L))
        ``first[i]``, ``second[i]``: lane ``i``'s two feature words ``F1``, ``F2`` (as a flat
        value, lane ``i`` is bits ``[32 i, 32 i + 32)``).
        Quantized: ``(2 q - 2**b) << (8 - b)`` in ``[-256, 256]``, 8 fraction bits
        (``second == first`` for single).  Raw32 (lanes ``0 .. min(W/32, L) - 1``):
        ``clamp(word, -2**30, 2**30)``, 30 fraction bits, ``second == first``.
        An invalid lane reads 0.
    fields_per_beat : Out(range(W // 2 + 1))
        ``P = W // field_width`` of the current setting (``field_width`` = ``b + 2``,
        ``b + 1`` or 32).
    label : Out(signed(32))
        Lane 0 decoded as the label: ``F1 + F2`` (double; ``2 F1`` for single), 9 fraction bits,
        in ``[-512, 512]``; the clamped word (raw32), 30 fraction bits.

    A setting outside the table (encoding 3, or ``bits`` not in 1..8 for double/single) has
    ``fields_per_beat`` = 0, no valid lane and every word 0; the engine refuses such a start,
    so this is only the defined behaviour of a stray input.

    Raises
    ------
    TypeError
        If ``bus_width``, ``lanes``, ``latency`` or ``settings_latency`` is not an integer.
    ValueError
        If ``bus_width`` is not one of 64, 128, 256, 512, ``lanes`` not a power of two from
        2 to ``W // 2``, ``latency`` not 0, 1 or 2, or ``settings_latency`` not 0 or 1.
    """

    def __init__(self, *, bus_width, lanes=None, latency=0, settings_latency=0):
        if not isinstance(bus_width, int) or isinstance(bus_width, bool):
            raise TypeError(f"Bus width must be an integer, not {bus_width!r}")
        if bus_width not in BUS_WIDTHS:
            raise ValueError(f"Bus width must be one of {BUS_WIDTHS}, not {bus_width!r}")
        if not isinstance(latency, int) or isinstance(latency, bool):
            raise TypeError(f"Latency must be an integer, not {latency!r}")
        if latency not in (0, 1, 2):
            raise ValueError(f"Latency must be 0, 1 or 2, not {latency!r}")
        if not isinstance(settings_latency, int) or isinstance(settings_latency, bool):
            raise TypeError(f"Settings latency must be an integer, not {settings_latency!r}")
        if settings_latency not in (0, 1):
            raise ValueError(f"Settings latency must be 0 or 1, not {settings_latency!r}")
        if lanes is None:
            lanes = bus_width // 2
        if not isinstance(lanes, int) or isinstance(lanes, bool):
            raise TypeError(f"Lanes must be an integer, not {lanes!r}")
        if lanes < 2 or lanes > bus_width // 2 or lanes & (lanes - 1):
            raise ValueError(f"Lanes must be a power of two from 2 to {bus_width // 2}, "
                             f"not {lanes!r}")
        self._bus_width = bus_width
        self._lanes = lanes
        self._latency = latency
        self._settings_latency = settings_latency
        super().__init__(self.signature_for(bus_width, lanes))

    @staticmethod
    def signature_for(bus_width, lanes=None):
        """The port signature of a decoder for ``bus_width`` (see the class members)."""
        lanes = bus_width // 2 if lanes is None else lanes
        words = data.ArrayLayout(signed(WORD_WIDTH), lanes)
        return wiring.Signature({
            "data": In(bus_width),
            "zero": In(1),
            "encoding": In(2),
            "bits": In(4),
            "valid": Out(lanes),
            "first": Out(words),
            "second": Out(words),
            "fields_per_beat": Out(range(bus_width // 2 + 1)),
            "label": Out(signed(WORD_WIDTH)),
        })

    @property
    def bus_width(self):
        return self._bus_width

    @property
    def lanes(self):
        """``L``: the fields decoded (``bus_width // 2``, every field of the densest beat
        (single, b = 1), unless chosen smaller)."""
        return self._lanes

    @property
    def raw_lanes(self):
        """Lanes that can hold a raw32 word: ``min(bus_width // 32, lanes)``."""
        return min(self._bus_width // 32, self._lanes)

    @property
    def latency(self):
        return self._latency

    @property
    def settings_latency(self):
        return self._settings_latency

    def elaborate(self, platform):
        m = Module()
        width, lanes, raw_lanes = self._bus_width, self.lanes, self.raw_lanes
        layouts = {key: StreamLayout(*key, width) for key in QUANT_SETTINGS}
        raw_layout = StreamLayout(Encoding.RAW32, 32, width)

        settled = self._settings_latency == 1

        def register(value, name):
            """``value`` a cycle later (a data register: no reset, initial value 0)."""
            sig = Signal(value.shape(), name=f"{name}_r", reset_less=True)
            m.d.sync += sig.eq(value)
            return sig

        def settings(encoding, bits, label):
            """One-hot setting selects (shared by every lane) and the raw32 select."""
            selects = {}
            for key in QUANT_SETTINGS:
                select = Signal(name=f"{label}_{key[0].name.lower()}{key[1]}")
                m.d.comb += select.eq((encoding == key[0]) & (bits == key[1]))
                selects[key] = select
            raw = Signal(name=f"{label}_raw")
            m.d.comb += raw.eq(encoding == Encoding.RAW32)
            return selects, raw

        gather_selects, gather_raw = settings(self.encoding, self.bits, "sel")
        # An all-zero beat gathers zeros: at latency 2 ``zero`` clears the gathered registers
        # instead (below), so that it is not in front of the gathering.
        cleared_late = self._latency == 2
        beat = self.data if cleared_late else Mux(self.zero, 0, self.data)
        group_selects = {}   # settings routing one beat bit to one output bit -> their OR

        def group_select(keys):
            """The OR of the selects of ``keys``: one register per distinct group when the
            settings are registered (a single LUT level between the beat and each term)."""
            keys = tuple(sorted(keys))
            if keys not in group_selects:
                value = any_of(gather_selects[key] for key in keys)
                name = "sel_" + "_".join(f"{e.name[0].lower()}{b}" for e, b in keys)
                group_selects[keys] = register(value, name) if settled else value
            return group_selects[keys]

        def gather(terms):
            """One output bit: ``OR over beat positions p of (data[p] & group select of p)``."""
            return any_of(beat[pos] & group_select(keys)
                          for pos, keys in sorted(terms.items()))

        # Step 1, gathering: per lane and sample s, v = (index << (8 - b)) | s * (2**(8 - b) - 1)
        # and s, so that the level is v + s, two registers' sum (HARDWARE.md, "Decoder").
        gathered = []   # per lane: ((v1, sample1), (v2, sample2))
        for lane in range(lanes):
            # For each output bit, the beat positions it can come from and under which settings.
            v_terms = [[{} for _ in range(QUANT_FEATURE_FRAC)] for _ in range(2)]
            sample_terms = [{}, {}]
            for key in gather_selects:
                encoding, bits = key
                layout = layouts[key]
                if lane >= layout.fields_per_beat:
                    continue  # pruned: this lane never holds a field in this setting
                base = lane * layout.field_width
                second_bit = bits + 1 if encoding is Encoding.DOUBLE else bits
                for terms, sample_bit in zip(v_terms, (bits, second_bit), strict=True):
                    for j in range(bits):  # index bit j -> aligned bit j + 8 - b
                        terms[j + QUANT_FEATURE_FRAC - bits].setdefault(
                            base + j, []).append(key)
                    for j in range(QUANT_FEATURE_FRAC - bits):  # the sample below the index
                        terms[j].setdefault(base + sample_bit, []).append(key)
                sample_terms[0].setdefault(base + bits, []).append(key)
                sample_terms[1].setdefault(base + second_bit, []).append(key)
            lane_bits = []
            for n in range(2):
                v = Signal(QUANT_FEATURE_FRAC, name=f"lane{lane}_v{n + 1}")
                sample = Signal(name=f"lane{lane}_s{n + 1}")
                m.d.comb += [v.eq(Cat(*(gather(terms) for terms in v_terms[n]))),
                             sample.eq(gather(sample_terms[n]))]
                lane_bits.append((v, sample))
            gathered.append(tuple(lane_bits))

        def clamped(word):
            """A raw32 word clamped to [-2**30, 2**30]: top two bits 01 is >= 2**30, 10 is
            < -2**30."""
            return Mux(~word[31] & word[30], RAW_ONE,
                       Mux(word[31] & ~word[30], -RAW_ONE, word.as_signed()))

        # What the settings decide for step 2: the one-hot selects and each lane's valid.
        selects, sel_raw = gather_selects, gather_raw
        quant_valid = Cat(*(any_of(select for key, select in selects.items()
                                   if lane < layouts[key].fields_per_beat)
                            for lane in range(lanes)))
        bits = self.bits
        if settled:
            # The gathering uses the settings of the cycle before; so does everything else.
            bits = register(bits, "bits_settled")
            selects = {key: register(sel, sel.name) for key, sel in selects.items()}
            sel_raw = register(sel_raw, "sel_raw_settled")
            quant_valid = register(quant_valid, "quant_valid_settled")
        # A raw lane's clamped word, 0 unless the setting is raw32 (when every quantized word
        # is 0), so that step 2 ORs it in: one LUT after the level's carry chain, not a choice.
        raw_parts = [Mux(sel_raw, clamped(beat[32 * lane: 32 * lane + 32]), 0)
                     for lane in range(raw_lanes)]
        if self._latency == 2:
            # The gathered bits, the raw parts and the settings' decodes are registered here
            # (the decodes fan out to every lane: from registers they are a short way).
            gathered = [tuple(tuple(register(v, v.name) for v in pair) for pair in lane_bits)
                        for lane_bits in gathered]
            raw_parts = [register(w, f"lane{lane}_raw_part") for lane, w in enumerate(raw_parts)]
            with m.If(self.zero):
                m.d.sync += [reg.eq(0) for lane_bits in gathered for pair in lane_bits
                             for reg in pair]
                m.d.sync += [word.eq(0) for word in raw_parts]
            bits = register(bits, "bits")
            selects = {key: register(sel, sel.name) for key, sel in selects.items()}
            sel_raw = register(sel_raw, "word_sel_raw")
            quant_valid = register(quant_valid, "quant_valid")

        # Step 2, the words: levels, the lookup, raw32's clamped part ORed in.
        fields_per_beat = functools.reduce(operator.or_, (
            [Mux(sel_raw, raw_layout.fields_per_beat, 0)]
            + [Mux(selects[key], layouts[key].fields_per_beat, 0) for key in selects]))

        lane_valid, lane_first, lane_second = [], [], []
        for lane, lane_bits in enumerate(gathered):
            # Level q << (8 - b) = v + s, then the lookup, whose signed(11) result is narrowed
            # to signed(10): exact, as |F| <= 256.
            words = []
            for n, (v, sample) in enumerate(lane_bits, start=1):
                level = Signal(LEVEL_WIDTH, name=f"lane{lane}_q{n}")
                word = Signal(signed(QUANT_FEATURE_FRAC + 2), name=f"lane{lane}_f{n}")
                m.d.comb += [
                    level.eq(v + sample),
                    word.eq(Mux(quant_valid[lane], level_value(level, bits), 0)),
                ]
                words.append(word)

            valid = quant_valid[lane]
            if lane < raw_lanes:
                words = [word.as_signed() | raw_parts[lane] for word in words]
                valid = quant_valid[lane] | sel_raw
            first, second = (Signal(signed(WORD_WIDTH), name=f"lane{lane}_{name}")
                             for name in ("first", "second"))
            m.d.comb += [first.eq(words[0]), second.eq(words[1])]
            lane_valid.append(valid)
            lane_first.append(first)
            lane_second.append(second)

        outputs = [(self.valid, Cat(*lane_valid)), (self.first, Cat(*lane_first)),
                   (self.second, Cat(*lane_second)), (self.fields_per_beat, fields_per_beat)]
        if self._latency:
            # Registers without a reset (data; their initial value is 0): it keeps the
            # reset's fan-out small.
            for port, value in outputs:
                port = Value.cast(port)
                reg = Signal(len(port), name=f"{port.name}_r", reset_less=True)
                m.d.sync += reg.eq(value)
                m.d.comb += port.eq(reg)
        else:
            m.d.comb += [port.eq(value) for port, value in outputs]
        # Single has F2 == F1, so F1 + F2 is also its label 2 F1 (9 fraction bits); from the
        # output words (registered when latency > 0, off the words' own arithmetic).
        raw_setting = sel_raw
        if self._latency:
            raw_setting = Signal(reset_less=True)
            m.d.sync += raw_setting.eq(sel_raw)
        m.d.comb += self.label.eq(Mux(raw_setting, self.first[0], self.first[0] + self.second[0]))
        return m
