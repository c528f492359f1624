"""Combinational building blocks of the engine's datapath, each the hardware twin of one step in
``zipsgd.spec.fixed`` (``docs/ENGINE.md`` says where each is used).

All functions take and return Amaranth values; they add no registers, so the caller decides the
pipelining.  The exceptions are :class:`Product`, a multiplier that is its own pipeline, and
:meth:`Rounder.pipelined`.  Widths are explicit: every narrowing below is a documented step,
never an implicit truncation by assignment.
"""

from __future__ import annotations

import operator

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Mux, Signal, Value, signed

from ..spec.fixed import RAND_BITS, RoundingMode

__all__ = ["saturate", "saturate_runtime", "saturate_format", "format_tests", "format_top",
           "format_limits",
           "shift_left_bounded", "Rounder", "Product", "rotate", "popcount", "any_of",
           "replicas", "less_than", "above", "REPLICA_ATTRIBUTE"]

#: The wire attribute that marks the registers made by :func:`replicas`; the synthesis script
#: keeps the flip-flops that drive such wires (``zipsgd/hw/synth.py``, ``KEEP_REPLICAS``), which
#: would otherwise be merged back into one (Yosys ``opt_merge``: same input, same cell).
REPLICA_ATTRIBUTE = "zipsgd_replica"


def less_than(a, b) -> Value:
    """``a < b`` for values of any signedness, as the sign of ``a - b`` made one bit wider than
    both (so it never overflows).  On an ECP5 that sign is the carry chain's last sum output:
    Yosys builds ``<`` as a subtraction plus an overflow correction from the chain's last two
    carries, which takes another carry cell and logic after it (``docs/HARDWARE.md``,
    "Comparisons")."""
    def widened(v):
        v = Value.cast(v)
        return v if v.shape().signed else Cat(v, Const(0, 1)).as_signed()

    a, b = widened(a), widened(b)
    width = max(len(a), len(b)) + 1
    return (a.as_signed() - b.as_signed())[width - 1]


def saturate(value: Value, width: int) -> tuple[Value, Value]:
    """Clamp a signed ``value`` to ``width`` bits; returns ``(clamped, clipped)``.  ``width``
    is a Python int (a build-time width)."""
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    # Tests of the top bits (no carry chain): past hi when not negative with one of them set,
    # below lo when negative without all of them set.
    value = value.as_signed()
    top = value[width - 1:]
    over, under = ~top[-1] & top.any(), top[-1] & ~top.all()
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


def format_limits(m, width: Value, max_width: int, name: str) -> tuple[Signal, Signal]:
    """Signals holding the largest and the smallest value of the run-time format of ``width``
    bits: ``(2**(width-1) - 1, -2**(width-1))``, each ``signed(max_width + 1)``.  The caller
    may register them (the engine does: its formats are latched at start), which keeps the
    limits' arithmetic off the saturating stage.

    Each is a table of ``width`` (every bit a function of ``width``'s bits alone, no carry
    chain), equal to ``format_top(width) - 1`` and ``-format_top(width)`` for every value of
    ``width``, the widths outside ``1 .. max_width + 1`` included."""
    # Bit i of top - 1 is k > i for k = (width - 1) mod 2**len(width): width > i + 1 or
    # width == 0; -top is its complement. Bit patterns: HARDWARE.md, "Comparisons".
    if max_width + 2 >= 1 << len(width):
        raise ValueError(f"width needs more than {len(width)} bits for {max_width}")
    hi = Signal(signed(max_width + 1), name=f"{name}_hi")
    lo = Signal(signed(max_width + 1), name=f"{name}_lo")
    bits = [above(width, i + 1) | (width == 0) for i in range(max_width + 1)]
    m.d.comb += [hi.eq(Cat(*bits)), lo.eq(~Cat(*bits))]
    return hi, lo


def above(value: Value, c: int) -> Value:
    """``value > c`` (unsigned ``value``, constant ``c``) as an OR of bit patterns, one per 0
    bit of ``c``: the bits above it equal to ``c``'s, that bit 1, the bits below any (a
    look-up, no carry chain)."""
    n = len(value)
    if c >= 1 << n:
        return Const(0, 1)
    if c < 0:
        return Const(1, 1)
    patterns = []
    for j in range(n):
        if not (c >> j) & 1:
            high = format(c >> (j + 1), f"0{n - j - 1}b") if j + 1 < n else ""
            patterns.append(high + "1" + "-" * j)
    return value.matches(*patterns) if patterns else Const(0, 1)


