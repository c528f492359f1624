"""The sample unit of engine v2: a closed dot product and its label in, the scaled residual
``e`` and the loss term out (``docs/ENGINE.md``, "Engine v2"; the golden model's ``_batch``).

One unit per group of eight lanes (a group closes at most one sample per window).  Run-time
shifts (label alignment, loss narrowing, ``e``'s rounding) are settings, fixed while busy.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zipsgd.spec.engine2 import (
    FORWARD_WIDTH,
    LOSS_FRAC,
    LOSS_WIDTH,
    RAW_FEATURE_FRAC2,
    RESIDUAL_MAX,
    RESIDUAL_WIDTH,
    STEP_WIDTH,
)
from zipsgd.spec.fixed import RAND_BITS, RoundingMode
from zipsgd.spec.stream import QUANT_FEATURE_FRAC, QUANT_LABEL_FRAC

from ..arith import Rounder, saturate

__all__ = ["SampleUnit", "LABEL_WIDTH", "LATENCY"]

#: A label word: quantized ``<11, 9>`` or raw ``<18, 16>``, sign-extended to 18 bits.
LABEL_WIDTH = FORWARD_WIDTH
#: Cycles from a sample's inputs to its outputs: the residual, the product and the three
#: stages of ``e``'s rounding and clamp.
LATENCY = 5
#: Most a label is shifted right (raw labels with ``FL_f < 8``): ``16 - (8 + 1)``.
_RIGHT = 7


class SampleUnit(wiring.Component):
    """``r = d - align(Y)``; ``e = sat(round_m(a r, s))``; the loss term ``sat(rne(r))**2``.

    Outputs are those of the inputs ``LATENCY`` cycles earlier (``valid`` follows along).
    """

    def __init__(self, dot_width: int):
        self.dot_width = dot_width
        super().__init__({
            "valid": In(1), "dot": In(signed(dot_width)), "label": In(signed(LABEL_WIDTH)),
            "rand": In(RAND_BITS),
            "raw": In(1), "forward_frac": In(5), "step": In(STEP_WIDTH),
            "residual_shift": In(6), "rounding": In(2),
            "out_valid": Out(1),
            "e": Out(signed(RESIDUAL_WIDTH)), "e_clipped": Out(1),
            "loss": Out(2 * LOSS_WIDTH), "loss_clipped": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        dw = self.dot_width
        # Stage 1: the label at 8 + FL_f fraction bits: Y * 2**t with t = FL_f - 1 (quantized,
        # 9 fraction bits) or FL_f - 8 (raw, 16), as (Y << (t + 7)) >> 7 (floor).
        t7 = Signal(5)
        raw_t7 = self.forward_frac + _RIGHT + QUANT_FEATURE_FRAC - RAW_FEATURE_FRAC2
        quant_t7 = self.forward_frac + _RIGHT + QUANT_FEATURE_FRAC - QUANT_LABEL_FRAC
        m.d.comb += t7.eq(Mux(self.raw, raw_t7, quant_t7))
        aligned = Signal(signed(LABEL_WIDTH + 24))
        m.d.comb += aligned.eq((self.label << t7) >> _RIGHT)
        r = Signal(signed(dw + 1))
        v1, rand1 = Signal(), Signal(RAND_BITS)
        m.d.sync += [r.eq(self.dot - aligned), v1.eq(self.valid), rand1.eq(self.rand)]

        # Stage 2: a * r (the step is unsigned), and the loss residual at LOSS_FRAC bits:
        # FL_d - LOSS_FRAC = FL_f - 5, a left shift (exact) when negative.
        product = Signal(signed(dw + 1 + STEP_WIDTH + 1))
        v2, rand2 = Signal(), Signal(RAND_BITS)
        m.d.sync += [product.eq(r * Cat(self.step, Const(0, 1)).as_signed()),
                     v2.eq(v1), rand2.eq(rand1)]
        excess = LOSS_FRAC - QUANT_FEATURE_FRAC
        right = self.forward_frac >= excess
        even = Rounder(m, Mux(right, self.forward_frac - excess, 0),
                       Const(RoundingMode.HALF_EVEN, 2), 16, "loss")
        narrowed = Signal(signed(dw + 2 + excess))
        m.d.comb += narrowed.eq(even.apply(r, Const(0, RAND_BITS))
                                << Mux(right, 0, excess - self.forward_frac)[:3])
        clamped, clipped = saturate(narrowed, LOSS_WIDTH)
        loss_word, loss_clip = Signal(signed(LOSS_WIDTH)), Signal()
        m.d.sync += [loss_word.eq(clamped), loss_clip.eq(clipped)]
        loss_sq, loss_clip3 = Signal(2 * LOSS_WIDTH), Signal()
        m.d.sync += [loss_sq.eq(loss_word * loss_word), loss_clip3.eq(loss_clip)]

        # Stages 3-5: e = sat_sym(round_m(a r, s)) from the 34-bit window of (a r) 2**(16-s):
        # the floor's 18 bits and the 16 dropped bits below it (docs/HARDWARE.md, "Engine v2").
        rounded, e_clip, latency = self._round_e(m, product, rand2)
        assert 2 + latency == LATENCY
        m.d.comb += [self.e.eq(rounded), self.e_clipped.eq(e_clip)]
        # valid (from stage 2) and the loss term (from stage 3) travel beside the rounder.
        valid, loss, lclip = v2, loss_sq, loss_clip3
        for i in range(latency - 1):
            nv = Signal(name=f"valid_d{i}")
            m.d.sync += nv.eq(valid)
            valid = nv
            if i < latency - 2:
                nl, nc = Signal.like(loss, name=f"loss_d{i}"), Signal(name=f"lclip_d{i}")
                m.d.sync += [nl.eq(loss), nc.eq(lclip)]
                loss, lclip = nl, nc
        m.d.sync += [self.loss.eq(loss), self.loss_clipped.eq(lclip), self.out_valid.eq(valid)]
        return m

    def _round_e(self, m, v, rand):
        """``sat_sym(round_m(v, s))`` in three stages; returns ``(e, clipped, 3)``.

        With ``t = floor(v 2**16 / 2**s)``, bits ``[16, 34)`` of ``t`` are the floor's low 18
        bits (the whole floor when ``v``'s bits from ``s + 17`` up equal its sign) and bits
        ``[0, 16)`` are the top 16 dropped bits.  Half-even needs, besides, whether a lower
        dropped bit is set (``sticky``); stochastic needs nothing lower (its offset's low bits
        are 0): its increment is the carry of ``t[:16] + rand``, the offset aligned to ``t``.
        """
        width = len(v)
        shift, mode = self.residual_shift, self.rounding
        # Stage 3: the window, whether the floor fits 18 bits, the sticky bit; the masks follow
        # the (fixed) shift.
        t = Signal(RESIDUAL_WIDTH + RAND_BITS)
        fits, sticky, low_bits, negative = Signal(), Signal(), Signal(RAND_BITS), Signal()
        # Masks of a fixed shift against constants (no adders): v's bits from s + 17 up, and
        # its bits below s - 16.
        above = Cat(*((shift <= k - (RESIDUAL_WIDTH - 1)) if k >= RESIDUAL_WIDTH - 1
                      else Const(0, 1) for k in range(width - 1)))
        limit = (1 << len(shift)) - 1
        below = Cat(*((shift > k + RAND_BITS) if k + RAND_BITS < limit else Const(0, 1)
                      for k in range(width - 1)))
        sign = v[-1]
        m.d.sync += [
            t.eq((Cat(Const(0, RAND_BITS), v).as_signed() >> shift)[:len(t)]),
            fits.eq(~((v[:-1] ^ sign.replicate(width - 1)) & above).any()),
            sticky.eq((v[:-1] & below).any()),
            # s < 16 drops fewer than 16 bits: the offset's low 16 - s bits are 0.
            low_bits.eq(Cat(*(shift >= RAND_BITS - k for k in range(RAND_BITS))) & rand),
            negative.eq(sign),
        ]
        # Stage 4: the increment.
        dropped, floor = t[:RAND_BITS], t[RAND_BITS:].as_signed()
        half = dropped[-1] & (dropped[:-1].any() | sticky | floor[0])
        carry = (dropped + low_bits)[RAND_BITS]          # the carry out of 16 bits
        inc = Signal()
        floor4, fits4, neg4 = Signal(signed(RESIDUAL_WIDTH)), Signal(), Signal()
        m.d.sync += [inc.eq(Mux(mode == RoundingMode.TRUNCATE, 0,
                                Mux(mode == RoundingMode.HALF_EVEN, half, carry))),
                     floor4.eq(floor), fits4.eq(fits), neg4.eq(negative)]
        # Stage 5: floor + increment, clamped to [-MAX, MAX] (the whole floor when it fits).
        total = floor4 + inc
        e, clipped = Signal(signed(RESIDUAL_WIDTH)), Signal()
        limit = Mux(neg4, -RESIDUAL_MAX, RESIDUAL_MAX)
        over = ~fits4 | (total > RESIDUAL_MAX) | (total < -RESIDUAL_MAX)
        m.d.sync += [e.eq(Mux(over, limit, total[:RESIDUAL_WIDTH])), clipped.eq(over)]
        return e, clipped, 3
