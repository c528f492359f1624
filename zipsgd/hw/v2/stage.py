"""A stream stage of two, four or eight entries whose ready is a register, and the mirror
stage that follows it a fixed number of cycles behind (``docs/HARDWARE.md``, "The window
stages").

The consumer's ``ready`` arrives late (the core's pass decision); here it only moves a read
pointer and the count, never the enables of the payload's flip-flops.  The producer sees a
registered ``ready`` (room for an entry), and the output is a choice of registers by the read
pointer.  Two entries keep one transfer per cycle: an entry freed in a cycle is refilled in
the next.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith import REPLICA_ATTRIBUTE

__all__ = ["WindowStage", "MirrorStage", "STAGE_DEPTHS"]

#: Depths a stage may have (its pointers wrap by their width).
STAGE_DEPTHS = (2, 4, 8)


class WindowStage(wiring.Component):
    """``i`` in, ``o`` out, in order, at most ``depth`` (2, 4 or 8) entries held; ``clear``
    empties it.

    ``i.ready`` and ``o.valid`` are registers; ``o.payload`` is a choice of registers by the
    read pointer.  The pointers are kept apart from other copies
    (:data:`~..arith.REPLICA_ATTRIBUTE`): the core places a stage beside each group of lanes.

    ``hold_at``: ``hold`` is a register, set while the stage holds ``hold_at`` entries or more
    (as of the last cycle's push and pop), for a producer that pushes without looking at
    ``i.ready`` and stops a few cycles after ``hold``: ``depth - hold_at`` entries are left
    for the pushes on their way.
    """

    def __init__(self, shape, depth: int = 2, hold_at: int | None = None):
        if depth not in STAGE_DEPTHS or (hold_at is not None and not 1 <= hold_at < depth):
            self._MustUse__silence = True    # (not built: no "created but never used")
            raise ValueError(f"depth must be one of {STAGE_DEPTHS} and hold_at in "
                             f"1..depth - 1, found {depth!r}, {hold_at!r}")
        self.shape, self.depth, self.hold_at = shape, depth, hold_at
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "clear": In(1),
            "hold": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        keep = {REPLICA_ATTRIBUTE: 1}
        depth = self.depth
        entries = [Signal(self.shape, name=f"entry{e}") for e in range(depth)]
        wp = Signal(range(depth), name="wp", attrs=keep)
        rp = Signal(range(depth), name="rp", attrs=keep)
        count = Signal(range(depth + 1), name="count", attrs=keep)
        held = Signal(name="held", attrs=keep)            # count != 0
        room = Signal(init=1, name="room", attrs=keep)    # count != depth
        push = self.i.valid & room
        pop = held & self.o.ready
        m.d.comb += [self.i.ready.eq(room), self.o.valid.eq(held),
                     self.o.payload.eq(Array(entries)[rp])]
        # The free entry at ``wp`` takes the input every cycle there is room, pushed or not (a
        # push only steps ``wp``): the enables are the stage's own registers, not the
        # producer's ``valid`` fanned out to every entry's flip-flops.
        for e, entry in enumerate(entries):
            with m.If(room & (wp == e)):
                m.d.sync += entry.eq(self.i.payload)
        # ``pop`` comes late (the consumer's decision): every next value is computed for
        # both of its outcomes, and ``pop`` only chooses between two, in the last LUT.
        # (The pointers wrap by their width: depth is a power of two.)
        stay = Mux(push, count + 1, count)               # no pop
        step = Mux(push, count, count - 1)               # a pop (count != 0)
        m.d.sync += [wp.eq(wp + push), rp.eq(Mux(pop, rp + 1, rp)),
                     count.eq(Mux(pop, step, stay)),
                     held.eq(Mux(pop, step != 0, stay != 0)),
                     room.eq(Mux(pop, step != depth, stay != depth))]
        if self.hold_at is not None:
            hold = Signal(name="hold_r", attrs=keep)
            m.d.comb += self.hold.eq(hold)
            m.d.sync += hold.eq(Mux(pop, step >= self.hold_at, stay >= self.hold_at))
        with m.If(self.clear):
            m.d.sync += [wp.eq(0), rp.eq(0), count.eq(0), held.eq(0), room.eq(1)]
            if self.hold_at is not None:
                m.d.sync += hold.eq(0)
        return m


class MirrorStage(wiring.Component):
    """The entries of a :class:`WindowStage`'s windows kept elsewhere, in LUT RAM: written in
    order at ``push``, read in order (``o``, the entry at the read pointer) and stepped at
    ``pop``, each a fixed number of cycles after the stage it mirrors, which does the flow
    control: a mirror never holds more than ``depth`` entries by construction (``clear``
    empties it).  Nothing here tests fullness, so the pushes and pops are registers placed
    beside it."""

    def __init__(self, shape, depth: int = 8):
        if depth not in STAGE_DEPTHS:
            self._MustUse__silence = True    # (not built: no "created but never used")
            raise ValueError(f"depth must be one of {STAGE_DEPTHS}, found {depth!r}")
        self.shape, self.depth = shape, depth
        super().__init__({
            "i": In(shape), "push": In(1),
            "o": Out(shape), "pop": In(1),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        keep = {REPLICA_ATTRIBUTE: 1}
        m.submodules.entries = entries = memory.Memory(shape=self.shape, depth=self.depth,
                                                       init=[])
        wr = entries.write_port()
        rd = entries.read_port(domain="comb")
        wp = Signal(range(self.depth), name="wp", attrs=keep)
        rp = Signal(range(self.depth), name="rp", attrs=keep)
        m.d.comb += [wr.addr.eq(wp), wr.data.eq(self.i), wr.en.eq(self.push),
                     rd.addr.eq(rp), self.o.eq(rd.data)]
        m.d.sync += [wp.eq(wp + self.push), rp.eq(rp + self.pop)]
        with m.If(self.clear):
            m.d.sync += [wp.eq(0), rp.eq(0)]
        return m
