"""Combinational building blocks of the engine's datapath, each the hardware twin of one step in
``zipsgd.spec.fixed`` (``docs/ENGINE.md`` says where each is used).

All functions take and return Amaranth values; they add no registers, so the caller decides the
pipelining.  Widths are explicit: every narrowing below is a documented step, never an implicit
truncation by assignment.
"""

from __future__ import annotations

import functools
import operator

from amaranth.hdl import Cat, Const, Mux, Signal, Value, signed

from ..spec.fixed import RAND_BITS, RoundingMode

__all__ = ["saturate", "saturate_runtime", "format_top", "shift_left_bounded", "Rounder",
           "rotate", "popcount"]


def saturate(value: Value, width: int) -> tuple[Value, Value]:
    """Clamp a signed ``value`` to ``width`` bits; returns ``(clamped, clipped)``.  ``width``
    is a Python int (a build-time width)."""
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    over, under = value > hi, value < lo
    clamped = Mux(over, Const(hi, signed(width)), Mux(under, Const(lo, signed(width)),
                                                       value[:width].as_signed()))
    return clamped, over | under


def shift_left_bounded(value: Value, amount: Value, width: int) -> Value:
    """``(value << amount)`` cut to ``width`` bits, built as a log-depth shifter whose every
    stage is ``width`` bits (Amaranth's ``<<`` by a signal widens by ``2**len(amount)``)."""
    current = value.as_unsigned()[:width] if len(value) >= width else \
        Cat(value.as_unsigned(), Const(0, width - len(value)))
    for stage in range(len(amount)):
        step = 1 << stage
        if step >= width:
            current = Mux(amount[stage], Const(0, width), current)
        else:
            current = Mux(amount[stage], Cat(Const(0, step), current[: width - step]), current)
    return current


def format_top(m, width: Value, max_width: int, name: str) -> Signal:
    """A signal holding ``2**(width - 1)`` for a run-time format width (shared by every lane
    that saturates to that format: expressions are not shared, signals are)."""
    top = Signal(max_width + 1, name=name)
    m.d.comb += top.eq(shift_left_bounded(Const(1, 1), (width - 1)[: len(width)], max_width + 1))
    return top


def saturate_runtime(value: Value, top: Value, max_width: int) -> tuple[Value, Value]:
    """Clamp a signed ``value`` to the run-time format whose ``2**(width-1)`` is ``top``
    (:func:`format_top`); returns ``(clamped, clipped)``, ``clamped`` ``max_width`` bits."""
    v = value.as_signed()
    over, under = v > (top - 1), v < -top
    clamped = Mux(over, top - 1, Mux(under, -top, v))
    return clamped[:max_width].as_signed(), over | under


class Rounder:
    """``zipsgd.spec.fixed.shift_right`` in hardware for one shift amount shared by many lanes.

    Built once per shift (a run-time signal or a Python int) and rounding mode; the masks that
    depend only on the shift are signals made here, so each lane adds only its own shifter and
    comparator.  ``apply(value, rand)`` divides signed ``value`` by ``2**shift`` and rounds by
    the mode (truncate, round-half-even, stochastic with ``rand``: ``RAND_BITS`` uniform bits).
    ``value`` must be wider than ``max_shift``; the result is one bit wider than ``value``.
    """

    def __init__(self, m, shift, mode: Value, max_shift: int, name: str):
        self.mode = mode
        self.max_shift = max_shift
        span = self.span = max_shift + 1
        if isinstance(shift, int):
            self.shift = Const(shift, range(max_shift + 1))
            self.mask = Const((1 << shift) - 1, span)
            self.half = Const((1 << (shift - 1)) if shift else 0, span)
            self.is_zero = Const(int(shift == 0), 1)
        else:
            self.shift = Signal(len(shift), name=f"{name}_shift")
            self.mask = Signal(span, name=f"{name}_mask")
            self.half = Signal(span, name=f"{name}_half")
            self.is_zero = Signal(name=f"{name}_zero")
            m.d.comb += [self.shift.eq(shift),
                         self.mask.eq(Cat(*(self.shift > k for k in range(span)))),
                         self.half.eq(Cat(*(self.shift == k + 1 for k in range(span)))),
                         self.is_zero.eq(self.shift == 0)]

    def apply(self, value: Value, rand: Value) -> Value:
        v = value.as_signed()
        width = len(v)
        assert width > self.max_shift, "Rounder: value must be wider than the largest shift"
        floor = v >> self.shift
        dropped = v.as_unsigned()[: self.span] & self.mask
        up = (dropped > self.half) | ((dropped == self.half) & floor[0])
        half_even = Mux(self.is_zero, v, floor + up)
        # Stochastic: the random bits aligned with the dropped ones, (rand << shift) >> 16.
        if isinstance(self.shift, Const):
            offset = Cat(Const(0, self.shift.value), rand)[RAND_BITS:] if self.shift.value \
                else Const(0, 1)
        else:
            offset = shift_left_bounded(rand, self.shift, self.span + RAND_BITS)[RAND_BITS:]
        stochastic = (v + offset) >> self.shift
        result = Mux(self.mode == RoundingMode.TRUNCATE, floor,
                     Mux(self.mode == RoundingMode.HALF_EVEN, half_even, stochastic))
        return result[: width + 1].as_signed()


def rotate(m, values: list[Value], amount: Value, name: str) -> list[Signal]:
    """``out[i] = values[(i + amount) mod n]`` for a power-of-two ``n``: a log-depth barrel
    rotator (``amount`` at least ``log2(n)`` bits; higher bits are ignored).  Every stage is a
    set of signals, so later uses of the outputs do not repeat the multiplexers."""
    n = len(values)
    assert n & (n - 1) == 0, "rotate needs a power-of-two count"
    select = Signal(max(1, n.bit_length() - 1), name=f"{name}_amount")
    m.d.comb += select.eq(amount)
    current = list(values)
    for stage in range(n.bit_length() - 1):
        step = 1 << stage
        shape = values[0].shape()
        nxt = [Signal(shape, name=f"{name}_s{stage}_{i}") for i in range(n)]
        m.d.comb += [nxt[i].eq(Mux(select[stage], current[(i + step) % n], current[i]))
                     for i in range(n)]
        current = nxt
    if n == 1:
        out = Signal(values[0].shape(), name=f"{name}_0")
        m.d.comb += out.eq(values[0])
        current = [out]
    return current


def popcount(bits: Value) -> Value:
    return functools.reduce(operator.add, [bits[i] for i in range(len(bits))], Const(0, 1)) \
        if len(bits) else Const(0, 1)


