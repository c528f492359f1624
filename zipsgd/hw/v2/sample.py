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
    RESIDUAL_WIDTH,
    STEP_WIDTH,
)
from zipsgd.spec.fixed import RAND_BITS, RoundingMode
from zipsgd.spec.stream import QUANT_FEATURE_FRAC, QUANT_LABEL_FRAC

from ..arith import Product, delay_line, replicas, round_saturate

__all__ = ["SampleUnit", "LABEL_WIDTH", "LATENCY"]

#: A label word: quantized ``<11, 9>`` or raw ``<18, 16>``, sign-extended to 18 bits.
LABEL_WIDTH = FORWARD_WIDTH
#: Cycles from a sample's inputs to its outputs: the aligned label, the residual, then ``e``'s
#: product (2) and rounding (4), beside the loss word (3) and its square (1).
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
        # (The shift is a setting: its window moves in two cycles of eight positions.)
        rounded, e_clip, e_latency = round_saturate(m, product.value, self.residual_shift,
                                                    self.rounding, rand, RESIDUAL_WIDTH, "e",
                                                    symmetric=True, split=3)
        e_latency += product.latency
        # The loss residual at LOSS_FRAC bits (rounded half-even), clamped, then squared.
        loss_word, loss_clip, narrow_latency = self._narrow_loss(m, r_loss)
        square = Product(m, loss_word, loss_word, "loss_square", platform)
        loss_latency = narrow_latency + square.latency
        assert 2 + max(e_latency, loss_latency) == LATENCY
        # Each path waits for the longer one.
        m.d.comb += [self.e.eq(delay_line(m, rounded, LATENCY - 2 - e_latency, "e")),
                     self.e_clipped.eq(delay_line(m, e_clip, LATENCY - 2 - e_latency,
                                                  "e_clip"))]
        m.d.comb += [self.loss.eq(delay_line(m, square.value.as_unsigned(),
                                             LATENCY - 2 - loss_latency, "loss")),
                     self.loss_clipped.eq(delay_line(m, loss_clip,
                                                     LATENCY - 2 - narrow_latency, "lclip"))]
        m.d.comb += self.out_valid.eq(delay_line(m, self.valid, LATENCY, "valid"))
        return m

    def _narrow_loss(self, m, r):
        """``sat(rne(r, FL_f - 5))`` to ``LOSS_WIDTH`` bits (a left shift by ``5 - FL_f`` when
        ``FL_f < 5``); returns ``(word, clipped, latency)``.

        With ``x = r << 4`` both cases are ``x >> k`` for ``k = FL_f - 1`` in ``0..16`` (the
        four zeros are the bits a left shift brings in, so nothing is rounded then): the one
        rounding of ``arith.round_saturate``, half-even.
        """
        low = 4                                    # the largest left shift: 5 - FL_f, FL_f >= 1
        k = Signal(5, name="loss_k")
        m.d.comb += k.eq(self.forward_frac + low - (LOSS_FRAC - QUANT_FEATURE_FRAC))
        x = Cat(Const(0, low), r).as_signed()
        return round_saturate(m, x, k, Const(RoundingMode.HALF_EVEN, 2), Const(0, RAND_BITS),
                              LOSS_WIDTH, "loss")
