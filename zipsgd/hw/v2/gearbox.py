"""The field gearbox: packed beats in, windows of ``L`` fields out, one window per cycle.

A *window* is the next ``L`` fields of the stream (``L * fw`` bits): window ``t`` holds engine
positions ``t*L .. t*L + L - 1``, so field ``f`` of the stream always reaches lane ``f mod L``
and no lane ever needs a shifter or a rotation (``docs/HARDWARE.md``, "Engine v2: the gearbox").

Assembly.  A window is ``fw`` *granules* of ``L`` bits, and a beat of ``W = 2 L`` bits is two
granules, so the beat's granules are written into granule slots of the window being filled
(a 2:1 choice per bit, no funnel shifter).  Extraction.  Slot ``k`` of a full window is bits
``[k*fw, (k+1)*fw)``; with ``fw`` one of nine run-time widths each slot bit is an AND-OR of at most
nine fixed window bits under one-hot width selects shared by all slots.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zipsgd.hw.arith import any_of, replicas
from zipsgd.spec.engine2 import FORWARD_WIDTH, RAW_ROUND_SHIFT

__all__ = ["FieldGearbox", "FIELD_WIDTHS", "SLOT_WIDTH", "window_layout", "beat_layout",
           "raw_word", "raw_bits", "raw_round", "raw_clamp"]

#: Field widths the gearbox extracts: ``single`` b = 1..8 (2..9 bits), ``double`` (3..10) and
#: the 8-bit chunks of a ``raw32`` word (four per word, ``docs/HARDWARE.md``).
FIELD_WIDTHS = tuple(range(2, 11))
#: Every slot is this wide; a narrower field is zero-extended.
SLOT_WIDTH = max(FIELD_WIDTHS)


def beat_layout(bus_width: int) -> data.StructLayout:
    return data.StructLayout({"data": bus_width, "last": 1})


def window_layout(lanes: int) -> data.StructLayout:
    """A window: ``lanes`` slots, and ``last`` on the window holding the stream's final bits."""
    return data.StructLayout({"slots": data.ArrayLayout(SLOT_WIDTH, lanes), "last": 1})


