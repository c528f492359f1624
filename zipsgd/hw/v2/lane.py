"""One lane of engine v2: level lookup, forward product, gradient term and the lane's memories.

Lane ``k`` handles stream positions ``k mod L`` (``docs/HARDWARE.md``, "Engine v2").  Its
memories hold the data of the features that reach it, at the address the sequencer gives:

* the level table (2048 x 9): per-feature tables (b <= 4) at ``i * 128 + address``, or one
  shared table at ``i``; a field's two possible levels ``l_i`` and ``l_(i+1)`` are the two read
  ports, and ``l_(2^b)`` is +256 without a read;
* the forward operands, two buffers (the update units fill the one not read);
* two gradient-partial memories, one summed into (per sample, by its batch) while the update
  reads the other; the update clears each word it reads (``upd_both``: in both memories), so
  a batch's first term at a word adds to 0.

A field that is not valid (``fwd_valid`` low) gives the product 0, so masked lanes add nothing
to the segmented sum.
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
#: Write-enable granularity of a partial word (a DP16KD's byte of nine bits).
_BYTE = 9


class Lane(wiring.Component):
    """A lane's datapath and memories.

    Settings (held while busy): ``index_mask`` = ``2**b - 1``, ``bit_select`` one-hot of ``b``
    (bit ``b - 1`` set), ``double``, ``per_feature`` (level tables per feature), ``raw`` (raw
    lanes only: ``raw_word`` replaces F1 and F2), ``bypass`` (a lane may sum into one partial
    word in consecutive cycles: the word being written is used instead of the stale read).
    ``buffer`` chooses the forward-operand buffer of each field.  ``f2`` is the field's second
    level (the raw word on raw lanes in raw mode), beside ``first``.
    """

    def __init__(self, capacity: int, raw: bool = False):
        self.capacity = capacity
        self.raw_lane = raw
        aw = self.addr_width = (capacity - 1).bit_length()
        super().__init__({
            "index_mask": In(8), "bit_select": In(8), "double": In(1), "per_feature": In(1),
            "buffer": In(1), "raw": In(1), "bypass": In(1),
            # The forward pass.
            "fwd_valid": In(1), "fwd_slot": In(SLOT_WIDTH), "fwd_addr": In(aw),
            "raw_word": In(signed(FORWARD_WIDTH)),
            "first": Out(signed(LEVEL_WIDTH)), "second": Out(signed(LEVEL_WIDTH)),
            "f2": Out(signed(self.f2_width(raw))),
            "product": Out(signed(PRODUCT_WIDTH)), "product_valid": Out(1),
            # The gradient pass.
            "bwd_valid": In(1), "bwd_second": In(signed(self.f2_width(raw))),
            "bwd_e": In(signed(RESIDUAL_WIDTH)), "bwd_addr": In(aw),
            "bwd_bank": In(1),
            # The update pass reads (and then clears) word ``upd_addr`` of memory ``upd_bank``
        # where ``upd_enable`` is set.
            "upd_addr": In(aw), "upd_bank": In(1), "upd_enable": In(1), "upd_both": In(1),
            "partial": Out(signed(PARTIAL_WIDTH)),
            # Writes: forward operands from the update units, levels from the host.
            "xf_we": In(1), "xf_addr": In(aw + 1), "xf_data": In(signed(FORWARD_WIDTH)),
            "cb_we": In(1), "cb_addr": In(11), "cb_data": In(signed(TABLE_WIDTH)),
        })

    @staticmethod
    def f2_width(raw: bool) -> int:
        """Width of a lane's second operand: a level, or a raw word on raw lanes."""
        return FORWARD_WIDTH if raw else LEVEL_WIDTH

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
        # An invalid field multiplies by 0 (a synchronous reset of the operand register).
        m.d.sync += [operand.eq(Mux(d_valid, xr.data, 0)), v2.eq(d_valid)]
        if self.raw_lane:
            # The raw word arrives with the slot: two registers put it beside ``first``.
            raw1, raw2 = Signal(signed(FORWARD_WIDTH)), Signal(signed(FORWARD_WIDTH))
            m.d.sync += [raw1.eq(self.raw_word), raw2.eq(raw1)]
            f1 = Mux(self.raw, raw2, self.first)
            m.d.comb += self.f2.eq(Mux(self.raw, raw2, self.second))
        else:
            f1 = self.first
            m.d.comb += self.f2.eq(self.second)
        # Cycle 2: the product (one MULT18X18D); raw words carry 8 more fraction bits.
        prod = Signal(signed(2 * FORWARD_WIDTH))
        m.d.sync += [prod.eq(f1 * operand), self.product_valid.eq(v2)]
        m.d.comb += self.product.eq(Mux(self.raw, prod >> 8, prod) if self.raw_lane else prod)

    def _gradient(self, m):
        aw = self.addr_width
        banks = []
        for g in range(2):
            # A word is the partial and a *cleared* flag on top (bit 35), written alone with
            # the top byte's enable: a cleared word reads as 0 whatever its other bits hold.
            mem = memory.Memory(shape=PARTIAL_WIDTH + 1, depth=self.capacity, init=[],
                                attrs=_MARK)
            m.submodules[f"partials{g}"] = mem
            banks.append((mem.read_port(), mem.write_port(granularity=_BYTE)))
        # Cycle 1: the operands (the multiplier's input registers) and the partial's read;
        # cycle 2: the term (its output register) and the partial, summed and written.  A
        # lane meets one feature in two consecutive windows only in bypass mode.
        e, f2 = Signal(signed(RESIDUAL_WIDTH)), Signal.like(self.bwd_second)
        v1, addr1, bank1 = Signal(), Signal(aw), Signal()
        m.d.sync += [e.eq(self.bwd_e), f2.eq(self.bwd_second), v1.eq(self.bwd_valid),
                     addr1.eq(self.bwd_addr), bank1.eq(self.bwd_bank)]
        product = Signal(signed(RESIDUAL_WIDTH + len(f2)))
        v2, addr2, bank2 = Signal(), Signal(aw), Signal()
        m.d.sync += [product.eq(e * f2), v2.eq(v1), addr2.eq(addr1), bank2.eq(bank1)]
        term = Mux(self.raw, product >> 8, product) if self.raw_lane else product
        new = Signal(signed(PARTIAL_WIDTH))
        # The update reads a word and clears it the next cycle (its bank's write port is free:
        # the gradient sums into the other bank), so every batch starts from zero words.
        upd_bank1, upd_enable1, upd_addr1, both1 = Signal(), Signal(), Signal(aw), Signal()
        m.d.sync += [upd_bank1.eq(self.upd_bank), upd_enable1.eq(self.upd_enable),
                     upd_addr1.eq(self.upd_addr), both1.eq(self.upd_both)]
        bytes_ = (PARTIAL_WIDTH + 1) // _BYTE
        for g, (r, w) in enumerate(banks):
            summing = v2 & (bank2 == g)
            clearing = upd_enable1 & ((upd_bank1 == g) | both1)
            m.d.comb += [r.addr.eq(Mux(v1 & (bank1 == g), addr1, self.upd_addr)),
                         w.addr.eq(Mux(summing, addr2, upd_addr1)),
                         w.en.eq(Mux(summing, (1 << bytes_) - 1,
                                     Mux(clearing, 1 << (bytes_ - 1), 0))),
                         w.data.eq(Cat(new, ~summing))]
        word = Mux(bank2, banks[1][0].data, banks[0][0].data)
        old = Mux(word[PARTIAL_WIDTH], 0, word[:PARTIAL_WIDTH].as_signed())
        # Bypass mode: the word written last cycle, if this write goes to the same bank (the
        # lane then holds one feature, so the address is the same too).
        written, wrote, wrote_bank = Signal(signed(PARTIAL_WIDTH)), Signal(), Signal()
        m.d.sync += [written.eq(new), wrote.eq(v2), wrote_bank.eq(bank2)]
        forward = self.bypass & wrote & (wrote_bank == bank2)
        m.d.comb += new.eq(Mux(forward, written, old) + term)
        # The update's word: read with the address of the cycle before.
        read = Mux(upd_bank1, banks[1][0].data, banks[0][0].data)
        m.d.comb += self.partial.eq(Mux(upd_enable1 & ~read[PARTIAL_WIDTH],
                                        read[:PARTIAL_WIDTH].as_signed(), 0))