def saturate_runtime(value: Value, hi: Value, lo: Value, max_width: int) -> tuple[Value, Value]:
    """Clamp a signed ``value`` to the run-time format whose limits are ``hi`` and ``lo``
    (:func:`format_limits`); returns ``(clamped, clipped)``, ``clamped`` ``max_width`` bits."""
    v = value.as_signed()
    over, under = v > hi, v < lo
    clamped = Mux(over, hi, Mux(under, lo, v))
    return clamped[:max_width].as_signed(), over | under


def saturate_format(value: Value, hi: Value, lo: Value, max_width: int) -> tuple[Value, Value]:
    """:func:`saturate_runtime` for the limits of a run-time format (:func:`format_limits`:
    ``hi`` is ones below bit ``w - 1``, ``lo`` its complement), by tests of the bits from
    ``w - 1`` up instead of comparisons: past ``hi`` when not negative with one of them set,
    below ``lo`` when negative without all of them set (an AND and a wide OR, no carry
    chain)."""
    v = value.as_signed()
    over, under = format_tests(v, hi)
    clamped = Mux(over, hi, Mux(under, lo, v))
    return clamped[:max_width].as_signed(), over | under


def format_tests(value: Value, hi: Value) -> tuple[Value, Value]:
    """``(value > hi, value < lo)`` for the limits of a run-time format (:func:`saturate_format`),
    as tests of ``value``'s bits from ``w - 1`` up."""
    v = value.as_signed()
    bits = v.as_unsigned()
    top = ~Cat(hi.as_unsigned(), Const(0, max(0, len(v) - len(hi))))[:len(v)]
    return ~v[-1] & (bits & top).any(), v[-1] & (~bits & top).any()


