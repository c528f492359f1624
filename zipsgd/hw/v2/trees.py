"""The adder trees of engine v2: the segmented dot-product sum and the update's partial sums.

Segmented sum.  A window may hold the ends and starts of several samples; a sample is at least
:data:`GROUP` slots long, so each group of ``GROUP`` lanes holds at most one sample end.  A
sample's dot product is the difference of the running prefix sum (modulo ``2**dot_width``, so
it never overflows) at the previous sample's end and at its own (``docs/HARDWARE.md``, "Engine
v2: sums").  A sample closes with its last field, so nothing waits for the next sample.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["GROUP", "SEGMENT_LATENCY", "SegmentedSum", "ReductionTree", "FoldTree", "tree_sum"]

#: Lanes per group: samples of at least this many slots put at most one start in a group.
GROUP = 8
#: Cycles from a window's products to its closed samples.
SEGMENT_LATENCY = 4


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
    """Products of a window in; per group, the sample that ends in it closed: its dot product
    and its label.

    ``ends[k]``: lane ``k`` holds a sample's last field; ``starts[k]``: its first (the label),
    with ``labels[g]`` the label of group ``g``'s start.  Samples are at least :data:`GROUP`
    lanes long, so a group holds at most one end and one start.  ``closed[g]`` (with
    ``closed_label[g]``, valid with ``closed_valid[g]``) is the sum of the products from the
    sample's start to group ``g``'s end: the part of the group up to its end is a sum of at
    most three aligned sub-blocks of the group's own adder tree (or the whole group), chosen by
    the end's position.  Outputs are those of the inputs :data:`SEGMENT_LATENCY` cycles
    earlier; ``valid`` low leaves the running sums alone.
    """

    def __init__(self, lanes: int, product_width: int, dot_width: int, label_width: int = 18):
        self.lanes, self.dot_width, self.product_width = lanes, dot_width, product_width
        groups = lanes // GROUP
        super().__init__({
            "products": In(signed(product_width)).array(lanes),
            "starts": In(1).array(lanes),
            "ends": In(1).array(lanes),
            "labels": In(signed(label_width)).array(groups),
            "valid": In(1),
            "closed": Out(signed(dot_width)).array(groups),
            "closed_label": Out(signed(label_width)).array(groups),
            "closed_valid": Out(1).array(groups),
        })

    def _group(self, m, g):
        """(total, part up to the end, has an end, label, has a start, start before end) of
        group ``g``, three cycles later."""
        pw = self.product_width
        p = [self.products[g * GROUP + i] for i in range(GROUP)]
        ends = [self.ends[g * GROUP + i] for i in range(GROUP)]
        starts = [self.starts[g * GROUP + i] for i in range(GROUP)]
        epos, spos = Signal(3, name=f"epos{g}"), Signal(3, name=f"spos{g}")
        for i in range(GROUP):
            with m.If(ends[i]):
                m.d.comb += epos.eq(i)
            with m.If(starts[i]):
                m.d.comb += spos.eq(i)
        has, has_start = Signal(name=f"has{g}"), Signal(name=f"has_start{g}")
        m.d.comb += [has.eq(Cat(*ends).any()), has_start.eq(Cat(*starts).any())]
        # The part up to and including the end: the first ``q = end + 1`` products.
        q = Signal(3, name=f"q{g}")
        whole = Signal(name=f"whole{g}")
        m.d.comb += [q.eq(epos + 1), whole.eq(epos == GROUP - 1)]
        flags = Cat(has, has_start, has_start & has & (spos < epos), whole)
        # Cycle 1: pair sums, and the odd single product before q (p[q-1], q odd).
        pairs = [Signal(signed(pw + 1), name=f"g{g}_pair{i}") for i in range(4)]
        single = Signal(signed(pw), name=f"g{g}_single")
        q1, flags1 = Signal(3, name=f"g{g}_q1"), Signal(4, name=f"g{g}_flags1")
        label1 = Signal.like(self.labels[g], name=f"g{g}_label1")
        m.d.sync += [pairs[i].eq(p[2 * i] + p[2 * i + 1]) for i in range(4)]
        m.d.sync += [single.eq(Mux(q[0], Array(p[0::2])[q[1:]], 0)), q1.eq(q),
                     flags1.eq(flags), label1.eq(self.labels[g])]
        # Cycle 2: quarter sums and the pieces before q.
        quads = [Signal(signed(pw + 2), name=f"g{g}_quad{i}") for i in range(2)]
        pick = Signal(signed(pw + 2), name=f"g{g}_pick")
        single2 = Signal(signed(pw), name=f"g{g}_single2")
        q2, flags2 = Signal(3, name=f"g{g}_q2"), Signal(4, name=f"g{g}_flags2")
        label2 = Signal.like(label1, name=f"g{g}_label2")
        m.d.sync += [quads[0].eq(pairs[0] + pairs[1]), quads[1].eq(pairs[2] + pairs[3]),
                     pick.eq(Mux(q1[1], Mux(q1[2], pairs[2], pairs[0]), 0)),
                     single2.eq(single), q2.eq(q1), flags2.eq(flags1), label2.eq(label1)]
        # Cycle 3: the total and the part up to the end.
        total = Signal(signed(pw + 3), name=f"g{g}_total")
        before = Signal(signed(pw + 3), name=f"g{g}_before")
        flags3 = Signal(4, name=f"g{g}_flags3")
        label3 = Signal.like(label1, name=f"g{g}_label3")
        full = quads[0] + quads[1]
        m.d.sync += [total.eq(full),
                     before.eq(Mux(flags2[3], full,
                                   Mux(q2[2], quads[0], 0) + pick + single2)),
                     flags3.eq(flags2), label3.eq(label2)]
        return total, before, flags3, label3

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
        # Offsets from the window's start: ``at[g]`` = sum of the window through group g's end.
        # A sample closed at group g began after the previous end in this window (a narrow
        # difference) or before the window (``open_sum`` carries it); its label is that of the
        # latest start before its end (``open_label`` carries it across windows).
        ww = self.product_width + 3 + (groups - 1).bit_length() + 1
        open_sum = Signal(signed(dw))
        open_label = Signal.like(self.labels[0])
        offset = 0
        prev, prev_in_window = Signal(signed(ww), name="prev_none"), 0
        label = open_label
        for g, (total, before, flags, glabel) in enumerate(parts):
            has, has_start, same = flags[0], flags[1], flags[2]
            at = Signal(signed(ww), name=f"at{g}")
            m.d.comb += at.eq(offset + before)
            base = Mux(prev_in_window, -prev, open_sum) if g else open_sum
            m.d.sync += [self.closed[g].eq(at + base), self.closed_valid[g].eq(valid & has),
                         self.closed_label[g].eq(Mux(same, glabel, label))]
            p2 = Signal(signed(ww), name=f"prev{g}")
            m.d.comb += p2.eq(Mux(has, at, prev))
            prev, prev_in_window = p2, has | prev_in_window
            nxt = Signal(signed(ww), name=f"off{g}")
            m.d.comb += nxt.eq(offset + total)
            offset = nxt
            l2 = Signal.like(open_label, name=f"label_after{g}")
            m.d.comb += l2.eq(Mux(has_start, glabel, label))
            label = l2
        with m.If(valid):
            m.d.sync += [open_sum.eq(Mux(prev_in_window, offset - prev, open_sum + offset)),
                         open_label.eq(label)]
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


class FoldTree(wiring.Component):
    """``L`` partials in; ``U`` class sums and their total out, ``latency`` cycles later.

    Lane ``k`` is in class ``k mod U``: each level adds the upper half of the lanes onto the
    lower half, so after ``log2(L/U)`` levels value ``u`` is the sum of class ``u``
    (``sums[u]``), and ``log2(U)`` more levels give the sum of every lane (``total``).  Both
    come out in the same cycle.
    """

    def __init__(self, lanes: int, classes: int, width: int):
        self.lanes, self.classes = lanes, classes
        self.levels = (lanes - 1).bit_length()
        self.latency = self.levels
        super().__init__({"partials": In(signed(width)).array(lanes),
                          "sums": Out(signed(width + self.levels)).array(classes),
                          "total": Out(signed(width + self.levels))})

    def elaborate(self, platform):
        m = Module()
        values = list(self.partials)
        level = 0
        while len(values) > self.classes:
            half = len(values) // 2
            nxt = []
            for i in range(half):
                s = Signal(signed(len(values[i]) + 1), name=f"fold{level}_{i}")
                m.d.sync += s.eq(values[i] + values[i + half])
                nxt.append(s)
            values, level = nxt, level + 1
        sums = values
        total, depth = tree_sum(m, list(values), "t") if len(values) > 1 else (values[0], 0)
        for u, v in enumerate(sums):
            for i in range(depth):
                d = Signal.like(v, name=f"sum{u}_d{i}")
                m.d.sync += d.eq(v)
                v = d
            m.d.comb += self.sums[u].eq(v)
        m.d.comb += self.total.eq(total)
        return m
