"""One lane of engine v2: decode, forward product, gradient term and its lane-local memories.

Lane ``k`` handles stream positions ``k mod L``.  Its memories hold the per-feature data of the
features that reach it (``docs/HARDWARE.md``, "Engine v2: lane memories"): the forward model
words in pairs (two buffers), the level table, and two gradient-partial memories (one summed
into while the other is read by the update).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from ..core import UNUSED_COLLISION_ATTRIBUTE
from .gearbox import SLOT_WIDTH

_MARK = {UNUSED_COLLISION_ATTRIBUTE: 1}

__all__ = ["Lane", "FORWARD_WIDTH", "LEVEL_WIDTH", "PARTIAL_WIDTH", "TERM_WIDTH",
           "PRODUCT_WIDTH", "RESIDUAL_WIDTH"]

#: Forward model operand: the top bits of a model word (``docs/ENGINE.md``, stage 2).
FORWARD_WIDTH = 18
#: A level word, ``<10, 8>`` in [-256, 256]; tables store ``[-256, 255]`` (9 bits).
LEVEL_WIDTH = 10
TABLE_WIDTH = 9
#: Scaled residual ``e``: 18 bits, saturated symmetrically.
RESIDUAL_WIDTH = 18
#: ``F1 * x_f`` and ``e * F2``: |value| <= 2**25.
PRODUCT_WIDTH = 26
TERM_WIDTH = 26
#: A lane's gradient partial: B_max terms (35 bits at B_max = 512) and a batch-parity tag.
PARTIAL_WIDTH = 35


def forward_layout(addr_width: int) -> data.StructLayout:
    return data.StructLayout({"valid": 1, "slot": SLOT_WIDTH, "addr": addr_width,
                              "level_addr": 11})


class Lane(wiring.Component):
    """A lane (the datapath and memories of one stream position class)."""

    def __init__(self, capacity: int, raw: bool):
        self.capacity = capacity      # features per buffer
        self.raw = raw
        aw = (capacity - 1).bit_length()
        self.addr_width = aw
        super().__init__({
            "fwd": In(forward_layout(aw)),
            "raw_word": In(signed(FORWARD_WIDTH)),
            "raw_mode": In(1),
            "buffer": In(1),                 # which forward-model buffer is read
            "spacing": In(8),                # 2**(8-b) or 2**(4-b): next level's address step
            "top_mask": In(8),
            "product": Out(signed(PRODUCT_WIDTH)),
            "product_valid": Out(1),
            "second": Out(signed(LEVEL_WIDTH)),
            # The gradient pass.
            "bwd_valid": In(1),
            "bwd_second": In(signed(LEVEL_WIDTH)),
            "bwd_e": In(signed(RESIDUAL_WIDTH)),
            "bwd_addr": In(aw),
            "sum_bank": In(1),               # which partial memory is summed into
            # The update pass: one partial per cycle.
            "upd_addr": In(aw),
            "tag": In(1),                    # parity of the batch being summed
            "partial": Out(signed(PARTIAL_WIDTH)),
            # Writes from the update units (forward words, in pairs) and the host (levels).
            "xf_we": In(1), "xf_addr": In(aw + 1), "xf_data": In(FORWARD_WIDTH),
            "cb_we": In(1), "cb_addr": In(11), "cb_data": In(TABLE_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        fwd = self.fwd

        # Levels: l_i on port A, l_{i+1} on port B; the host writes through port A when idle.
        m.submodules.levels = levels = memory.Memory(shape=signed(TABLE_WIDTH), depth=2048,
                                                     init=[], attrs=_MARK)
        la = levels.read_port()
        lw = levels.write_port()
        lb = levels.read_port()
        next_addr = Signal(12)
        m.d.comb += [
            next_addr.eq(fwd.level_addr + self.spacing),
            la.addr.eq(Mux(self.cb_we, self.cb_addr, fwd.level_addr)),
            lw.addr.eq(la.addr), lw.en.eq(self.cb_we), lw.data.eq(self.cb_data),
            lb.addr.eq(next_addr[:11]),
        ]
        # Forward words, two buffers; the update units write the idle buffer.
        m.submodules.forward = words = memory.Memory(shape=signed(FORWARD_WIDTH),
                                                     depth=2 * self.capacity, init=[],
                                                     attrs=_MARK)
        xr = words.read_port()
        xw = words.write_port()
        m.d.comb += [xr.addr.eq(Cat(fwd.addr, self.buffer)),
                     xw.addr.eq(self.xf_addr), xw.en.eq(self.xf_we), xw.data.eq(self.xf_data)]

        # Stage 1 (memories answer): choose the levels and the half of the pair.
        s1, s2 = fwd.slot[1], fwd.slot[0]
        top = (fwd.slot[2:] == self.top_mask)      # i is the last interval: l_{i+1} = +256
        d_s1, d_s2, d_top, d_valid = (Signal(name=n) for n in
                                      ("d_s1", "d_s2", "d_top", "d_valid"))
        m.d.sync += [d_s1.eq(s1), d_s2.eq(s2), d_top.eq(top),
                     d_valid.eq(fwd.valid)]
        upper = Signal(signed(LEVEL_WIDTH))
        m.d.comb += upper.eq(Mux(d_top, 256, lb.data))
        first = Signal(signed(LEVEL_WIDTH))
        second = Signal(signed(LEVEL_WIDTH))
        m.d.comb += [first.eq(Mux(d_s1, upper, la.data)), second.eq(Mux(d_s2, upper, la.data))]
        operand = xr.data
        f1 = Signal(signed(FORWARD_WIDTH))
        if self.raw:
            m.d.comb += f1.eq(Mux(self.raw_mode, self.raw_word, first))
        else:
            m.d.comb += f1.eq(first)
        # Stage 2: the product (a MULT18X18D with its input registers).
        a, b = Signal(signed(FORWARD_WIDTH)), Signal(signed(FORWARD_WIDTH))
        v2 = Signal()
        m.d.sync += [a.eq(f1), b.eq(operand), v2.eq(d_valid),
                     self.second.eq(second)]
        prod = Signal(signed(2 * FORWARD_WIDTH))
        m.d.sync += [prod.eq(a * b), self.product_valid.eq(v2)]
        if self.raw:
            m.d.comb += self.product.eq(Mux(self.raw_mode, prod >> 8, prod))
        else:
            m.d.comb += self.product.eq(prod)

        # The gradient pass: term = e * F2 summed into partial memory ``sum_bank`` while the
        # update reads the other one.  A word carries the parity of the batch that wrote it, so
        # a word from an older batch reads as 0 and nothing is ever cleared.
        banks = []
        for g in range(2):
            mem = memory.Memory(shape=PARTIAL_WIDTH + 1, depth=self.capacity, init=[],
                                attrs=_MARK)
            m.submodules[f"partials{g}"] = mem
            banks.append((mem.read_port(), mem.write_port()))
        ta, tb = Signal(signed(RESIDUAL_WIDTH)), Signal(signed(LEVEL_WIDTH))
        tv, tv2 = Signal(), Signal()
        t_addr, t_addr2 = Signal(aw), Signal(aw)
        term = Signal(signed(TERM_WIDTH))
        m.d.sync += [ta.eq(self.bwd_e), tb.eq(self.bwd_second), tv.eq(self.bwd_valid),
                     t_addr.eq(self.bwd_addr)]
        m.d.sync += [term.eq(ta * tb), tv2.eq(tv), t_addr2.eq(t_addr)]
        # Read the partial one cycle ahead of its term, write the sum the next cycle; a lane
        # never sees one feature in two consecutive windows (docs/HARDWARE.md).
        new = Signal(signed(PARTIAL_WIDTH))
        sel = self.sum_bank
        for g, (r, w) in enumerate(banks):
            m.d.comb += [r.addr.eq(Mux(sel == g, t_addr, self.upd_addr)),
                         w.addr.eq(t_addr2), w.en.eq((sel == g) & tv2),
                         w.data.eq(Cat(new, self.tag))]
        x, y = banks[0][0].data, banks[1][0].data
        summed = Mux(sel, y, x)
        read = Mux(sel, x, y)
        current = summed[PARTIAL_WIDTH] == self.tag
        finished = read[PARTIAL_WIDTH] != self.tag      # written by the previous batch
        m.d.comb += [new.eq(Mux(current, summed[:PARTIAL_WIDTH], 0) + term),
                     self.partial.eq(Mux(finished, read[:PARTIAL_WIDTH], 0))]
        return m
