"""The adder trees of engine v2: the segmented dot-product sum and the update's partial sums.

Segmented sum.  A window may hold the ends and starts of several samples; a sample is at least
:data:`GROUP` slots long, so each group of ``GROUP`` lanes holds at most one sample start.  A
sample's dot product is the difference of the running prefix sum (modulo ``2**dot_width``, so
it never overflows) at its start and at the next start (``docs/HARDWARE.md``, "Engine v2:
segmented sums").
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["GROUP", "SegmentedSum", "ReductionTree", "tree_sum"]

#: Lanes per group: samples of at least this many slots put at most one start in a group.
GROUP = 8


def tree_sum(m, values, name: str, *, register_every: int = 1):
    """Balanced adder tree; a register after every ``register_every`` levels."""
    level = 0
    while len(values) > 1:
        nxt = []
        for i in range(0, len(values) - 1, 2):
            a, b = values[i], values[i + 1]
            width = max(len(a), len(b)) + 1
            s = Signal(signed(width), name=f"{name}_l{level}_{i // 2}")
            domain = m.d.sync if (level + 1) % register_every == 0 else m.d.comb
            domain += s.eq(a + b)
            nxt.append(s)
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
        level += 1
    return values[0], (level // register_every)


class SegmentedSum(wiring.Component):
    """Products of a window in, one closed sample sum per group with a sample start out.

    ``closed[g]`` (valid with ``closed_valid[g]``) is the dot product of the sample that ends
    just before group ``g``'s start (``start_lane[g]``, one-hot ``starts``).  The part of a
    group before its start is a sum of at most three aligned sub-blocks of the group's own
    adder tree (halves, quarters, single products), chosen by the start's position.
    """

    def __init__(self, lanes: int, product_width: int, dot_width: int):
        self.lanes, self.dot_width, self.product_width = lanes, dot_width, product_width
        groups = lanes // GROUP
        super().__init__({
            "products": In(signed(product_width)).array(lanes),
            "starts": In(1).array(lanes),
            "valid": In(1),
            "closed": Out(signed(dot_width)).array(groups),
            "closed_valid": Out(1).array(groups),
        })

    def _group(self, m, g):
        """(total, part before the start, has a start) of group ``g``, two cycles later."""
        pw = self.product_width
        p = [self.products[g * GROUP + i] for i in range(GROUP)]
        st = [self.starts[g * GROUP + i] for i in range(GROUP)]
        pos = Signal(3, name=f"pos{g}")
        for i in range(GROUP):
            with m.If(st[i]):
                m.d.comb += pos.eq(i)
        has = Signal(name=f"has{g}")
        m.d.comb += has.eq(Cat(*st).any())
        # Cycle 1: pair sums, and the odd single product before the start (p[pos-1], pos odd).
        pairs = [Signal(signed(pw + 1), name=f"g{g}_pair{i}") for i in range(4)]
        single = Signal(signed(pw), name=f"g{g}_single")
        pos1, has1 = Signal(3, name=f"g{g}_pos1"), Signal(name=f"g{g}_has1")
        m.d.sync += [pairs[i].eq(p[2 * i] + p[2 * i + 1]) for i in range(4)]
        m.d.sync += [single.eq(Mux(pos[0], Array(p[0::2])[pos[1:]], 0)),
                     pos1.eq(pos), has1.eq(has)]
        # Cycle 2: quarter sums, the total, and the part before the start.
        quads = [Signal(signed(pw + 2), name=f"g{g}_quad{i}") for i in range(2)]
        pick = Signal(signed(pw + 2), name=f"g{g}_pick")
        single2 = Signal(signed(pw), name=f"g{g}_single2")
        pos2, has2 = Signal(3, name=f"g{g}_pos2"), Signal(name=f"g{g}_has2")
        m.d.sync += [quads[0].eq(pairs[0] + pairs[1]), quads[1].eq(pairs[2] + pairs[3]),
                     pick.eq(Mux(pos1[1], Mux(pos1[2], pairs[2], pairs[0]), 0)),
                     single2.eq(single), pos2.eq(pos1), has2.eq(has1)]
        total = Signal(signed(pw + 3), name=f"g{g}_total")
        before = Signal(signed(pw + 3), name=f"g{g}_before")
        m.d.sync += [total.eq(quads[0] + quads[1]),
                     before.eq(Mux(pos2[2], quads[0], 0) + pick + single2)]
        hv = Signal(name=f"g{g}_has3")
        m.d.sync += hv.eq(has2)
        return total, before, hv

    def elaborate(self, platform):
        m = Module()
        groups = self.lanes // GROUP
        dw = self.dot_width
        parts = [self._group(m, g) for g in range(groups)]
        valid = self.valid
        for i in range(3):
            nxt = Signal(name=f"valid_d{i}")
            m.d.sync += nxt.eq(valid)
            valid = nxt
        # Offsets from the window's start: ``at[g]`` = sum of the window before group g's
        # start.  A sample closed at group g started at the previous start in this window
        # (a narrow difference) or before the window (``open_sum`` carries it).
        ww = self.product_width + 3 + (groups - 1).bit_length() + 1
        open_sum = Signal(signed(dw))
        offset = 0
        at = []
        for g, (total, before, _) in enumerate(parts):
            a = Signal(signed(ww), name=f"at{g}")
            m.d.comb += a.eq(offset + before)
            at.append(a)
            nxt = Signal(signed(ww), name=f"off{g}")
            m.d.comb += nxt.eq(offset + total)
            offset = nxt
        prev, prev_in_window = Signal(signed(ww), name="prev_none"), 0
        for g, (_, _, has) in enumerate(parts):
            base = Mux(prev_in_window, -prev, open_sum) if g else open_sum
            closed = at[g] + base
            m.d.sync += [self.closed[g].eq(closed), self.closed_valid[g].eq(valid & has)]
            p2 = Signal(signed(ww), name=f"prev{g}")
            m.d.comb += p2.eq(Mux(has, at[g], prev))
            prev, prev_in_window = p2, has | prev_in_window
        with m.If(valid):
            m.d.sync += open_sum.eq(Mux(prev_in_window, offset - prev, open_sum + offset))
        return m


class ReductionTree(wiring.Component):
    """``L`` partials in, their sum out (pipelined)."""

    def __init__(self, lanes: int, width: int):
        self.lanes = lanes
        out_width = width + (lanes - 1).bit_length()
        super().__init__({"partials": In(signed(width)).array(lanes),
                          "total": Out(signed(out_width))})

    def elaborate(self, platform):
        m = Module()
        total, _ = tree_sum(m, list(self.partials), "r")
        m.d.comb += self.total.eq(total)
        return m
