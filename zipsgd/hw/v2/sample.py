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

from ..arith import Product, Rounder, delay_line, replicas, saturate

__all__ = ["SampleUnit", "LABEL_WIDTH", "LATENCY"]

#: A label word: quantized ``<11, 9>`` or raw ``<18, 16>``, sign-extended to 18 bits.
LABEL_WIDTH = FORWARD_WIDTH
#: Cycles from a sample's inputs to its outputs: the aligned label, the residual, then the
#: loss's rounding (3), shift, clamp and square (1), beside ``e``'s product and rounding.
LATENCY = 8
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
        # 9 fraction bits) or FL_f - 8 (raw, 16), as (Y << (t + 7)) >> 7 (floor).  (The shift
        # follows the settings a cycle late: they hold still while busy.)
        t7 = Signal(5)
        raw_t7 = self.forward_frac + _RIGHT + QUANT_FEATURE_FRAC - RAW_FEATURE_FRAC2
        quant_t7 = self.forward_frac + _RIGHT + QUANT_FEATURE_FRAC - QUANT_LABEL_FRAC
        m.d.sync += t7.eq(Mux(self.raw, raw_t7, quant_t7))
        aligned, dot = Signal(signed(LABEL_WIDTH + 24)), Signal(signed(dw))
        m.d.sync += [aligned.eq((self.label << t7) >> _RIGHT), dot.eq(self.dot)]
        # Stage 2: the residual.
        # (Two copies: one for e's product, one for the loss's rounding.)
        residual = Signal(signed(dw + 1))
        m.d.comb += residual.eq(dot - aligned)
        r, r_loss = replicas(m, "r", residual, 2)
        # e: a * r (the step is unsigned), then its rounding and clamp.
        product = Product(m, r, Cat(self.step, Const(0, 1)).as_signed(), "residual_mul",
                          platform)
        rand = delay_line(m, self.rand, 2 + product.latency, "rand")
        rounded, e_clip, e_latency = self._round_e(m, product.value, rand)
        e_latency += product.latency
        # The loss residual at LOSS_FRAC bits: FL_d - LOSS_FRAC = FL_f - 5, rounded half-even
        # when positive, a left shift (exact) when negative; clamped, then squared.
        excess = LOSS_FRAC - QUANT_FEATURE_FRAC
        right = self.forward_frac >= excess
        # (Shifts from the settings are registers: a setting's arithmetic has its own cycle.)
        loss_shift = Signal(5)
        m.d.sync += loss_shift.eq(Mux(right, self.forward_frac - excess, 0))
        even = Rounder(m, loss_shift, Const(RoundingMode.HALF_EVEN, 2), 16, "loss")
        loss_r, round_latency = even.pipelined(m, r_loss, Const(0, RAND_BITS), "loss")
        left = Signal(3)
        m.d.sync += left.eq(Mux(right, 0, excess - self.forward_frac))
        narrowed = Signal(signed(dw + 2 + excess))
        m.d.sync += narrowed.eq(loss_r << left)
        clamped, clipped = saturate(narrowed, LOSS_WIDTH)
        loss_word, loss_clip = Signal(signed(LOSS_WIDTH)), Signal()
        m.d.sync += [loss_word.eq(clamped), loss_clip.eq(clipped)]
        square = Product(m, loss_word, loss_word, "loss_square", platform)
        loss_latency = round_latency + 2 + square.latency
        assert 2 + max(e_latency, loss_latency) == LATENCY
        # Each path waits for the longer one.
        m.d.comb += [self.e.eq(delay_line(m, rounded, LATENCY - 2 - e_latency, "e")),
                     self.e_clipped.eq(delay_line(m, e_clip, LATENCY - 2 - e_latency,
                                                  "e_clip"))]
        m.d.comb += [self.loss.eq(delay_line(m, square.value.as_unsigned(),
                                             LATENCY - 2 - loss_latency, "loss")),
                     self.loss_clipped.eq(delay_line(m, loss_clip,
                                                     LATENCY - 2 - round_latency - 2, "lclip"))]
        m.d.comb += self.out_valid.eq(delay_line(m, self.valid, LATENCY, "valid"))
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
        mode = self.rounding
        # The shift's own copies (a setting): the window's shifter's selects fan out widely.
        shift = replicas(m, "e_shift", self.residual_shift, 1)[0]
        # Stage 3: the window, whether the floor fits 18 bits, the sticky bit; the masks follow
        # the (fixed) shift.
        t = Signal(RESIDUAL_WIDTH + RAND_BITS)
        fits, sticky, low_bits, negative = Signal(), Signal(), Signal(RAND_BITS), Signal()
        # Masks of the (fixed) shift, registers (no comparator stands before a stage): v's
        # bits from s + 17 up, its bits below s - 16, and the offset's bits that are used.
        limit = (1 << len(shift)) - 1
        above, below = Signal(width - 1, name="e_above"), Signal(width - 1, name="e_below")
        offset_mask = Signal(RAND_BITS, name="e_offset_mask")
        m.d.sync += [
            above.eq(Cat(*((shift <= k - (RESIDUAL_WIDTH - 1)) if k >= RESIDUAL_WIDTH - 1
                           else Const(0, 1) for k in range(width - 1)))),
            below.eq(Cat(*((shift > k + RAND_BITS) if k + RAND_BITS < limit else Const(0, 1)
                           for k in range(width - 1)))),
            offset_mask.eq(Cat(*(shift >= RAND_BITS - k for k in range(RAND_BITS)))),
        ]
        sign = v[-1]
        m.d.sync += [
            t.eq((Cat(Const(0, RAND_BITS), v).as_signed() >> shift)[:len(t)]),
            fits.eq(~((v[:-1] ^ sign.replicate(width - 1)) & above).any()),
            sticky.eq((v[:-1] & below).any()),
            # s < 16 drops fewer than 16 bits: the offset's low 16 - s bits are 0.
            low_bits.eq(offset_mask & rand),
            negative.eq(sign),
        ]
        # Stage 4: the increment.
        dropped, floor = t[:RAND_BITS], t[RAND_BITS:].as_signed()
        half = dropped[-1] & (dropped[:-1].any() | sticky | floor[0])
        carry = (dropped + low_bits)[RAND_BITS]          # the carry out of 16 bits
        inc = Signal()
        floor4, fits4, neg4 = Signal(signed(RESIDUAL_WIDTH)), Signal(), Signal()
        # (An 18-bit floor plus 0 or 1 passes MAX only from MAX, and is below -MAX only at
        # the floor's least value without an increment: tests of the floor, made here.)
        at_max, at_min = Signal(), Signal()
        m.d.sync += [inc.eq(Mux(mode == RoundingMode.TRUNCATE, 0,
                                Mux(mode == RoundingMode.HALF_EVEN, half, carry))),
                     floor4.eq(floor), fits4.eq(fits), neg4.eq(negative),
                     at_max.eq(floor == RESIDUAL_MAX), at_min.eq(floor == -RESIDUAL_MAX - 1)]
        # Stage 5: floor + increment, clamped to [-MAX, MAX] (the whole floor when it fits).
        total = floor4 + inc
        e, clipped = Signal(signed(RESIDUAL_WIDTH)), Signal()
        limit = Mux(neg4, -RESIDUAL_MAX, RESIDUAL_MAX)
        over = ~fits4 | (inc & at_max) | (~inc & at_min)
        m.d.sync += [e.eq(Mux(over, limit, total[:RESIDUAL_WIDTH])), clipped.eq(over)]
        return e, clipped, 3