class FieldGearbox(wiring.Component):
    """Beats (``W`` bits) in, windows of ``L = W / 2`` fields out.

    Ports
    -----
    beats : In(stream.Signature(beat_layout(W)))
    windows : Out(stream.Signature(window_layout(L)))
    width : In(4)
        The field width ``fw`` (one of :data:`FIELD_WIDTHS`); held while a stream is read.
    restart : In(1)
        Drops any partial window (a new stream follows).
    hold : In(1)
        Takes no beat (and shows no final partial window) this cycle.  A consumer that always
        takes windows (``windows.ready`` tied to 1) throttles the gearbox through ``hold``
        alone, from a register beside the gearbox (``docs/HARDWARE.md``, "The window stages").

    The window after the beat with ``last`` set is emitted at once, with its unfilled granules
    zero and ``last`` set.
    """

    def __init__(self, bus_width: int):
        if bus_width % 2:
            raise ValueError(f"bus width must be even, found {bus_width}")
        self.bus_width = bus_width
        self.lanes = bus_width // 2
        super().__init__({
            "beats": In(stream.Signature(beat_layout(bus_width))),
            "windows": Out(stream.Signature(window_layout(self.lanes))),
            "width": In(4),
            "restart": In(1),
            "hold": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, granules = self.lanes, max(FIELD_WIDTHS)
        # The window register is written while its previous contents are on the output: a
        # completed window is shown for one cycle, then the next one's granules land in it.
        window = Signal(data.ArrayLayout(lanes, granules))
        spill = Signal(lanes)          # next window's granule 0, when a window ends mid-beat
        spilled = Signal()
        shown, shown_last = Signal(), Signal()
        # The next granule slot of the window, one-hot (slot g: bit g), so that the granules'
        # write enables and the tests against the width are AND-ORs of flip-flops.
        slot = Signal(granules + 2, init=1)
        flush = Signal()                # the last beat's high half is a final partial window
        beat = self.beats.payload
        low, high = beat.data[:lanes], beat.data[lanes:]
        # Registered one-hot width selects: each slot bit stays a flat AND-OR of window bits.
        selects = {fw: Signal(name=f"width_is_{fw}") for fw in FIELD_WIDTHS}
        m.d.sync += [select.eq(self.width == fw) for fw, select in selects.items()]

        # slot + 1 == width, slot + 2 == width.
        ends_low = any_of(slot[fw - 1] & sel for fw, sel in selects.items())
        ends_high = any_of(slot[fw - 2] & sel for fw, sel in selects.items())
        completes = ends_low | ends_high | beat.last
        free = ~shown | self.windows.ready
        m.d.comb += self.beats.ready.eq(free & ~flush & ~self.hold)
        take = self.beats.valid & self.beats.ready

        with m.If(self.windows.ready):
            m.d.sync += shown.eq(0)
        with m.If(flush & free & ~self.hold):
            m.d.sync += [shown.eq(1), shown_last.eq(1), flush.eq(0), slot.eq(1),
                         window[0].eq(spill), spilled.eq(0)]
        with m.Elif(take):
            for g in range(granules):
                with m.If(slot[g]):
                    m.d.sync += window[g].eq(low)
                with m.Elif((slot[g - 1] if g else 0) & ~ends_low):
                    m.d.sync += window[g].eq(high)
            with m.If(spilled):
                m.d.sync += [window[0].eq(spill), spilled.eq(0)]
            with m.If(completes):
                # A window that ends on the low half leaves the high half for the next one.
                m.d.sync += [shown.eq(1), shown_last.eq(beat.last & ~ends_low),
                             slot.eq(Mux(ends_low, 0b10, 0b01)), spill.eq(high),
                             spilled.eq(ends_low), flush.eq(ends_low & beat.last)]
            with m.Else():
                m.d.sync += slot.eq(slot << 2)
        with m.If(self.restart):
            m.d.sync += [slot.eq(1), shown.eq(0), flush.eq(0), spilled.eq(0)]

        m.d.comb += [self.windows.valid.eq(shown), self.windows.payload.last.eq(shown_last)]
        bits = Cat(*(window[g] for g in range(granules)))
        # (A copy of the selects per eight slots: one register would fan out to every slot.)
        copies = [{fw: replicas(m, f"width_is_{fw}_{c}", self.width == fw, 1)[0]
                   for fw in FIELD_WIDTHS} for c in range(-(-lanes // 8))]
        for k in range(lanes):
            out = self.windows.payload.slots[k]
            for b in range(SLOT_WIDTH):
                m.d.comb += out[b].eq(any_of(
                    copies[k // 8][fw] & bits[k * fw + b] for fw in FIELD_WIDTHS if b < fw))
        return m


def raw_bits(chunks) -> Value:
    """A raw32 field's 32 bits from its four 8-bit chunks (slots ``4m .. 4m+3``, low chunk
    first)."""
    return Cat(*(c[:8] for c in chunks))


def raw_round(word: Value) -> Value:
    """The first of :func:`raw_word`'s two steps: ``(w + 2**13) >> 14`` of the 32-bit word
    (19 bits, signed)."""
    return word[RAW_ROUND_SHIFT:].as_signed() + word[RAW_ROUND_SHIFT - 1]


def raw_clamp(rounded: Value) -> Value:
    """The second of :func:`raw_word`'s steps: the rounded word clamped to [-2**16, 2**16]."""
    one = 1 << (30 - RAW_ROUND_SHIFT)
    return Mux(rounded > one, one, Mux(rounded < -one, -one, rounded[:FORWARD_WIDTH]))


def raw_word(chunks) -> Value:
    """A raw32 field from its four 8-bit chunks (slots ``4m .. 4m+3``, low chunk first),
    clamped to [-2**30, 2**30] and rounded to 16 fraction bits: ``(w + 2**13) >> 14``
    (numerics v2, ``zipsgd.spec.engine2.RAW_ROUND_SHIFT``).  Rounding first and clamping the
    rounded word to [-2**16, 2**16] gives the same word with 18-bit carry chains (a raw lane
    makes the two steps in two cycles: ``Lane.raw_bits``)."""
    return raw_clamp(raw_round(raw_bits(chunks)))