class Rounder:
    """``zipsgd.spec.fixed.shift_right`` in hardware for one shift amount shared by many lanes.

    Built once per shift (a run-time signal or a Python int) and rounding mode; the masks that
    depend only on the shift are signals made here, so each lane adds only its own shifter and
    comparator.  ``apply(value, rand)`` divides signed ``value`` by ``2**shift`` and rounds by
    the mode (truncate, round-half-even, stochastic with ``rand``: ``RAND_BITS`` uniform bits).
    ``value`` must be wider than ``max_shift``; the result is one bit wider than ``value``.
    """

    def __init__(self, m, shift, mode: Value, max_shift: int, name: str):
        self.name = name
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
        self._registered = None

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

    def _registered_masks(self, m) -> tuple[Value, Value, Value]:
        """``(mask, half, is_zero)`` for the pipelined stages: with a run-time shift, registers
        (made once, shared by every lane) that follow the shift a cycle late, so that no
        comparator stands in front of a rounding stage.  The shift must therefore hold still
        for a cycle before a value enters (the engine's shifts are settings, fixed while
        busy)."""
        if isinstance(self.shift, Const):
            return self.mask, self.half, self.is_zero
        if self._registered is None:
            regs = (Signal(self.span, name=f"{self.name}_mask_r"),
                    Signal(self.span, name=f"{self.name}_half_r"),
                    Signal(name=f"{self.name}_zero_r"))
            m.d.sync += [r.eq(v) for r, v in zip(regs, (self.mask, self.half, self.is_zero),
                                                 strict=True)]
            self._registered = regs
        return self._registered

    def pipelined(self, m, value: Value, rand: Value, name: str) -> tuple[Signal, int]:
        """:meth:`apply` over three clock cycles; returns ``(result, latency)`` (see
        :meth:`_stages`)."""
        result, _, _, latency = self._stages(m, value, rand, name)
        return result, latency

    def pipelined_copies(self, m, value: Value, rand: Value, name: str, copies: int,
                         compare_width: int | None = None) -> tuple[list[Signal], int]:
        """:meth:`pipelined` with ``copies`` result registers (each its own final addition),
        for a result that feeds several carry chains: each chain's copy can be placed beside
        it.  Returns ``(results, latency)``.

        With ``compare_width = k`` the copies after the first are only for comparisons with
        values of at most ``k`` bits (signed): they are the result with ``floor`` first
        clamped to ``k + 1`` bits (``[-2**k, 2**k - 1]``; a test of its top bits, no carry
        chain), which compares with any such value as the result does (a clamped floor's
        result is at least ``2**k - 1`` or at most ``-2**k + 1``, beyond every ``k``-bit
        value either way), with carry chains of ``k + 2`` bits instead of the result's width.
        The clamp is registered in the increment's cycle, beside ``floor``'s copy.  With a
        run-time shift its test is a register made in ``floor``'s cycle from the value itself:
        ``floor``'s bits from ``k`` up equal its sign when the value's bits from ``k + s`` up
        do, against a mask of those positions that follows the shift like the other masks, so
        that the clamp's select, which fans out to ``k + 1`` bits, starts at a flip-flop."""
        result, floor, increment, latency = self._stages(m, value, rand, name)
        source, shape = floor, result.shape()
        if compare_width is not None and compare_width + 2 < len(floor):
            floor1 = self._floor1
            if isinstance(self.shift, Const):
                top = floor1[compare_width:]
                fits = top.all() | ~top.any()
            else:
                v = self._stage1_input
                positions = range(compare_width, len(v) - 1)
                # Bit p - k: position p of the value is in floor's top bits (p >= k + s), that
                # is not mask bit p - k (s > p - k), or always past the mask's span.
                mask = self._registered_masks(m)[0]
                in_top = Cat(*(~mask[p - compare_width] if p - compare_width < self.span
                               else Const(1, 1) for p in positions))
                beyond = Cat(*(v[p] ^ v[-1] for p in positions))
                fits = Signal(name=f"{name}_fits", reset_less=True)
                m.d.sync += fits.eq(~(beyond & in_top).any())
            shape = signed(compare_width + 2)
            source = Signal(signed(compare_width + 1), name=f"{name}_floor_clamped",
                            reset_less=True)
            limit = Mux(floor1[-1], -(1 << compare_width), (1 << compare_width) - 1)
            m.d.sync += source.eq(Mux(fits, floor1[:compare_width + 1], limit))
        results = [result]
        for k in range(1, copies):
            copy = Signal(shape, name=f"{name}_result_dup{k}", reset_less=True,
                          attrs={REPLICA_ATTRIBUTE: 1})
            m.d.sync += copy.eq(source + increment)
            results.append(copy)
        return results, latency

    def pipelined_saturating(self, m, value: Value, rand: Value, hi: Value, lo: Value,
                             lo_minus_one: Value, max_width: int,
                             name: str) -> tuple[Signal, Signal, int]:
        """:meth:`apply`, then :func:`saturate_runtime` to the format of limits ``hi``, ``lo``
        (``lo_minus_one`` is ``lo - 1``), over four clock cycles; returns ``(clamped,
        clipped, latency)``.

        The saturation tests are made from ``floor`` and the increment instead of their sum:
        ``floor + inc > hi`` is ``floor > hi`` or ``inc and floor == hi``; ``floor + inc < lo``
        is ``floor < lo`` unless ``inc and floor == lo - 1``.  The comparisons of ``floor``
        are registered beside the increment, the last rounding stage combines them, and the
        fourth stage only chooses.  Each comparison is made of its two halves' (``floor`` is
        twice as wide as the limits: a carry chain of its full width is longer than a cycle),
        registered apart: with ``a = A * 2**k + a0`` and ``b = B * 2**k + b0`` (``A``, ``B``
        signed, ``0 <= a0, b0 < 2**k``), ``a > b`` is ``A > B`` or ``A == B and a0 > b0``.
        """
        result, floor, increment, latency = self._stages(m, value, rand, name)
        floor1 = self._floor1
        # (k must not pass a limit's width: b0 is then its low bits, B the rest, signed.)
        split = min(len(floor1) // 2, len(hi), len(lo), len(lo_minus_one))

        def test(label, expr):
            sig = Signal(name=f"{name}_{label}", reset_less=True)
            m.d.sync += sig.eq(expr)
            return sig

        def halves(value):
            value = value.as_signed()
            top = value[split:] if len(value) > split else value[-1]
            return top.as_signed(), value[:split]

        def compare(label, limit):
            """Registered halves' tests of ``floor`` against ``limit``: (top >, top ==,
            top <, low >, low ==, low <)."""
            (a_top, a_low), (b_top, b_low) = halves(floor1), halves(limit)
            return [test(f"{label}_{part}_{rel}", op(a, b))
                    for part, a, b in (("top", a_top, b_top), ("low", a_low, b_low))
                    for rel, op in (("gt", operator.gt), ("eq", operator.eq),
                                    ("lt", operator.lt))]

        top_gt, top_eq, _, low_gt, low_eq, _ = compare("hi", hi)
        above, at_hi = top_gt | (top_eq & low_gt), top_eq & low_eq
        _, top_eq, top_lt, _, _, low_lt = compare("lo", lo)
        below = top_lt | (top_eq & low_lt)
        _, top_eq, _, _, low_eq, _ = compare("lo_m1", lo_minus_one)
        at_lo_m1 = top_eq & low_eq
        over = Signal(name=f"{name}_over", reset_less=True)
        under = Signal(name=f"{name}_under", reset_less=True)
        m.d.sync += [over.eq(above | (increment & at_hi)),
                     under.eq(below & ~(increment & at_lo_m1))]
        clamped = Signal(signed(max_width), name=f"{name}_clamped", reset_less=True)
        clipped = Signal(name=f"{name}_clipped", reset_less=True)
        m.d.sync += [clamped.eq(Mux(over, hi, Mux(under, lo, result))[:max_width].as_signed()),
                     clipped.eq(over | under)]
        return clamped, clipped, latency + 1

    def _stages(self, m, value: Value, rand: Value, name: str):
        """The stages of :meth:`pipelined`; returns ``(result, floor, increment, latency)``,
        the last two being the registers that ``result`` is the sum of (a cycle earlier).

        The same function as :meth:`apply`, rearranged so that no cycle has more than one
        shifter or one carry chain.  With ``v = floor * 2**s + dropped`` (``dropped < 2**s``)
        every mode rounds to ``floor + increment``, and the increment is one carry:

        * half-even: ``dropped + floor[0] > half`` (``half = 2**(s-1)``; never when ``s = 0``),
          that is ``dropped + (half - 1) + floor[0] >= 2**s``;
        * stochastic: ``(v + offset) >> s = floor + ((dropped + offset) >> s)``, and as
          ``dropped, offset < 2**s`` the last term is ``dropped + offset >= 2**s``;
        * truncate: ``dropped + 0 >= 2**s``, never.

        ``a >= 2**s`` for ``a = dropped + addend + carry_in`` is the carry out of the top of a
        ``span``-bit addition when the bits of ``dropped`` from ``s`` up are filled with ones
        (a carry into bit ``s`` then runs through them): no comparator and no wide OR.

        Cycle 1: ``floor``, the filled ``dropped``, the mode's addend and carry-in; cycle 2:
        the carry (the increment); cycle 3: ``floor + increment``.  With a constant shift
        cycle 1 is wiring and is left out (latency 2).  The mode and the shift must hold
        still while a value is inside, and also for the cycle before (the masks a run-time
        shift sets are registers, :meth:`_registered_masks`, and so are the copy of it that
        shifts the random offset and the mode's decode).
        """
        v = value.as_signed()
        width = len(v)
        assert width > self.max_shift, "Rounder: value must be wider than the largest shift"
        span = self.span

        constant = isinstance(self.shift, Const)

        def register(label, shape, expr, wiring=False):
            # Data registers have no reset (the caller's valid bits do): it keeps the
            # reset's fan-out small.
            sig = Signal(shape, name=f"{name}_{label}", reset_less=True)
            if wiring:
                m.d.comb += sig.eq(expr)
            else:
                m.d.sync += sig.eq(expr)
            return sig

        # A run-time shift: each value's own copy, a cycle late like the masks, so that its
        # fan-out is one register per lane, beside the lane's two shifters.
        shift = self.shift if constant else replicas(m, f"{name}_shift", self.shift, 1)[0]
        floor_now = Signal(signed(width), name=f"{name}_floor_now")
        m.d.comb += floor_now.eq(v >> shift)
        if constant:
            offset = Cat(Const(0, self.shift.value), rand)[RAND_BITS:] \
                if self.shift.value else Const(0, 1)
        else:
            offset = shift_left_bounded(rand, shift, span + RAND_BITS)[RAND_BITS:]
        # The mode's decode: each value's own registers, a cycle late like the shift's copy,
        # so that one setting's decode does not fan out to every lane's carry chain.
        truncate, half_even = (replicas(m, f"{name}_{label}", self.mode == mode, 1)[0]
                               for label, mode in (("truncate", RoundingMode.TRUNCATE),
                                                   ("half_even", RoundingMode.HALF_EVEN)))
        mask, _, is_zero = self._registered_masks(m)
        floor1 = register("floor", signed(width), floor_now, constant)
        filled = register("filled", span, v.as_unsigned()[:span] | ~mask, constant)
        addend = register("addend", span, Mux(truncate, 0, Mux(half_even, mask >> 1, offset)),
                          constant)
        carry_in = register("carry_in", 1, half_even & floor_now[0] & ~is_zero, constant)
        # The carry-in enters as a doubled bottom bit: one adder, one chain.
        total = Cat(carry_in, filled) + Cat(carry_in, addend)
        increment = register("increment", 1, total[span + 1])
        floor2 = register("floor2", signed(width), floor1)
        self._floor1 = floor1      # (for pipelined_saturating's tests, beside the carry)
        self._stage1_input = v     # (for pipelined_copies' clamp test, beside floor)
        result = register("result", signed(width + 1), floor2 + increment)
        return result, floor2, increment, 2 if constant else 3


#: Low limbs of a :class:`Product` operand are this many bits, unsigned; with the signed top limb
#: of at most ``LIMB_BITS + 1`` bits every limb is an 18-bit signed number, so that each partial
#: product is one ECP5 MULT18X18D.
LIMB_BITS = 17


def round_saturate(m, value: Value, shift: Value, mode: Value, rand: Value, width: int,
                   name: str, *, symmetric: bool = False, split: int = 0
                   ) -> tuple[Signal, Signal, int]:
    """``sat_width(shift_right(value, shift, mode, rand))`` (``zipsgd.spec.fixed``) for a
    run-time ``shift`` that is a setting (it holds still for a cycle before a value enters),
    pipelined; returns ``(result, clipped, latency)``.  The shift's copy and masks follow the
    setting a cycle late, as :class:`Rounder`'s do.  ``symmetric`` clamps to
    ``[-(2**(width-1) - 1), 2**(width-1) - 1]``.

    Only a window of ``t = floor(value 2**16 / 2**shift)`` is shifted: its bits
    ``[16, 17 + width)`` are the floor's low bits (the whole floor when ``value``'s bits from
    ``shift + width`` up equal its sign, ``fits``) and bits ``[0, 16)`` the top 16 dropped
    bits.  (One bit beyond ``width``, so that a floor just under the bottom that the increment
    brings back in range is told from one that stays out: ``clipped`` is exact.)  Half-even
    needs, besides, whether a lower dropped bit is set (``sticky``);
    stochastic needs nothing lower (its offset's low bits are 0): its increment is the carry
    of ``t[:16]`` plus the random bits aligned to them.  So neither the random bits nor a
    mask is shifted, and the masks of the shift are look-ups on its bits (registers: no
    comparator or carry chain).  With ``split = k`` the window is shifted in two cycles (by
    ``2**k`` times the shift's high bits, then by its low ``k`` bits): two shifters of few
    positions cost less than one of many.  Latency: 3, or 4 with ``split``.
    """
    v = value.as_signed()
    vw = len(v)
    # The shift's copy for the window and its masks: registers, a cycle late like the masks.
    setting, shift = shift, replicas(m, f"{name}_shift", shift, 1)[0]
    limit = (1 << len(shift)) - 1
    # The shift's masks: value bits from s + width - 1 up, value bits below s - 16, and the
    # random bits used (s < 16 drops fewer than 16 bits: the offset's low 16 - s bits are 0).
    above_mask = Signal(vw - 1, name=f"{name}_above")
    below_mask = Signal(vw - 1, name=f"{name}_below")
    offset_mask = Signal(RAND_BITS, name=f"{name}_offset_mask")
    m.d.sync += [
        above_mask.eq(Cat(*(~above(setting, k - width) for k in range(vw - 1)))),
        below_mask.eq(Cat(*(above(setting, k + RAND_BITS) if k + RAND_BITS < limit
                            else Const(0, 1) for k in range(vw - 1)))),
        offset_mask.eq(Cat(*(above(setting, RAND_BITS - k - 1) for k in range(RAND_BITS)))),
    ]
    sign = v[-1]
    tests = (~((v[:-1] ^ sign.replicate(vw - 1)) & above_mask).any(),
             (v[:-1] & below_mask).any(), offset_mask & rand, sign)
    fits, sticky, low_bits, negative = (Signal(name=f"{name}_fits"),
                                        Signal(name=f"{name}_sticky"),
                                        Signal(RAND_BITS, name=f"{name}_low"),
                                        Signal(name=f"{name}_negative"))
    t = Signal(width + 1 + RAND_BITS, name=f"{name}_window")
    # (Sign-extended to the window's width, so that a narrow value's shift fills it.)
    padded = Cat(Const(0, RAND_BITS), v, sign.replicate(max(0, width + 2 - vw))).as_signed()
    if split:
        coarse = Signal(len(t) + (1 << split) - 1, name=f"{name}_coarse")
        m.d.sync += coarse.eq((padded >> (shift[split:] << split))[:len(coarse)])
        tests = [delay_line(m, x, 1, f"{name}_test{i}") for i, x in enumerate(tests)]
        m.d.sync += t.eq((coarse >> shift[:split])[:len(t)])
    else:
        m.d.sync += t.eq((padded >> shift)[:len(t)])
    m.d.sync += [fits.eq(tests[0]), sticky.eq(tests[1]), low_bits.eq(tests[2]),
                 negative.eq(tests[3])]
    # The increment (a cycle), with the tests of the floor (width + 1 bits) that the clamp
    # needs: beyond the top or below the bottom's neighbour whatever the increment, or at the
    # top (out with an increment) or at the bottom's neighbour (out without one).
    dropped, floor = t[:RAND_BITS], t[RAND_BITS:].as_signed()
    half = dropped[-1] & (dropped[:-1].any() | sticky | floor[0])
    carry = (dropped + low_bits)[RAND_BITS]
    top = (1 << (width - 1)) - 1
    bottom = -top if symmetric else -top - 1
    high, low = floor[width], floor[width - 1]
    inc, floor2, fits2, neg2, out, at_top, at_bottom = (
        Signal(name=f"{name}_inc"), Signal(signed(width), name=f"{name}_floor"),
        Signal(name=f"{name}_fits2"), Signal(name=f"{name}_neg2"), Signal(name=f"{name}_out"),
        Signal(name=f"{name}_at_top"), Signal(name=f"{name}_at_bottom"))
    edge = floor == bottom - 1
    m.d.sync += [inc.eq(Mux(mode == RoundingMode.TRUNCATE, 0,
                            Mux(mode == RoundingMode.HALF_EVEN, half, carry))),
                 floor2.eq(floor[:width]), fits2.eq(fits), neg2.eq(negative),
                 # floor >= 2**(width - 1), or floor < bottom - 1 (the top bits 10 hold
                 # [-2**width, -2**(width - 1)), which holds bottom - 1 only when asymmetric).
                 out.eq((~high & low) | (high & ~low & (Const(1, 1) if symmetric else ~edge))),
                 at_top.eq(floor == top), at_bottom.eq(edge)]
    # floor + increment, clamped (the whole floor when it fits).
    total = floor2 + inc
    result = Signal(signed(width), name=f"{name}_result")
    clipped = Signal(name=f"{name}_clipped")
    over = ~fits2 | out | (inc & at_top) | (~inc & at_bottom)
    m.d.sync += [result.eq(Mux(over, Mux(neg2, bottom, top), total[:width])),
                 clipped.eq(over)]
    return result, clipped, 4 if split else 3


def _limbs(value: Value) -> list[tuple[Value, int, int | None]]:
    """``value`` as ``(limb, offset, bits)`` triples, ``value == sum(limb << offset)``: every
    limb is a signed value of at most ``LIMB_BITS + 1`` bits (low limbs zero-extended, the top
    limb signed when ``value`` is); ``bits`` bounds a limb that is never negative
    (``0 <= limb < 2**bits``) and is ``None`` for a signed top limb."""
    signed_value = value.shape().signed
    width = len(value)
    top_max = LIMB_BITS + 1 if signed_value else LIMB_BITS
    limbs, offset = [], 0
    while width - offset > top_max:
        limbs.append((Cat(value[offset:offset + LIMB_BITS], Const(0, 1)).as_signed(), offset,
                      LIMB_BITS))
        offset += LIMB_BITS
    top = value[offset:]
    if signed_value:
        limbs.append((top.as_signed(), offset, None))
    else:
        limbs.append((Cat(top, Const(0, 1)).as_signed(), offset, len(top)))
    return limbs


class Product:
    """``a * b`` as a pipeline: exact, of the shape of Amaranth's ``a * b``, in ``value``
    ``latency`` clock cycles after ``a`` and ``b`` (``sync`` domain, no enable: the caller
    carries its valid bits alongside).

    Stage 1 registers every limb product (:func:`_limbs`: each one 18 x 18 signed multiplier);
    each following stage adds groups of up to four shifted partial products into one, so
    that ``latency`` is ``1 + ceil(log4(products))`` (one more with ``landing``, below).  A
    group takes one carry chain: two terms whose bits cannot overlap (one never negative and
    below the other's known-zero low bits, as the products of the low limbs and of the high
    limbs) are placed side by side, and three terms become two with a carry-save step (sum
    and carry bits, one logic level), until two are left to add.  The sums are done modulo
    ``2**len(value)``: the true product fits that width, so the wrap of an intermediate sum
    cancels (the result is exact, and narrower sums make shorter carry chains).

    With an ECP5 ``platform`` each limb product is a ``MULT18X18D`` whose own output register
    is stage 1's register (:func:`limb_product`); otherwise (simulation, formal) it is
    ``a * b`` into a flip-flop register, which Yosys would map to the same multiplier
    without its register.

    With ``landing`` every limb product is registered once more in the fabric before the
    sums (one cycle more): the route out of the DSP row then has a cycle of its own, instead
    of sharing one with the group's carry-save step and carry chain.

    With ``split = k`` the last stage's final addition is registered in two parts: the sum's
    bits below ``k`` (a carry chain that ends at bit ``k``) with the carry out of them, and
    the two addends' bits from ``k`` up; ``value`` adds those after the registers.  The
    latency is the same, and the chain from ``k`` up moves into the consumer's cycle: for a
    consumer that only registers those bits, as a :class:`Rounder` by a constant shift
    below ``k`` (its ``floor`` is wiring into its second register, and its carry chain takes
    the bits below ``shift + 1``), so that the cycle after the DSP row ends at bit ``k``.
    """

    #: Terms summed into one per pipeline stage.
    GROUP = 4

    def __init__(self, m, a: Value, b: Value, name: str, platform=None, landing: bool = False,
                 split: int | None = None):
        shape = (a * b).shape()
        width = shape.width
        counter = iter(range(1 << 16))

        def term(value, label):
            # Every term and sum is a signal of the product's width: uniform adders, and
            # the cut (modulo 2**width) is an assignment.
            sig = Signal(signed(width), name=f"{name}_{label}{next(counter)}")
            m.d.comb += sig.eq(value)
            return sig

        # A term: (signal, known-zero low bits, bound) where a bound ``k`` says the term is
        # never negative and below ``2**k``, None that it may be negative.
        def side_by_side(low, high):
            (x, zx, _), (y, zy, by) = low, high
            return term(Cat(x[:zy], y[zy:]), "cat"), zx, by

        def carry_save(t1, t2, t3):
            (x, zx, _), (y, zy, _), (z, zz, _) = t1, t2, t3
            zeros = sorted((zx, zy, zz))
            total = term(x ^ y ^ z, "csa_s")
            carry = term(((x & y) | (x & z) | (y & z)) << 1, "csa_c")
            return [(total, zeros[0], None), (carry, min(zeros[1] + 1, width), None)]

        def add(t1, t2):
            # Below the larger known-zero low part (``offset`` bits of a shifted limb product) one
            # term alone has bits: they pass, and the chain starts there (a long chain is slow).
            (x, zx, _), (y, zy, _) = sorted((t1, t2), key=lambda item: item[1])
            high = (x[zy:] + y[zy:])[:width - zy]
            return term(Cat(x[:zy], high), "sum"), zx, None

        def narrow(group):
            """``group``'s terms made into at most two with the same sum (side by side, then
            carry-save steps)."""
            group = sorted(group, key=lambda item: item[1])
            merged = True
            while merged and len(group) > 1:
                merged = False
                for i, low in enumerate(group):
                    for j, high in enumerate(group):
                        if i != j and low[2] is not None and low[2] <= high[1]:
                            rest = [t for k, t in enumerate(group) if k not in (i, j)]
                            group = sorted(rest + [side_by_side(low, high)],
                                           key=lambda item: item[1])
                            merged = True
                            break
                    if merged:
                        break
            while len(group) > 2:
                group = sorted(group[3:] + carry_save(*group[:3]), key=lambda item: item[1])
            return group

        def reduce(group):
            group = narrow(group)
            return add(*group) if len(group) == 2 else group[0]

        def split_sum(group, latency):
            """The last stage with ``split``: its registers and the sum after them."""
            group = narrow(group)
            if len(group) == 1:
                sig = Signal(signed(width), name=f"{name}_s{latency + 1}_0", reset_less=True)
                m.d.sync += sig.eq(group[0][0])
                return sig
            (x, _, _), (y, zy, _) = sorted(group, key=lambda item: item[1])
            # Below zy only x has bits; from zy to split both do: a chain of split - zy bits.
            chain = split - zy
            if chain > 0:
                low_sum = x[zy:split] + y[zy:split]
                low_bits, carry_out = Cat(x[:zy], low_sum[:chain]), low_sum[chain]
            else:
                low_bits, carry_out = x[:split], 0
            low = Signal(split, name=f"{name}_s{latency + 1}_low", reset_less=True)
            carry = Signal(name=f"{name}_s{latency + 1}_carry", reset_less=True)
            high_x = Signal(width - split, name=f"{name}_s{latency + 1}_high_a", reset_less=True)
            high_y = Signal(width - split, name=f"{name}_s{latency + 1}_high_b", reset_less=True)
            m.d.sync += [low.eq(low_bits), carry.eq(carry_out),
                         high_x.eq(x[split:]), high_y.eq(y[split:])]
            # (Modulo 2**width, as every sum here.)
            return Cat(low, (high_x + high_y + carry)[:width - split]).as_signed()

        level = []
        for i, (limb_a, offset_a, bits_a) in enumerate(_limbs(a)):
            for j, (limb_b, offset_b, bits_b) in enumerate(_limbs(b)):
                partial = limb_product(m, limb_a, limb_b, f"{name}_p{i}_{j}", platform)
                offset = offset_a + offset_b
                bound = (None if bits_a is None or bits_b is None
                         else min(offset + bits_a + bits_b, width))
                if landing:
                    partial = _landed(m, partial, f"{name}_land{i}_{j}")
                level.append((term(partial << offset, f"t{i}_{j}_"), min(offset, width), bound))
        latency = 2 if landing else 1
        assert split is None or 0 < split < width, "Product: split must be inside the product"
        while len(level) > 1 and not (split is not None and len(level) <= self.GROUP):
            level = [reduce(level[k:k + self.GROUP]) for k in range(0, len(level), self.GROUP)]
            registered = []
            for k, (value, zeros, bound) in enumerate(level):
                sig = Signal(signed(width), name=f"{name}_s{latency + 1}_{k}", reset_less=True)
                m.d.sync += sig.eq(value)
                registered.append((sig, zeros, bound))
            level = registered
            latency += 1
        if len(level) > 1:          # (split: the last stage's sum is finished after it)
            value, latency = split_sum(level, latency), latency + 1
        else:
            value = level[0][0]
        self.value = value if shape.signed else value.as_unsigned()
        self.latency = latency


def _landed(m, value: Value, name: str) -> Signal:
    """``value`` registered once more: a limb product's landing register in the fabric."""
    sig = Signal(value.shape(), name=name, reset_less=True)
    m.d.sync += sig.eq(value)
    return sig


def is_ecp5(platform) -> bool:
    """Whether ``platform`` builds for an ECP5 (a ``LatticePlatform`` of that family)."""
    return getattr(platform, "family", None) == "ecp5"


def limb_product(m, a: Value, b: Value, name: str, platform=None) -> Signal:
    """``a * b`` of two signed values of at most 18 bits, registered (one cycle).

    On an ECP5 the multiplier is a ``MULT18X18D`` with its output register: Yosys maps a
    product to the same primitive but leaves its registers unused, so that a flip-flop after
    it waits for the multiplier and for the route from the DSP row, in the same cycle.  The
    instance is wired as Yosys's own mapping (``lattice/dsp_map_18x18.v``: both operands
    signed, C unused), with the output register clocked by ``sync`` and never reset.
    """
    assert len(a) <= 18 and len(b) <= 18 and a.shape().signed and b.shape().signed
    out = Signal(signed(len(a) + len(b)), name=name, reset_less=True)
    if not is_ecp5(platform):
        m.d.sync += out.eq(a * b)
        return out
    a18, b18, p = Signal(signed(18)), Signal(signed(18)), Signal(36)
    m.d.comb += [a18.eq(a), b18.eq(b), out.eq(p[:len(out)])]
    ports = {f"i_A{k}": a18[k] for k in range(18)} | {f"i_B{k}": b18[k] for k in range(18)}
    ports |= {f"i_C{k}": Const(0, 1) for k in range(18)}
    ports |= {f"o_P{k}": p[k] for k in range(36)}
    m.submodules[name] = Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK="NONE", p_REG_INPUTB_CLK="NONE", p_REG_INPUTC_CLK="NONE",
        p_REG_PIPELINE_CLK="NONE", p_REG_OUTPUT_CLK="CLK0", p_REG_OUTPUT_CE="CE0",
        p_REG_OUTPUT_RST="RST0", p_RESETMODE="SYNC", p_GSR="DISABLED",
        i_CLK0=ClockSignal("sync"), i_CE0=Const(1, 1), i_RST0=Const(0, 1),
        i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1), i_SOURCEA=Const(0, 1),
        i_SOURCEB=Const(0, 1), **ports)
    return out


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


