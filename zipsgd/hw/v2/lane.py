"""One lane of engine v2: level lookup, forward product, gradient term and the lane's memories.

Lane ``k`` handles stream positions ``k mod L`` (``docs/HARDWARE.md``, "Engine v2").  Its
memories hold the data of the features that reach it, at the address the sequencer gives:

* the level table (2048 x 9): per-feature tables (b <= 4) at ``i * 128 + address``, or one
  shared table at ``i``; a field's two possible levels ``l_i`` and ``l_(i+1)`` are the two read
  ports, and ``l_(2^b)`` is +256 without a read;
* the forward operands, two buffers (the update units fill the one not read);
* two gradient-partial memories, one summed into (per sample, by its batch) while the update
  reads the other; a word carries bit 1 of its batch's index, and a word of an older batch
  reads as 0, so nothing is ever cleared.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from zipsgd.spec.engine2 import FORWARD_WIDTH, PARTIAL_WIDTH, PRODUCT_LOG2, RESIDUAL_WIDTH
from zipsgd.spec.stream import LEVEL_ONE

from ..core import UNUSED_COLLISION_ATTRIBUTE
from .gearbox import SLOT_WIDTH

__all__ = ["Lane", "LEVEL_WIDTH", "TABLE_WIDTH", "TABLE_DEPTH", "TABLE_FEATURES",
           "PRODUCT_WIDTH", "FORWARD_LATENCY"]

#: A level word ``<10, 8>`` in [-256, 256]; a table stores ``l_0 .. l_(2^b - 1)`` in
#: [-256, 255] (9 bits): ``l_(2^b)`` is always +256.
LEVEL_WIDTH = 10
TABLE_WIDTH = 9
TABLE_DEPTH = 2048
#: Features a lane's per-feature tables hold (b <= 4: 16 words each).
TABLE_FEATURES = TABLE_DEPTH // 16
#: ``F1 * x_f`` and ``e * F2``: |value| <= 2**25 (2**25 itself needs the 27th bit).
PRODUCT_WIDTH = PRODUCT_LOG2 + 2
#: Cycles from ``fwd`` to ``product`` (``first``, ``second`` one cycle earlier).
FORWARD_LATENCY = 3
_MARK = {UNUSED_COLLISION_ATTRIBUTE: 1}


class Lane(wiring.Component):
    """A lane's datapath and memories.

    Settings (held while busy): ``index_mask`` = ``2**b - 1``, ``bit_select`` one-hot of ``b``
    (bit ``b - 1`` set), ``double``, ``per_feature`` (level tables per feature), ``buffer``
    (the forward-operand buffer read), ``raw`` (raw lanes only: ``raw_word`` replaces F1).
    """

    def __init__(self, capacity: int, raw: bool = False):
        self.capacity = capacity
        self.raw_lane = raw
        aw = self.addr_width = (capacity - 1).bit_length()
        super().__init__({
            "index_mask": In(8), "bit_select": In(8), "double": In(1), "per_feature": In(1),
            "buffer": In(1), "raw": In(1),
            # The forward pass.
            "fwd_valid": In(1), "fwd_slot": In(SLOT_WIDTH), "fwd_addr": In(aw),
            "raw_word": In(signed(FORWARD_WIDTH)),
            "first": Out(signed(LEVEL_WIDTH)), "second": Out(signed(LEVEL_WIDTH)),
            "product": Out(signed(PRODUCT_WIDTH)), "product_valid": Out(1),
            # The gradient pass.
            "bwd_valid": In(1), "bwd_second": In(signed(LEVEL_WIDTH)),
            "bwd_e": In(signed(RESIDUAL_WIDTH)), "bwd_addr": In(aw),
            "bwd_bank": In(1), "bwd_tag": In(1),
            # The update pass reads memory ``upd_bank`` (words tagged ``upd_tag``).
            "upd_addr": In(aw), "upd_bank": In(1), "upd_tag": In(1),
            "partial": Out(signed(PARTIAL_WIDTH)),
            # Writes: forward operands from the update units, levels from the host.
            "xf_we": In(1), "xf_addr": In(aw + 1), "xf_data": In(signed(FORWARD_WIDTH)),
            "cb_we": In(1), "cb_addr": In(11), "cb_data": In(signed(TABLE_WIDTH)),
        })

    def elaborate(self, platform):
        m = Module()
        self._forward(m)
        self._gradient(m)
        return m

    def _forward(self, m):
        slot = self.fwd_slot
        index = Signal(8)
        m.d.comb += index.eq(slot[:8] & self.index_mask)
        s1 = Cat(*(self.bit_select[k] & slot[k + 1] for k in range(8))).any()
        s2_double = Cat(*(self.bit_select[k] & slot[k + 2] for k in range(8))).any()
        s2 = Mux(self.double, s2_double, s1)
        top = index == self.index_mask               # the last interval: l_(i+1) = +1
        feature = Cat(self.fwd_addr, Const(0, 7))[:7]       # the table's feature slot
        lo_addr = Mux(self.per_feature, Cat(feature, index[:4]), index)
        hi_addr = Mux(self.per_feature, Cat(feature, index[:4] + 1), index + 1)

        m.submodules.levels = levels = memory.Memory(shape=signed(TABLE_WIDTH),
                                                     depth=TABLE_DEPTH, init=[], attrs=_MARK)
        la, lw, lb = levels.read_port(), levels.write_port(), levels.read_port()
        m.d.comb += [la.addr.eq(Mux(self.cb_we, self.cb_addr, lo_addr)), lb.addr.eq(hi_addr),
                     lw.addr.eq(la.addr), lw.en.eq(self.cb_we), lw.data.eq(self.cb_data)]
        m.submodules.forward = words = memory.Memory(shape=signed(FORWARD_WIDTH),
                                                     depth=2 * self.capacity, init=[],
                                                     attrs=_MARK)
        xr, xw = words.read_port(), words.write_port()
        m.d.comb += [xr.addr.eq(Cat(self.fwd_addr, self.buffer)),
                     xw.addr.eq(self.xf_addr), xw.en.eq(self.xf_we), xw.data.eq(self.xf_data)]

        # Cycle 1: the memories answer; choose each sample's level.
        d_s1, d_s2, d_top, d_valid = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [d_s1.eq(s1), d_s2.eq(s2), d_top.eq(top), d_valid.eq(self.fwd_valid)]
        upper = Mux(d_top, LEVEL_ONE, lb.data)
        m.d.sync += [self.first.eq(Mux(d_s1, upper, la.data)),
                     self.second.eq(Mux(d_s2, upper, la.data))]
        operand = Signal(signed(FORWARD_WIDTH))
        v2 = Signal()
        m.d.sync += [operand.eq(xr.data), v2.eq(d_valid)]
        if self.raw_lane:
            # The raw word arrives with the slot: two registers put it beside ``first``.
            raw1, raw2 = Signal(signed(FORWARD_WIDTH)), Signal(signed(FORWARD_WIDTH))
            m.d.sync += [raw1.eq(self.raw_word), raw2.eq(raw1)]
            f1 = Mux(self.raw, raw2, self.first)
        else:
            f1 = self.first
        # Cycle 2: the product (one MULT18X18D); raw words carry 8 more fraction bits.
        prod = Signal(signed(2 * FORWARD_WIDTH))
        m.d.sync += [prod.eq(f1 * operand), self.product_valid.eq(v2)]
        m.d.comb += self.product.eq(Mux(self.raw, prod >> 8, prod) if self.raw_lane else prod)

    def _gradient(self, m):
        aw = self.addr_width
        banks = []
        for g in range(2):
            mem = memory.Memory(shape=PARTIAL_WIDTH + 1, depth=self.capacity, init=[],
                                attrs=_MARK)
            m.submodules[f"partials{g}"] = mem
            banks.append((mem.read_port(), mem.write_port()))
        # Cycle 1: the operands (the multiplier's input registers) and the partial's read;
        # cycle 2: the term (its output register) and the partial, summed and written.  A
        # lane never meets one feature in two consecutive windows (docs/HARDWARE.md), so no
        # read falls in the cycle its word is written.
        e, f2 = Signal(signed(RESIDUAL_WIDTH)), Signal(signed(LEVEL_WIDTH))
        v1, addr1, bank1, tag1 = Signal(), Signal(aw), Signal(), Signal()
        m.d.sync += [e.eq(self.bwd_e), f2.eq(self.bwd_second), v1.eq(self.bwd_valid),
                     addr1.eq(self.bwd_addr), bank1.eq(self.bwd_bank), tag1.eq(self.bwd_tag)]
        product = Signal(signed(RESIDUAL_WIDTH + LEVEL_WIDTH))
        v2, addr2, bank2, tag2 = Signal(), Signal(aw), Signal(), Signal()
        m.d.sync += [product.eq(e * f2), v2.eq(v1), addr2.eq(addr1), bank2.eq(bank1),
                     tag2.eq(tag1)]
        term = Mux(self.raw, product >> 8, product) if self.raw_lane else product
        new = Signal(signed(PARTIAL_WIDTH))
        for g, (r, w) in enumerate(banks):
            m.d.comb += [r.addr.eq(Mux(v1 & (bank1 == g), addr1, self.upd_addr)),
                         w.addr.eq(addr2), w.en.eq(v2 & (bank2 == g)),
                         w.data.eq(Cat(new, tag2))]
        old = Mux(bank2, banks[1][0].data, banks[0][0].data)
        m.d.comb += new.eq(Mux(old[PARTIAL_WIDTH] == tag2, old[:PARTIAL_WIDTH], 0) + term)
        # The update's word: read with the address of the cycle before.
        upd_tag1, upd_bank1 = Signal(), Signal()
        m.d.sync += [upd_tag1.eq(self.upd_tag), upd_bank1.eq(self.upd_bank)]
        read = Mux(upd_bank1, banks[1][0].data, banks[0][0].data)
        m.d.comb += self.partial.eq(Mux(read[PARTIAL_WIDTH] == upd_tag1,
                                        read[:PARTIAL_WIDTH], 0))
