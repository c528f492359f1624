"""One lane of engine v2: level lookup, forward product, gradient term and the lane's memories.

Lane ``k`` handles stream positions ``k mod L`` (``docs/HARDWARE.md``, "Engine v2").  Its
memories hold the data of the features that reach it, at the address the sequencer gives:

* the level table (2048 x 9): per-feature tables (b <= 4) at ``i * 128 + address``, or one
  shared table at ``i``; a field's two possible levels ``l_i`` and ``l_(i+1)`` are the two read
  ports, and ``l_(2^b)`` is +256 without a read;
* the forward operands, two buffers (the update units fill the one not read);
* two gradient-partial memories, one summed into (per sample, by its batch) while the update
  reads the other; the update clears each word it reads (``upd_both``: in both memories), so
  a batch's first term at a word adds to 0.  A word may be summed into again only
  ``PARTIAL_REUSE`` cycles after its last term (nothing is forwarded: the core's sub-words
  keep to that).

A field that is not valid (``fwd_valid`` low, given one cycle after the field's slot and
address, so that the engine's pass control has a cycle to decide it) gives the product 0, so
masked lanes add nothing to the segmented sum.  Every block-RAM read goes straight into a
flip-flop (a DP16KD's clock to output takes most of a cycle: ``docs/HARDWARE.md``, "Engine v2:
timing").
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from zipsgd.spec.engine2 import (
    FORWARD_WIDTH,
    PARTIAL_WIDTH,
    PRODUCT_LOG2,
    RAW_PRODUCT_SHIFT2,
    RESIDUAL_WIDTH,
)
from zipsgd.spec.stream import LEVEL_ONE

from ..arith import REPLICA_ATTRIBUTE, limb_product
from ..core import UNUSED_COLLISION_ATTRIBUTE
from .gearbox import SLOT_WIDTH, raw_clamp, raw_round

__all__ = ["Lane", "LEVEL_WIDTH", "TABLE_WIDTH", "TABLE_DEPTH", "TABLE_FEATURES",
           "PRODUCT_WIDTH", "FORWARD_LATENCY", "PARTIAL_LATENCY", "GRADIENT_LATENCY"]

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
FORWARD_LATENCY = 6
#: Cycles from ``upd_addr`` to that word on ``partial`` (the lane's address register, the
#: read, the word's register).
PARTIAL_LATENCY = 3
#: Cycles from ``bwd`` after which a read gets its term: 5 (the input registers and the four
#: stages of the read-modify-write); 6 keeps the pass records' timing of the cycle model.
GRADIENT_LATENCY = 6
_MARK = {UNUSED_COLLISION_ATTRIBUTE: 1}
#: A register that takes a value every lane gets (a write port, the update's address): each
#: lane keeps its own, which Yosys would otherwise merge into one for every lane's memories.
_OWN = {REPLICA_ATTRIBUTE: 1}
#: Write-enable granularity of a partial word (a DP16KD's byte of nine bits).
_BYTE = 9


class Lane(wiring.Component):
    """A lane's datapath and memories.

    Settings (held while busy): ``index_mask`` = ``2**b - 1``, ``bit_select`` one-hot of ``b``
    (bit ``b - 1`` set), ``double``, ``per_feature`` (level tables per feature), ``raw`` (raw
    lanes only: the raw32 word of ``raw_bits``, its four chunks, replaces F1 and F2).  The
    gradient sums into a word at most once in any ``PARTIAL_REUSE`` cycles.
    ``buffer`` chooses the forward-operand buffer of each field.  ``f2`` is the field's second
    level, beside ``first``, and ``f2_addr`` its address (for the core's replay memory: the
    lane's own registers, beside it, in place of a delay line from the sequencer).  On raw
    lanes ``f2`` (and ``bwd_second``) is the raw word in raw mode and the level times
    ``2**RAW_PRODUCT_SHIFT2`` otherwise: their products always drop that many bits.
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
            "raw_bits": In(32),
            "first": Out(signed(LEVEL_WIDTH)), "second": Out(signed(LEVEL_WIDTH)),
            "f2": Out(signed(self.f2_width(raw))), "f2_addr": Out(aw),
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
        self._forward(m, platform)
        self._gradient(m, platform)
        return m

    def _forward(self, m, platform):
        # Cycle -1: the field, its address, buffer, raw word and validity into flip-flops at
        # the lane's entry (the window stages are a die-crossing route away from the lane's
        # block RAMs; the field's arithmetic starts from here).
        slot, fwd_addr = Signal(SLOT_WIDTH), Signal(self.addr_width)
        buffer, fwd_valid = Signal(attrs=_OWN), Signal()
        m.d.sync += [slot.eq(self.fwd_slot), fwd_addr.eq(self.fwd_addr),
                     buffer.eq(self.buffer), fwd_valid.eq(self.fwd_valid)]
        index = Signal(8)
        m.d.comb += index.eq(slot[:8] & self.index_mask)
        s1 = Cat(*(self.bit_select[k] & slot[k + 1] for k in range(8))).any()
        s2_double = Cat(*(self.bit_select[k] & slot[k + 2] for k in range(8))).any()
        s2 = Mux(self.double, s2_double, s1)
        top = index == self.index_mask               # the last interval: l_(i+1) = +1
        feature = Cat(fwd_addr, Const(0, 7))[:7]            # the table's feature slot
        lo_addr = Mux(self.per_feature, Cat(feature, index[:4]), index)
        hi_addr = Mux(self.per_feature, Cat(feature, index[:4] + 1), index + 1)

        # Cycle 0: every memory's address and write port into flip-flops, which the placer
        # can put beside the block RAM (its pins are a route of their own from anywhere).
        a_lo, a_hi = Signal(11), Signal(11)
        a_x = Signal(self.addr_width + 1)
        cb_we, cb_data = Signal(attrs=_OWN), Signal(signed(TABLE_WIDTH), attrs=_OWN)
        xf_we, xf_addr = Signal(attrs=_OWN), Signal(self.addr_width + 1, attrs=_OWN)
        xf_data = Signal(signed(FORWARD_WIDTH), attrs=_OWN)
        e_s1, e_s2, e_top = Signal(), Signal(), Signal()
        m.d.sync += [a_lo.eq(Mux(self.cb_we, self.cb_addr, lo_addr)), a_hi.eq(hi_addr),
                     a_x.eq(Cat(fwd_addr, buffer)),
                     cb_we.eq(self.cb_we), cb_data.eq(self.cb_data),
                     xf_we.eq(self.xf_we), xf_addr.eq(self.xf_addr), xf_data.eq(self.xf_data),
                     e_s1.eq(s1), e_s2.eq(s2), e_top.eq(top)]

        m.submodules.levels = levels = memory.Memory(shape=signed(TABLE_WIDTH),
                                                     depth=TABLE_DEPTH, init=[], attrs=_MARK)
        la, lw, lb = levels.read_port(), levels.write_port(), levels.read_port()
        m.d.comb += [la.addr.eq(a_lo), lb.addr.eq(a_hi),
                     lw.addr.eq(a_lo), lw.en.eq(cb_we), lw.data.eq(cb_data)]
        m.submodules.forward = words = memory.Memory(shape=signed(FORWARD_WIDTH),
                                                     depth=2 * self.capacity, init=[],
                                                     attrs=_MARK)
        xr, xw = words.read_port(), words.write_port()
        m.d.comb += [xr.addr.eq(a_x),
                     xw.addr.eq(xf_addr), xw.en.eq(xf_we), xw.data.eq(xf_data)]

        # Cycle 1: the memories' words into flip-flops (an invalid field's operand is 0: the
        # register's synchronous reset).
        la1, lb1 = Signal(signed(TABLE_WIDTH)), Signal(signed(TABLE_WIDTH))
        operand1 = Signal(signed(FORWARD_WIDTH))
        d_s1, d_s2, d_top, d_valid = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [d_s1.eq(e_s1), d_s2.eq(e_s2), d_top.eq(e_top)]
        # (One cycle after its slot, so a cycle after the addresses' registers.)
        m.d.sync += d_valid.eq(fwd_valid)
        m.d.sync += [la1.eq(la.data), lb1.eq(lb.data), operand1.eq(Mux(d_valid, xr.data, 0))]
        # Cycle 2: each sample's level.
        s1_2, s2_2, top2 = Signal(), Signal(), Signal()
        m.d.sync += [s1_2.eq(d_s1), s2_2.eq(d_s2), top2.eq(d_top)]
        upper = Mux(top2, LEVEL_ONE, lb1)
        operand = Signal(signed(FORWARD_WIDTH))
        m.d.sync += [self.first.eq(Mux(s1_2, upper, la1)),
                     self.second.eq(Mux(s2_2, upper, la1)), operand.eq(operand1)]
        if self.raw_lane:
            # The raw word's bits arrive with the slot: it is rounded into the first register
            # and clamped into the second (a carry chain each), and two more put it beside
            # ``first``; the multiplier's operand is chosen before its register (a DSP input
            # waits for no look-up).
            rounded = Signal(signed(FORWARD_WIDTH + 1), name="raw1")
            raw = Signal(signed(FORWARD_WIDTH), name="raw2")
            m.d.sync += [rounded.eq(raw_round(self.raw_bits)), raw.eq(raw_clamp(rounded))]
            for i in range(2, 4):
                nxt = Signal(signed(FORWARD_WIDTH), name=f"raw{i + 1}")
                m.d.sync += nxt.eq(raw)
                raw = nxt
            # A level enters the products shifted up by the raw words' extra fraction bits,
            # so that both modes take the same bits of the product (no choice after it).
            raw_f2 = Signal(signed(FORWARD_WIDTH))
            f1 = Signal(signed(FORWARD_WIDTH))
            m.d.sync += [raw_f2.eq(raw),
                         f1.eq(Mux(self.raw, raw, Mux(s1_2, upper, la1) << RAW_PRODUCT_SHIFT2))]
            m.d.comb += self.f2.eq(Mux(self.raw, raw_f2, self.second << RAW_PRODUCT_SHIFT2))
        else:
            f1 = self.first
            m.d.comb += self.f2.eq(self.second)
        # The field's address beside ``f2``: the entry register and four more.
        addr = fwd_addr
        for i in range(FORWARD_LATENCY - 2):
            nxt = Signal(self.addr_width, name=f"f2_addr{i + 1}")
            m.d.sync += nxt.eq(addr)
            addr = nxt
        m.d.comb += self.f2_addr.eq(addr)
        # Cycle 3: the product (one MULT18X18D, its output register); raw lanes' operands carry
        # RAW_PRODUCT_SHIFT2 more fraction bits.
        f1_18 = Signal(signed(FORWARD_WIDTH))
        m.d.comb += f1_18.eq(f1)
        prod = limb_product(m, f1_18, operand, "forward_product", platform)
        m.d.comb += self.product.eq(prod >> RAW_PRODUCT_SHIFT2 if self.raw_lane else prod)

    def _gradient(self, m, platform):
        aw = self.addr_width
        banks = []
        for g in range(2):
            # A word is the partial and a *cleared* flag on top (bit 35), written alone with
            # the top byte's enable: a cleared word reads as 0 whatever its other bits hold.
            mem = memory.Memory(shape=PARTIAL_WIDTH + 1, depth=self.capacity, init=[],
                                attrs=_MARK)
            m.submodules[f"partials{g}"] = mem
            banks.append((mem.read_port(), mem.write_port(granularity=_BYTE)))
        # A term's stages: 1, the operands (the multiplier's inputs) and the word's read;
        # 2, the term (the multiplier's output register) and the word into flip-flops; 3, the
        # sum into a register; 4, its write.  A word is summed into again no sooner than
        # PARTIAL_REUSE terms later (the core's sub-words: HARDWARE.md, "Sums"), so the read
        # always finds the last sum written: nothing is forwarded.
        e, f2 = Signal(signed(RESIDUAL_WIDTH)), Signal.like(self.bwd_second)
        v1, addr1, bank1 = Signal(), Signal(aw), Signal()
        m.d.sync += [e.eq(self.bwd_e), f2.eq(self.bwd_second), v1.eq(self.bwd_valid),
                     addr1.eq(self.bwd_addr), bank1.eq(self.bwd_bank)]
        product = limb_product(m, e, f2, "gradient_product", platform)
        v2, addr2, bank2 = Signal(), Signal(aw), Signal()
        v3, addr3, bank3 = Signal(), Signal(aw), Signal()
        v4, addr4, bank4 = Signal(), Signal(aw), Signal()
        m.d.sync += [v2.eq(v1), addr2.eq(addr1), bank2.eq(bank1),
                     v3.eq(v2), addr3.eq(addr2), bank3.eq(bank2),
                     v4.eq(v3), addr4.eq(addr3), bank4.eq(bank3)]
        term3 = Signal(signed(len(product)))
        m.d.sync += term3.eq(product >> RAW_PRODUCT_SHIFT2 if self.raw_lane else product)
        # The update's address, bank and enable into the lane's own flip-flops (the updater is
        # a die-crossing route away); it reads the word from them and clears it the next cycle
        # (its bank's write port is free: the gradient sums into the other bank), so every
        # batch starts from zero words.
        upd_bank0, upd_enable0 = Signal(attrs=_OWN), Signal(attrs=_OWN)
        upd_addr0, both0 = Signal(aw, attrs=_OWN), Signal(attrs=_OWN)
        m.d.sync += [upd_bank0.eq(self.upd_bank), upd_enable0.eq(self.upd_enable),
                     upd_addr0.eq(self.upd_addr), both0.eq(self.upd_both)]
        upd_bank1, upd_enable1 = Signal(attrs=_OWN), Signal(attrs=_OWN)
        upd_addr1, both1 = Signal(aw, attrs=_OWN), Signal(attrs=_OWN)
        m.d.sync += [upd_bank1.eq(upd_bank0), upd_enable1.eq(upd_enable0),
                     upd_addr1.eq(upd_addr0), both1.eq(both0)]
        bytes_ = (PARTIAL_WIDTH + 1) // _BYTE
        summed = Signal(signed(PARTIAL_WIDTH))       # stage 4: the sum being written
        words = []
        for g, (r, w) in enumerate(banks):
            summing = v4 & (bank4 == g)
            clearing = upd_enable1 & ((upd_bank1 == g) | both1)
            m.d.comb += [r.addr.eq(Mux(v1 & (bank1 == g), addr1, upd_addr0)),
                         w.addr.eq(Mux(summing, addr4, upd_addr1)),
                         w.en.eq(Mux(summing, (1 << bytes_) - 1,
                                     Mux(clearing, 1 << (bytes_ - 1), 0))),
                         w.data.eq(Cat(summed, ~summing))]
            word = Signal(PARTIAL_WIDTH + 1, name=f"word{g}")
            m.d.sync += word.eq(r.data)
            words.append(word)
        # Stage 3: the read word of the term's bank (0 when cleared) plus the term.
        keep = [(bank3 == g) & ~words[g][PARTIAL_WIDTH] for g in range(2)]
        old = (Mux(keep[0], words[0][:PARTIAL_WIDTH], 0)
               | Mux(keep[1], words[1][:PARTIAL_WIDTH], 0)).as_signed()
        m.d.sync += summed.eq(old + term3)
        # The update's word: read two cycles before (three after its address).
        upd_bank2, upd_enable2 = Signal(attrs=_OWN), Signal(attrs=_OWN)
        m.d.sync += [upd_bank2.eq(upd_bank1), upd_enable2.eq(upd_enable1)]
        read = Mux(upd_bank2, words[1], words[0])
        m.d.comb += self.partial.eq(Mux(upd_enable2 & ~read[PARTIAL_WIDTH],
                                        read[:PARTIAL_WIDTH].as_signed(), 0))