def replicas(m, name: str, value: Value, copies: int, *, init: int = 0,
             reset_less: bool = True) -> list[Signal]:
    """``copies`` registers of ``value`` (named ``{name}_dup{i}``), for a control bit that
    chooses the words of several banks: each bank's copy can be placed beside it, so that one
    register's fan-out does not span the die.  Marked with :data:`REPLICA_ATTRIBUTE` so that
    synthesis keeps them apart."""
    out = [Signal(value.shape(), name=f"{name}_dup{i}", init=init, reset_less=reset_less,
                  attrs={REPLICA_ATTRIBUTE: 1}) for i in range(copies)]
    m.d.sync += [copy.eq(value) for copy in out]
    return out


def delay_line(m, value, cycles: int, name: str):
    """``value`` behind ``cycles`` registers (named ``{name}_d0``, ``{name}_d1``, ...)."""
    for i in range(cycles):
        delayed = Signal.like(value, name=f"{name}_d{i}")
        m.d.sync += delayed.eq(value)
        value = delayed
    return value


def any_of(bits) -> Value:
    """OR of 1-bit values as one flat reduction (``Const(0, 1)`` for none)."""
    bits = list(bits)
    return Cat(*bits).any() if bits else Const(0, 1)


def popcount(bits: Value) -> Value:
    """The number of set bits, as a tree of adders: depth log2 of the width, where a chain of
    one adder per bit is as deep as the width (32 starts: a cycle's worth of cells)."""
    terms = [bits[i] for i in range(len(bits))] or [Const(0, 1)]
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


