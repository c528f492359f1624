"""A stream stage of two (or four) entries whose ready is a register (``docs/HARDWARE.md``,
"The window stages").

The consumer's ``ready`` arrives late (the core's pass decision); here it only moves a read
pointer and the count, never the enables of the payload's flip-flops.  The producer sees a
registered ``ready`` (room for an entry), and the output is a choice of registers by the read
pointer.  Two entries keep one transfer per cycle: an entry freed in a cycle is refilled in
the next.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith import REPLICA_ATTRIBUTE

__all__ = ["WindowStage"]


class WindowStage(wiring.Component):
    """``i`` in, ``o`` out, in order, at most ``depth`` (2 or 4) entries held; ``clear``
    empties it.

    ``i.ready`` and ``o.valid`` are registers; ``o.payload`` is a choice of registers by the
    read pointer.  The pointers are kept apart from other copies
    (:data:`~..arith.REPLICA_ATTRIBUTE`): the core places a stage beside each group of lanes.
    """

    def __init__(self, shape, depth: int = 2):
        if depth not in (2, 4):
            self._MustUse__silence = True    # (not built: no "created but never used")
            raise ValueError(f"depth must be 2 or 4, found {depth!r}")
        self.shape, self.depth = shape, depth
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "clear": In(1),
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
        for e, entry in enumerate(entries):
            with m.If(push & (wp == e)):
                m.d.sync += entry.eq(self.i.payload)
        after = Mux(push, Mux(pop, count, count + 1), Mux(pop, count - 1, count))
        # (The pointers wrap by their width: depth is a power of two.)
        m.d.sync += [wp.eq(wp + push), rp.eq(rp + pop), count.eq(after),
                     held.eq(after != 0), room.eq(after != depth)]
        with m.If(self.clear):
            m.d.sync += [wp.eq(0), rp.eq(0), count.eq(0), held.eq(0), room.eq(1)]
        return m
