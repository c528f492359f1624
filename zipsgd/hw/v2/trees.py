"""The adder trees of engine v2: the segmented dot-product sum and the update's partial sums.

Segmented sum.  A window may hold the ends and starts of several samples; a sample is at least
:data:`GROUP` slots long, so each group of ``GROUP`` lanes holds at most one sample end.  A
sample's dot product is the difference of the running prefix sum (modulo ``2**dot_width``, so
it never overflows) at the previous sample's end and at its own (``docs/HARDWARE.md``, "Engine
v2: sums").  A sample closes with its last field, so nothing waits for the next sample.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arith import REPLICA_ATTRIBUTE, delay_line

__all__ = ["GROUP", "SegmentedSum", "ReductionTree", "FoldTree", "tree_sum"]

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
    """Products of a window in; per group, the sample that ends in it closed: its dot product
    and its label.

    ``ends[k]``: lane ``k`` holds a sample's last field; ``starts[k]``: its first (the label),
    with ``labels[g]`` the label of group ``g``'s start.  Samples are at least :data:`GROUP`
    lanes long, so a group holds at most one end and one start.  ``closed[g]`` (with
    ``closed_label[g]``, valid with ``closed_valid[g]``) is the sum of the products from the
    sample's start to group ``g``'s end: the part of the group up to its end is a sum of at
    most three aligned sub-blocks of the group's own adder tree (or the whole group), chosen by
    the end's position.  Outputs are those of the inputs ``latency`` cycles earlier
    (``7 + log2(groups)``: three in the groups, the offsets' scan, the offsets, the latest end's
    offset, the two candidate sums, the choice); ``valid`` low leaves the running sums alone.
    """

    def __init__(self, lanes: int, product_width: int, dot_width: int, label_width: int = 18):
        self.lanes, self.dot_width, self.product_width = lanes, dot_width, product_width
        groups = lanes // GROUP
        self.latency = 7 + (groups - 1).bit_length()
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
        # The part up to and including the end: the first ``q = end + 1`` products, chosen
        # by one-hot tests of the end's lane (a group holds at most one end): an odd ``q``
        # takes the single product at the end; ``q`` in 2-3 (6-7) a pair sum; ``q`` >= 4
        # the first quarter; ``q`` = 8 the whole.
        has, has_start = Signal(name=f"has{g}"), Signal(name=f"has_start{g}")
        same = Signal(name=f"same{g}")             # a start before the end
        m.d.comb += [has.eq(Cat(*ends).any()), has_start.eq(Cat(*starts).any()),
                     same.eq(Cat(*(ends[i] & Cat(*starts[:i]).any()
                                   for i in range(1, GROUP))).any())]
        whole = ends[GROUP - 1]
        flags = Cat(has, has_start, same, whole)
        choice = Cat(ends[1] | ends[2], ends[5] | ends[6], Cat(*ends[3:7]).any())
        # Cycle 1: pair sums, and the odd single product before q (p[q-1], q odd).
        pairs = [Signal(signed(pw + 1), name=f"g{g}_pair{i}") for i in range(4)]
        single = Signal(signed(pw), name=f"g{g}_single")
        q1, flags1 = Signal(3, name=f"g{g}_choice1"), Signal(4, name=f"g{g}_flags1")
        label1 = Signal.like(self.labels[g], name=f"g{g}_label1")
        m.d.sync += [pairs[i].eq(p[2 * i] + p[2 * i + 1]) for i in range(4)]
        m.d.sync += [single.eq(_pick(Cat(*ends[0::2]), p[0::2])), q1.eq(choice),
                     flags1.eq(flags), label1.eq(self.labels[g])]
        # Cycle 2: quarter sums and the pieces before q below a quarter (a pair and a single).
        quads = [Signal(signed(pw + 2), name=f"g{g}_quad{i}") for i in range(2)]
        piece = Signal(signed(pw + 2), name=f"g{g}_piece")
        quarter = Signal(signed(pw + 2), name=f"g{g}_quarter")     # the first quarter, if q >= 4
        flags2 = Signal(4, name=f"g{g}_flags2")
        label2 = Signal.like(label1, name=f"g{g}_label2")
        m.d.sync += [quads[0].eq(pairs[0] + pairs[1]), quads[1].eq(pairs[2] + pairs[3]),
                     piece.eq(_pick(q1[:2], [pairs[0], pairs[2]]) + single),
                     quarter.eq(Mux(q1[2], pairs[0] + pairs[1], 0)),
                     flags2.eq(flags1), label2.eq(label1)]
        # Cycle 3: the total and the part up to the end.
        total = Signal(signed(pw + 3), name=f"g{g}_total")
        before = Signal(signed(pw + 3), name=f"g{g}_before")
        flags3 = Signal(4, name=f"g{g}_flags3")
        label3 = Signal.like(label1, name=f"g{g}_label3")
        full = quads[0] + quads[1]
        m.d.sync += [total.eq(full),
                     before.eq(Mux(flags2[3], full, quarter + piece)),
                     flags3.eq(flags2), label3.eq(label2)]
        return total, before, flags3, label3

    def elaborate(self, platform):
        m = Module()
        groups = self.lanes // GROUP
        parts = [self._group(m, g) for g in range(groups)]
        valid = delay_line(m, self.valid, 3, "valid")
        # Window offsets: the inclusive prefix sums of the groups' totals, one register per
        # level of a Kogge-Stone scan (no chain of adders across the groups).
        ww = self.product_width + 3 + (groups - 1).bit_length() + 1
        prefix = [total for total, *_ in parts]
        levels = (groups - 1).bit_length()
        for level in range(levels):
            d = 1 << level
            nxt = [Signal(signed(ww), name=f"prefix{level}_{g}") for g in range(groups)]
            m.d.sync += [nxt[g].eq(prefix[g] + prefix[g - d] if g >= d else prefix[g])
                         for g in range(groups)]
            prefix = nxt
        before = [delay_line(m, b, levels, f"before{g}") for g, (_, b, _, _) in enumerate(parts)]
        flags = [delay_line(m, f, levels, f"flags{g}") for g, (_, _, f, _) in enumerate(parts)]
        glabels = [delay_line(m, x, levels, f"glabel{g}") for g, (*_, x) in enumerate(parts)]
        valid = delay_line(m, valid, levels, "valid_p")
        has = [f[0] for f in flags]
        has_start = [f[1] for f in flags]
        # ``at[g]``: the window's sum through group g's end.  ``sel[g]``: one-hot, the latest
        # group before g with an end (``g = groups``: the window's last end); ``lsel`` the
        # same for starts.  All registered, so the next stage is one AND-OR per bit.
        at = [Signal(signed(ww), name=f"at{g}") for g in range(groups)]
        window = Signal(signed(ww))
        m.d.sync += [at[g].eq((prefix[g - 1] if g else 0) + before[g]) for g in range(groups)]
        m.d.sync += window.eq(prefix[-1])
        sel = [_latest(m, has, g, f"sel{g}") for g in range(groups + 1)]
        lsel = [_latest(m, has_start, g, f"lsel{g}") for g in range(groups + 1)]
        flags, glabels = _delayed(m, flags, 1, "flags_a"), _delayed(m, glabels, 1, "glabel_a")
        valid = delay_line(m, valid, 1, "valid_a")
        # The latest end's offset (``prev``) and the latest start's label before each group.
        prev = [Signal(signed(ww), name=f"prev{g}") for g in range(groups + 1)]
        label = [Signal.like(self.labels[0], name=f"label_before{g}") for g in range(groups + 1)]
        for g in range(groups + 1):
            m.d.sync += [prev[g].eq(_pick(sel[g], at)), label[g].eq(_pick(lsel[g], glabels))]
        pin = [Signal(name=f"pin{g}") for g in range(groups + 1)]
        lpin = [Signal(name=f"lpin{g}") for g in range(groups + 1)]
        m.d.sync += [pin[g].eq(sel[g].any()) for g in range(groups + 1)]
        m.d.sync += [lpin[g].eq(lsel[g].any()) for g in range(groups + 1)]
        at, window = _delayed(m, at, 1, "at_b"), delay_line(m, window, 1, "window_b")
        flags, glabels = _delayed(m, flags, 1, "flags_b"), _delayed(m, glabels, 1, "glabel_b")
        valid = delay_line(m, valid, 1, "valid_b")
        # Close: a sample that began in this window is a difference of offsets; one that began
        # before it adds ``open_sum``, the sum since the last end (carried across windows).
        # Both are registered, then chosen: a cycle each.  Each group has its own copy of
        # ``open_sum``, with its own adder (a shared one would fan out to every group).
        open_sums = [Signal(signed(self.dot_width), name=f"open_sum{g}",
                            attrs={REPLICA_ATTRIBUTE: 1}) for g in range(groups)]
        open_label = Signal.like(self.labels[0])
        inside = [Signal(signed(self.dot_width), name=f"inside{g}") for g in range(groups)]
        outside = [Signal(signed(self.dot_width), name=f"outside{g}") for g in range(groups)]
        label_c = [Signal.like(self.labels[0], name=f"closed_label{g}") for g in range(groups)]
        for g in range(groups):
            m.d.sync += [inside[g].eq(at[g] - prev[g]), outside[g].eq(at[g] + open_sums[g]),
                         label_c[g].eq(Mux(flags[g][2], glabels[g],
                                           Mux(lpin[g], label[g], open_label)))]
        with m.If(valid):
            m.d.sync += [open_label.eq(Mux(lpin[groups], label[groups], open_label))]
            m.d.sync += [s.eq(Mux(pin[groups], window - prev[groups], s + window))
                         for s in open_sums]
        pin_c = [delay_line(m, pin[g], 1, f"pin_c{g}") for g in range(groups)]
        has_c = [delay_line(m, valid & flags[g][0], 1, f"has_c{g}") for g in range(groups)]
        for g in range(groups):
            m.d.sync += [self.closed[g].eq(Mux(pin_c[g], inside[g], outside[g])),
                         self.closed_label[g].eq(label_c[g]), self.closed_valid[g].eq(has_c[g])]
        return m


def _latest(m, flags, before: int, name: str):
    """Registered one-hot choice of the latest ``flags[h]`` set with ``h < before``."""
    if not before:
        return Const(0, 1)
    sel = Signal(before, name=name)
    later = Const(0, 1)
    for h in reversed(range(before)):
        m.d.sync += sel[h].eq(flags[h] & ~later)
        later = later | flags[h]
    return sel


def _pick(sel, values):
    """AND-OR of ``values`` under the one-hot ``sel`` (0 when none is chosen)."""
    out = 0
    for h in range(len(sel)):
        out = out | Mux(sel[h], values[h], 0)
    return out


def _delayed(m, values, cycles: int, name: str):
    return [delay_line(m, v, cycles, f"{name}{i}") for i, v in enumerate(values)]


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
