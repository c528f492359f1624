"""The update unit of engine v2: a feature's batch gradient and model word in, the new model
word and its forward operand out (``docs/ENGINE.md``, stage 6 and "Engine v2"; the golden
model's ``_update``).  ``U = W/32`` units run side by side, unit ``u`` taking model words
``m = u (mod U)``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zipsgd.spec.engine import DECAY_FRAC, DECAY_WIDTH, MODEL_STORAGE_WIDTH
from zipsgd.spec.engine2 import FORWARD_WIDTH
from zipsgd.spec.fixed import RAND_BITS, RoundingMode

from ..arith import Product, Rounder, format_limits, format_tests, round_saturate

__all__ = ["UpdateUnit", "LATENCY"]

#: Cycles from the inputs to the outputs: gradient step (3), difference, the saturation's tests
#: and choice, decay product (2), decay rounding (2), difference, threshold, forward operand
#: (3) and its clamp.
LATENCY = 16


class UpdateUnit(wiring.Component):
    """One model word per cycle.  Settings (fixed while busy): ``update_shift`` (``FL_e + 8 -
    FL_m``), ``forward_shift`` (``FL_m - FL_f``), ``model_width``, ``rounding``, ``decay``,
    ``threshold``."""

    def __init__(self, gradient_width: int):
        self.gradient_width = gradient_width
        super().__init__({
            "valid": In(1), "gradient": In(signed(gradient_width)),
            "word": In(signed(MODEL_STORAGE_WIDTH)), "rand": In(2 * RAND_BITS),
            "update_shift": In(6), "forward_shift": In(5), "model_width": In(6),
            "rounding": In(2), "decay": In(DECAY_WIDTH), "threshold": In(31),
            "out_valid": Out(1), "new_word": Out(signed(MODEL_STORAGE_WIDTH)),
            "forward": Out(signed(FORWARD_WIDTH)),
            "model_clipped": Out(1), "forward_clipped": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        mw = MODEL_STORAGE_WIDTH

        def delay(value, cycles, name):
            for i in range(cycles):
                nxt = Signal.like(value, name=f"{name}_d{i}")
                m.d.sync += nxt.eq(value)
                value = nxt
            return value

        # 1. step = round_m(G, update_shift) (low random bits), clamped to mw + 2 bits (a step
        # beyond that takes any word past every format, and so does its clamp: the
        # difference's carry chain stays short).
        step, _, lat1 = round_saturate(m, self.gradient, self.update_shift, self.rounding,
                                       self.rand[:RAND_BITS], mw + 2, "step")
        word1 = delay(self.word, lat1, "word")
        high1 = delay(self.rand[RAND_BITS:], lat1, "rand_high")
        # 2. x1 = sat_WLm(x - step): the difference, then the clamp (the limits are registers:
        # the format is a setting).
        hi, lo = format_limits(m, self.model_width, mw, "model")
        hi_r, lo_r = Signal.like(hi), Signal.like(lo)
        m.d.sync += [hi_r.eq(hi), lo_r.eq(lo)]
        diff = Signal(signed(mw + 3))
        m.d.sync += diff.eq(word1 - step)
        # (The clamp's tests, then its choice: a cycle each.)
        over_r, under_r, diff_r = Signal(), Signal(), Signal.like(diff)
        over, under = format_tests(diff, hi_r)
        m.d.sync += [over_r.eq(over), under_r.eq(under), diff_r.eq(diff)]
        x1r, clip_r = Signal(signed(mw)), Signal()
        m.d.sync += [x1r.eq(Mux(over_r, hi_r, Mux(under_r, lo_r, diff_r))[:mw]),
                     clip_r.eq(over_r | under_r)]
        high2 = delay(high1, 3, "rand_high2")
        # 3. x2 = x1 - round_m(eta x1, 24) (high random bits); eta < 1, so |x2| <= |x1|.
        eta = Signal(signed(DECAY_WIDTH + 1))
        m.d.sync += eta.eq(Cat(self.decay, Const(0, 1)).as_signed())
        product = Product(m, x1r, eta, "decay_mul", platform)
        x1p, high3 = delay(x1r, product.latency, "x1"), delay(high2, product.latency, "rand_high3")
        decay_rounder = Rounder(m, DECAY_FRAC, self.rounding, DECAY_FRAC, "decay")
        decay, lat3 = decay_rounder.pipelined(m, product.value, high3, "decay")
        x1q = delay(x1p, lat3, "x1q")
        x2 = Signal(signed(mw + 1))
        m.d.sync += x2.eq(x1q - decay)
        # 4. x3 = sign(x2) max(|x2| - tau, 0).
        x3 = Signal(signed(mw))
        tau = Signal.like(self.threshold)
        m.d.sync += tau.eq(self.threshold)
        shrunk_pos, shrunk_neg = x2 - tau, x2 + tau
        m.d.sync += x3.eq(Mux(x2[-1], Mux(shrunk_neg[-1], shrunk_neg, 0),
                              Mux(shrunk_pos[-1], 0, shrunk_pos)))
        # 5. x_f = sat_18(round_half_even(x3, FL_m - FL_f)).
        forward, fclip, lat5 = round_saturate(m, x3, self.forward_shift,
                                              Const(RoundingMode.HALF_EVEN, 2),
                                              Const(0, RAND_BITS), FORWARD_WIDTH, "fwd")
        x3d = delay(x3, lat5, "x3")
        middle = product.latency + lat3 + 1 + 1
        valid = delay(self.valid, lat1 + 3 + middle + lat5, "valid")
        mclip = delay(clip_r, middle + lat5, "mclip")
        # An idle unit's forward operand is 0: the updater writes it for a padding feature.
        m.d.sync += [self.new_word.eq(x3d), self.forward.eq(Mux(valid, forward, 0)),
                     self.forward_clipped.eq(fclip), self.model_clipped.eq(mclip),
                     self.out_valid.eq(valid)]
        assert lat1 + 3 + middle + lat5 + 1 == LATENCY, (lat1, product.latency, lat3, lat5)
        return m
