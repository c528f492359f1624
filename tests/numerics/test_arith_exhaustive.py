"""The hardware narrowing steps (``zipsgd.hw.arith``) against ``zipsgd.spec.fixed``, the
functions the golden model uses, by enumeration in Amaranth's Python simulator.

Each block is built with many lanes side by side (every lane its own value and random word,
the shift and the rounding mode shared, as in the engine), and every case is compared with
exact equality.  What is enumerated:

* ``Rounder`` on 8-bit words, shift 0..7 (a run-time shift and every constant shift): every
  value in every mode.  Stochastic rounding reads ``RAND_BITS`` = 16 random bits, a build
  constant of the engine that cannot be narrowed for the test, so instead of all 2**16 words
  the random inputs are stratified: with the run-time shift, every value of the ``s`` bits the
  spec uses (all offsets ``0..2**s-1``), each with the unused low bits all zero, all one,
  alternating and random, plus the 16 one-hot words; with a constant shift, the words on both
  sides of each value's rounding threshold, 0, all ones and a random word.
* ``Rounder`` on 20-bit words with a run-time shift 0..19, which crosses ``RAND_BITS`` (the
  ``u << (s - 16)`` alignment): every dropped-bit pattern for ``s <= 8`` and a stratified set
  beyond (0, 1, the half-way ties and their neighbours, all ones, the boundaries of the top 16
  dropped bits, random), each under the word's extreme high parts (+max, min, 0, -1, random).
* ``Rounder`` at the engine's own sizes (update: 52-bit accumulator, shift up to 40; residual:
  89-bit product, shift up to 64; decay: constant shift 24, 57-bit product): a third (half for
  the decay) of the same stratified values, at the shifts listed in the test.
* ``round_saturate`` to 5 bits (engine v2's rounding into a narrow word): every 10-bit value at
  every run-time shift 0..15 in every mode, clamped both ways, its shift in one cycle or two.
* ``saturate`` (every build-time width 1..10 on every 10-bit value, and width 32 at its corners)
  and ``saturate_runtime`` and ``saturate_format`` with ``format_limits`` (every run-time width
  1..8 on every 10-bit value, every width 2..32 of the engine's 32-bit formats at +-max, min
  and their neighbours).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from amaranth.hdl import Cat, Const, Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from zipsgd.hw.arith import (
    Rounder,
    format_limits,
    format_top,
    less_than,
    popcount,
    round_saturate,
    saturate,
    saturate_format,
    saturate_runtime,
    shift_left_bounded,
)
from zipsgd.spec import fixed
from zipsgd.spec.engine import DECAY_FRAC
from zipsgd.spec.fixed import RAND_BITS, RoundingMode, shift_right

MODES = list(RoundingMode)
#: Lanes per simulated block: the simulator's compile time grows with the lanes and its time per
#: evaluation with their total width; 32 balances the two for these sizes.
LANES = 32
RAND_MASK = (1 << RAND_BITS) - 1


def to_signed(word: int, width: int) -> int:
    return word - (1 << width) if word >> (width - 1) & 1 else word


def pack(values: Sequence[int], width: int) -> int:
    """Lane values (two's complement, ``width`` bits each) as one wide integer, lane 0 low."""
    mask = (1 << width) - 1
    word = 0
    for i, v in enumerate(values):
        word |= (v & mask) << (width * i)
    return word


def unpack(word: int, width: int, count: int) -> list[int]:
    mask = (1 << width) - 1
    return [to_signed((word >> (width * i)) & mask, width) for i in range(count)]


def fit(value, width: int):
    """``value`` extended (by its signedness) or cut to ``width`` bits, as an expression: a
    spec value outside ``width`` bits then shows up as a mismatch.  (Expressions, not
    intermediate signals: the simulator re-runs a module's whole combinational process for
    every signal it drives that changes, which would make the lanes cost quadratic time.)"""
    if len(value) >= width:
        return value[:width]
    pad = value[-1] if value.shape().signed else Const(0, 1)
    return Cat(value, pad.replicate(width - len(value)))


class LaneBench:
    """A combinational block replicated over :data:`LANES` lanes, driven from the simulator.

    ``build(m, inputs) -> outputs`` is called once per lane with that lane's input values
    (signed, of the given widths) and returns its outputs (signed values of the given
    widths).  Shared controls (``controls``: name -> width) are plain signals.  :meth:`run`
    feeds cases (tuples of lane inputs) under each control setting and returns the outputs.
    """

    def __init__(self, build: Callable, in_widths: Sequence[int], out_widths: Sequence[int],
                 controls: dict[str, int] | None = None, lanes: int | None = None,
                 latency: int = 0):
        self.lanes = lanes or LANES
        self.latency = latency   # clock cycles from inputs to outputs (0: combinational)
        self.in_widths, self.out_widths = list(in_widths), list(out_widths)
        self.m = m = Module()
        self.controls = {name: Signal(width, name=name) for name, width in
                         (controls or {}).items()}
        self.ins = [Signal(w * self.lanes, name=f"in{k}") for k, w in enumerate(in_widths)]
        self.outs = [Signal(w * self.lanes, name=f"out{k}") for k, w in enumerate(out_widths)]
        lane_outputs = []
        for lane in range(self.lanes):
            args = [sig[w * lane:w * (lane + 1)].as_signed()
                    for sig, w in zip(self.ins, in_widths, strict=True)]
            lane_outputs.append(build(m, self.controls, *args))
        for k, (sig, width) in enumerate(zip(self.outs, out_widths, strict=True)):
            m.d.comb += sig.eq(Cat(*(fit(o[k], width) for o in lane_outputs)))

    def run(self, jobs: Sequence[tuple[dict[str, int], Sequence[tuple[int, ...]]]]
            ) -> list[list[tuple[int, ...]]]:
        """``jobs``: (control values, cases); returns the outputs of every case of every job."""
        results: list[list[tuple[int, ...]]] = []

        async def testbench(ctx):
            for controls, cases in jobs:
                for name, value in controls.items():
                    ctx.set(self.controls[name], value)
                if self.latency:   # pipelined: settings reach their registers a cycle later
                    await ctx.tick()
                got = []
                for start in range(0, len(cases), self.lanes):
                    chunk = list(cases[start:start + self.lanes])
                    chunk += [chunk[-1]] * (self.lanes - len(chunk))
                    for k, (sig, width) in enumerate(zip(self.ins, self.in_widths, strict=True)):
                        ctx.set(sig, pack([case[k] for case in chunk], width))
                    for _ in range(self.latency):    # inputs held: the pipeline fills with them
                        await ctx.tick()
                    outs = [unpack(ctx.get(sig), width, self.lanes)
                            for sig, width in zip(self.outs, self.out_widths, strict=True)]
                    got.extend(zip(*outs, strict=True))
                results.append(got[:len(cases)])

        sim = Simulator(self.m)
        if self.latency:
            sim.add_clock(1e-6)
        sim.add_testbench(testbench)
        sim.run()
        return results


# -- case generators -------------------------------------------------------------------------

def stratified_rands(shift: int, rng: random.Random) -> list[int]:
    """Random words covering every offset the spec derives from them for ``shift``: for
    ``s <= 16`` each value of the top ``s`` bits with the low ``16 - s`` bits all zero, all
    one, alternating and random; for ``s > 16`` (every word is its own offset) the one-hot
    words, their complements, 0, all ones and random words.  Plus the one-hot words always."""
    one_hot = [1 << k for k in range(RAND_BITS)]
    if 0 < shift <= RAND_BITS:
        low = RAND_BITS - shift
        fills = {0, (1 << low) - 1, 0x5555 & ((1 << low) - 1)}
        words = [(top << low) | fill for top in range(1 << shift) for fill in fills]
        words += [(top << low) | rng.getrandbits(low) for top in range(1 << shift)]
    else:
        words = [0, RAND_MASK] + [RAND_MASK ^ w for w in one_hot]
        words += [rng.getrandbits(RAND_BITS) for _ in range(64)]
    return sorted(set(words + one_hot))


def dropped_patterns(shift: int, rng: random.Random, full_up_to: int = 8) -> list[int]:
    """Every dropped-bit pattern for small shifts; for larger ones the corners: 0, 1, ties and
    their neighbours, all ones, the boundaries of the top 16 dropped bits, and random ones."""
    if shift <= full_up_to:
        return list(range(1 << shift))
    top = 1 << shift
    half = top >> 1
    patterns = {0, 1, 2, half - 1, half, half + 1, top - 2, top - 1}
    if shift > RAND_BITS:
        unit = 1 << (shift - RAND_BITS)  # the weight of the lowest random bit
        patterns |= {unit - 1, unit, unit + 1, top - unit - 1, top - unit, top - unit + 1}
    patterns |= {rng.randrange(top) for _ in range(48)}
    return sorted(patterns)


def values_for_shift(width: int, shift: int, rng: random.Random) -> list[int]:
    """``width``-bit words with every listed dropped pattern under the extreme high parts."""
    lo, hi = fixed.signed_range(width)
    if shift >= width:  # the dropped part is the whole word
        return sorted({lo, lo + 1, -2, -1, 0, 1, hi - 1, hi} |
                      {rng.randrange(lo, hi + 1) for _ in range(64)})
    high_lo, high_hi = lo >> shift, hi >> shift
    highs = {high_lo, high_lo + 1, -1, 0, 1, high_hi - 1, high_hi, rng.randrange(high_lo, high_hi)}
    highs = {h for h in highs if high_lo <= h <= high_hi}
    return sorted({(h << shift) | d for h in highs for d in dropped_patterns(shift, rng)})


def boundary_rands(shift: int, value: int, rng: random.Random) -> list[int]:
    """Random words on both sides of where ``value`` starts rounding up at ``shift`` (the
    smallest offset with ``dropped + offset >= 2**s``), plus 0, all ones and a random word;
    the bits below the offset's are filled at random."""
    if shift == 0:
        return [0, RAND_MASK, rng.getrandbits(RAND_BITS)]
    dropped = value % (1 << shift)
    if shift <= RAND_BITS:
        low = RAND_BITS - shift
        threshold = (1 << shift) - dropped  # in offsets, each offset o is u >> low
        tops = {threshold - 1, threshold, threshold + 1, 0, (1 << shift) - 1}
        return sorted({(t << low) | rng.getrandbits(low) for t in tops if 0 <= t < 1 << shift}
                      | {0, RAND_MASK, rng.getrandbits(RAND_BITS)})
    unit = 1 << (shift - RAND_BITS)  # offset = u * unit: up iff u >= ceil((2**s - d) / unit)
    threshold = -(-((1 << shift) - dropped) // unit)
    return sorted({u for u in (threshold - 1, threshold, threshold + 1) if 0 <= u <= RAND_MASK}
                  | {0, RAND_MASK, rng.getrandbits(RAND_BITS)})


def rounder_cases(width: int, shift: int, mode: RoundingMode, values: Sequence[int],
                  rng: random.Random, every_offset: bool) -> list[tuple[int, int]]:
    """(value, random word) cases; stochastic mode pairs each value with every stratified word
    (``every_offset``) or with the words around its rounding threshold."""
    if mode is not RoundingMode.STOCHASTIC:
        return [(v, rng.getrandbits(RAND_BITS)) for v in values]  # rand must not matter
    if every_offset:
        rands = stratified_rands(shift, rng)
        return [(v, u) for v in values for u in rands]
    return [(v, u) for v in values for u in boundary_rands(shift, v, rng)]


def expected_rounding(cases, shift: int, mode: RoundingMode) -> list[tuple[int]]:
    return [(shift_right(v, shift, mode, u),) for v, u in cases]


# -- Rounder ---------------------------------------------------------------------------------

def rounder_bench(width: int, max_shift: int, shift: int | None = None,
                  pipelined: bool = False) -> LaneBench:
    """Lanes of one Rounder: a run-time shift (control ``shift``) or the constant ``shift``;
    :meth:`Rounder.apply`, or :meth:`Rounder.pipelined` (odd lanes) and the second result of
    :meth:`Rounder.pipelined_copies` (even lanes)."""
    shift_bits = max(1, max_shift.bit_length())
    holder: dict[str, Rounder] = {}

    def build(m, controls, value, rand):
        if "r" not in holder:
            source = controls["shift"] if shift is None else shift
            holder["r"] = Rounder(m, source, controls["mode"], max_shift, "r")
            holder["lane"] = 0
        rand = rand[:RAND_BITS].as_unsigned()
        if not pipelined:
            return (holder["r"].apply(value, rand),)
        holder["lane"] += 1
        name = f"lane{holder['lane']}"
        if holder["lane"] % 2:
            result, latency = holder["r"].pipelined(m, value, rand, name)
        else:   # every other lane: the copy of pipelined_copies
            (_, result), latency = holder["r"].pipelined_copies(m, value, rand, name, 2)
        assert latency == (3 if shift is None else 2)
        return (result,)

    controls = {"mode": 2} | ({"shift": shift_bits} if shift is None else {})
    latency = 0 if not pipelined else 3 if shift is None else 2
    return LaneBench(build, [width, RAND_BITS + 1], [width + 1], controls, latency=latency)


@dataclass(frozen=True)
class RounderCase:
    """One Rounder build and what it is driven with."""

    width: int                  # value bits
    max_shift: int
    shifts: tuple[int, ...]
    runtime_shift: bool         # a run-time shift signal, else one build per constant shift
    every_offset: bool = False  # stochastic: every stratified word, else the threshold words
    stride: int = 1             # keep every stride-th stratified value (wide words)

    def values(self, shift: int, rng: random.Random) -> list[int]:
        if self.width == 8:
            return ALL_WORD8
        return values_for_shift(self.width, shift, rng)[::self.stride]


ALL_WORD8 = list(range(-128, 128))
ROUNDERS = {
    "runtime-8b": RounderCase(8, 7, tuple(range(8)), True, every_offset=True),
    **{f"constant-8b-s{s}": RounderCase(8, 7, (s,), False) for s in range(8)},
    "runtime-20b": RounderCase(20, 19, tuple(range(20)), True),
    "update-52b-s40": RounderCase(52, 40, (0, 1, 2, 8, 15, 16, 17, 23, 24, 31, 32, 39, 40),
                                  True, stride=3),
    "residual-89b-s64": RounderCase(89, 64, (0, 1, 16, 17, 30, 47, 48, 63, 64), True, stride=3),
    f"decay-57b-s{DECAY_FRAC}": RounderCase(57, DECAY_FRAC, (DECAY_FRAC,), False, stride=2),
}


def rounder_jobs(name: str):
    """(controls, cases) per shift and mode, and what the spec says for each case."""
    case = ROUNDERS[name]
    rng = random.Random(name)
    jobs, expected = [], []
    for shift in case.shifts:
        for mode in MODES:
            cases = rounder_cases(case.width, shift, mode, case.values(shift, rng), rng,
                                  case.every_offset)
            controls = {"mode": int(mode)} | ({"shift": shift} if case.runtime_shift else {})
            jobs.append((controls, cases))
            expected.append((shift, mode, cases, expected_rounding(cases, shift, mode)))
    return jobs, expected


#: The configurations also run through :meth:`Rounder.pipelined` (the engine pipelines the
#: residual's, the update's and the decay's rounding).
PIPELINED = ("runtime-8b", "runtime-20b", "update-52b-s40", "residual-89b-s64",
             "constant-8b-s0", "constant-8b-s1", "constant-8b-s7", f"decay-57b-s{DECAY_FRAC}")


@pytest.mark.parametrize("name,pipelined", [(name, False) for name in ROUNDERS]
                         + [(name, True) for name in PIPELINED])
def test_rounder_matches_spec(name, pipelined):
    """Every case of the configuration (see the module docstring) in every mode."""
    case = ROUNDERS[name]
    bench = rounder_bench(case.width, case.max_shift,
                          None if case.runtime_shift else case.shifts[0], pipelined)
    jobs, expected = rounder_jobs(name)
    for (shift, mode, cases, want), got in zip(expected, bench.run(jobs), strict=True):
        bad = [(c, g, w) for c, g, w in zip(cases, got, want, strict=True) if g != w]
        assert not bad, f"shift {shift}, {mode.name}: (value, rand), hw, spec: {bad[:5]}"


def test_compare_copies_compare_as_the_result():
    """The cut copies of ``Rounder.pipelined_copies(compare_width=k)``: the result with the
    floor clamped to ``k + 1`` bits (exactly), which answers ``a > r`` and ``a < r`` as the
    result ``r`` does for every ``k``-bit ``a`` at and around both ends of the range and
    around ``r``.  Floors at and around the clamp's limits, every mode, a run-time shift."""
    width, k = 20, 6
    holder = {}

    def build(m, controls, value, rand):
        if "r" not in holder:
            holder["r"] = Rounder(m, controls["shift"], controls["mode"], 19, "r")
            holder["lane"] = 0
        holder["lane"] += 1
        (result, cut), latency = holder["r"].pipelined_copies(
            m, value, rand[:RAND_BITS].as_unsigned(), f"lane{holder['lane']}", 2,
            compare_width=k)
        assert latency == 3 and len(cut) == k + 2
        return result, cut

    rng = random.Random(6)
    bench = LaneBench(build, [width, RAND_BITS + 1], [width + 1, k + 2],
                      {"mode": 2, "shift": 5}, latency=3)
    floors = {f + d for f in (-(1 << k), (1 << k) - 1) for d in range(-2, 3)} | {0, -1}
    jobs, expected = [], []
    for shift in (0, 1, 3, 8, 13):
        lo, hi = fixed.signed_range(width)
        floors_here = floors | {lo >> shift, hi >> shift}
        values = sorted(v for v in {(f << shift) | d for f in floors_here
                                    for d in dropped_patterns(shift, rng)} if lo <= v <= hi)
        for mode in MODES:
            cases = rounder_cases(width, shift, mode, values, rng, False)
            jobs.append(({"mode": int(mode), "shift": shift}, cases))
            expected.append((shift, mode, cases))
    k_lo, k_hi = fixed.signed_range(k)
    for (shift, mode, cases), got in zip(expected, bench.run(jobs), strict=True):
        for (value, rand), (result, cut) in zip(cases, got, strict=True):
            assert result == shift_right(value, shift, mode, rand)
            floor = shift_right(value, shift, RoundingMode.TRUNCATE, 0)
            clamped = min(max(floor, -(1 << k)), (1 << k) - 1)
            assert cut == clamped + (result - floor), (shift, mode, value, rand)
            for a in {k_lo, k_lo + 1, -1, 0, 1, k_hi - 1, k_hi} | {
                    r for r in (result - 1, result, result + 1) if k_lo <= r <= k_hi}:
                assert (a > cut, a < cut) == (a > result, a < result), (value, a)


def saturating_rounder_jobs(widths=(2, 9, 32), shifts=(0, 1, 17, 47, 64)):
    """The residual's rounding and saturation (89-bit values, shifts up to 64) to formats of
    ``widths`` bits: values whose rounded result is at and around each limit (every dropped
    part from a few), and random ones."""
    rng = random.Random(89)
    jobs, expected = [], []
    for width in widths:
        lo, hi = fixed.signed_range(width)
        for shift in shifts:
            targets = [lo - 2, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, hi + 2, 0, -1]
            dropped = sorted({0, 1, (1 << shift) - 1, 1 << max(0, shift - 1),
                              (1 << max(0, shift - 1)) - 1} | {
                rng.getrandbits(shift) for _ in range(3)}) if shift else [0]
            values = [v for v in (t * (1 << shift) + d for t in targets for d in dropped)
                      if -(1 << 88) <= v < 1 << 88]   # (the value word is 89 bits)
            values += [rng.randrange(-(1 << 88), 1 << 88) for _ in range(20)]
            for mode in MODES:
                cases = rounder_cases(89, shift, mode, values, rng, False)
                jobs.append(({"mode": int(mode), "shift": shift, "width": width}, cases))
                rounded = expected_rounding(cases, shift, mode)
                expected.append(((width, shift, mode), cases, spec_saturate(rounded, width)))
    return jobs, expected


def test_saturating_rounder_matches_spec():
    """``Rounder.pipelined_saturating``: round, then saturate to a run-time format, against
    the spec's ``shift_right`` and ``saturate``."""
    holder = {}

    def build(m, controls, value, rand):
        if "r" not in holder:
            holder["r"] = Rounder(m, controls["shift"], controls["mode"], 64, "r")
            hi, lo = format_limits(m, controls["width"], 32, "f")
            lo_minus_one = Signal(signed(34), name="lo_minus_one")
            m.d.comb += lo_minus_one.eq(lo - 1)
            holder["limits"] = (hi, lo, lo_minus_one)
            holder["lane"] = 0
        holder["lane"] += 1
        clamped, clipped, latency = holder["r"].pipelined_saturating(
            m, value, rand[:RAND_BITS].as_unsigned(), *holder["limits"], 32,
            f"lane{holder['lane']}")
        assert latency == 4
        return clamped, clipped

    bench = LaneBench(build, [89, RAND_BITS + 1], [32, 2],
                      {"mode": 2, "shift": 7, "width": 6}, latency=4)
    jobs, expected = saturating_rounder_jobs()
    for (what, cases, want), got in zip(expected, bench.run(jobs), strict=True):
        bad = [(c, g, w) for c, g, w in zip(cases, got, want, strict=True) if tuple(g) != w]
        assert not bad, f"{what}: (value, rand), hw, spec: {bad[:5]}"


@pytest.mark.parametrize("symmetric,split", [(False, 0), (True, 0), (False, 2), (True, 2)])
def test_round_saturate_every_10bit_value(symmetric, split):
    """``round_saturate`` to 5 bits: every 10-bit value at every run-time shift 0..15 in every
    mode (stochastic with four random words per value), the result and its clip flag against
    the spec's ``shift_right`` and the clamp (symmetric: ``[-15, 15]``).  The flag is exact at
    the floors just outside either end that the increment brings back in range."""
    width, lanes = 5, iter(range(LANES))
    top = (1 << (width - 1)) - 1
    bottom = -top if symmetric else -top - 1

    def build(m, controls, value, rand):
        result, clipped, latency = round_saturate(
            m, value, controls["shift"], controls["mode"], rand[:RAND_BITS].as_unsigned(),
            width, f"r{next(lanes)}", symmetric=symmetric, split=split)
        assert latency == (4 if split else 3)
        return result, clipped

    bench = LaneBench(build, [10, RAND_BITS + 1], [width, 2], {"mode": 2, "shift": 4},
                      latency=4 if split else 3)
    rng = random.Random(width)
    jobs, expected = [], []
    for shift in range(16):
        for mode in MODES:
            rands = ([0, RAND_MASK, rng.getrandbits(RAND_BITS), rng.getrandbits(RAND_BITS)]
                     if mode is RoundingMode.STOCHASTIC else [0])
            cases = [(v, r) for v in range(-512, 512) for r in rands]
            want = []
            for v, r in cases:
                rounded = shift_right(v, shift, mode, r)
                clamped = min(max(rounded, bottom), top)
                want.append((clamped, int(clamped != rounded)))
            jobs.append(({"mode": int(mode), "shift": shift}, cases))
            expected.append((shift, mode, cases, want))
    for (shift, mode, cases, want), got in zip(expected, bench.run(jobs), strict=True):
        bad = [(c, g, w) for c, g, w in zip(cases, got, want, strict=True) if tuple(g) != w]
        assert not bad, f"shift {shift}, {mode.name}: (value, rand), hw, spec: {bad[:5]}"


# -- saturation ------------------------------------------------------------------------------

ALL_WORD10 = [(v,) for v in range(-512, 512)]


def spec_saturate(cases, width: int) -> list[tuple[int, int]]:
    return [(c, int(s)) for c, s in (fixed.saturate(v, width) for (v,) in cases)]


@pytest.mark.parametrize("width", range(1, 11))
def test_saturate_every_10bit_value(width):
    bench = LaneBench(lambda m, c, v: saturate(v, width), [10], [width, 2])
    (got,) = bench.run([({}, ALL_WORD10)])
    assert got == spec_saturate(ALL_WORD10, width)


def corner_values(width: int, value_width: int, rng: random.Random) -> list[tuple[int]]:
    """+-max, min and their neighbours for a ``width``-bit format, the value word's own
    extremes, and random values of every magnitude."""
    lo, hi = fixed.signed_range(width)
    vlo, vhi = fixed.signed_range(value_width)
    values = {lo - 2, lo - 1, lo, lo + 1, -hi, hi - 1, hi, hi + 1, hi + 2, -1, 0, 1,
              vlo, vlo + 1, vhi - 1, vhi}
    values |= {rng.randrange(-(1 << b), 1 << b) for b in range(1, value_width) for _ in range(2)}
    return [(v,) for v in sorted(v for v in values if vlo <= v <= vhi)]


def test_saturate_engine_loss_width():
    """Width 32 (the narrowed loss residual) from a 58-bit residual, at its corners."""
    cases = corner_values(32, 58, random.Random(32))
    bench = LaneBench(lambda m, c, v: saturate(v, 32), [58], [32, 2])
    (got,) = bench.run([({}, cases)])
    assert got == spec_saturate(cases, 32)


def runtime_saturate_bench(value_width: int, max_width: int,
                           clamp=saturate_runtime) -> LaneBench:
    holder = {}

    def build(m, controls, value):
        if "limits" not in holder:
            holder["limits"] = format_limits(m, controls["width"], max_width, "format")
        return clamp(value, *holder["limits"], max_width)

    return LaneBench(build, [value_width], [max_width, 2], {"width": 6})


@pytest.mark.parametrize("clamp", [saturate_runtime, saturate_format])
def test_saturate_runtime_every_10bit_value(clamp):
    """Every run-time width 1..8 of an 8-bit format, every 10-bit value."""
    bench = runtime_saturate_bench(10, 8, clamp)
    results = bench.run([({"width": w}, ALL_WORD10) for w in range(1, 9)])
    for width, got in zip(range(1, 9), results, strict=True):
        assert got == spec_saturate(ALL_WORD10, width), width


@pytest.mark.parametrize("clamp", [saturate_runtime, saturate_format])
def test_saturate_runtime_engine_formats(clamp):
    """The engine's model and gradient formats: every width 2..32 (6-bit register) from a
    41-bit value, at each width's +-max, min and neighbours."""
    bench = runtime_saturate_bench(41, 32, clamp)
    rng = random.Random(41)
    jobs = [({"width": w}, corner_values(w, 41, rng)) for w in range(2, 33)]
    for (controls, cases), got in zip(jobs, bench.run(jobs), strict=True):
        assert got == spec_saturate(cases, controls["width"]), controls


def test_format_top_and_bounded_shift():
    """``format_top`` is 2**(width-1) for every width; ``shift_left_bounded`` is
    ``(value << amount) mod 2**width`` for every 6-bit value and 4-bit amount."""
    tops = LaneBench(lambda m, c, v: (format_top(m, c["width"], 32, "t"),), [1], [34],
                     {"width": 6}, lanes=1)
    results = tops.run([({"width": w}, [(0,)]) for w in range(1, 33)])
    assert [r[0][0] for r in results] == [1 << (w - 1) for w in range(1, 33)]
    limits = LaneBench(lambda m, c, v: format_limits(m, c["width"], 32, "f"), [1], [33, 33],
                       {"width": 6}, lanes=1)
    results = limits.run([({"width": w}, [(0,)]) for w in range(64)])
    assert [tuple(r[0]) for r in results[1:33]] == [((1 << (w - 1)) - 1, -(1 << (w - 1)))
                                                    for w in range(1, 33)]
    # Outside the formats (never latched: a start checks them) they are those of format_top
    # (1 << (w - 1) mod 64 within 33 bits, else 0) all the same: -1 and 0 for width 0.
    tops = [((1 << ((w - 1) % 64)) if (w - 1) % 64 <= 32 else 0) for w in range(64)]
    def wrap33(v):
        return (v + (1 << 32)) % (1 << 33) - (1 << 32)

    assert [tuple(r[0]) for r in results] == [(wrap33(t - 1), wrap33(-t)) for t in tops]
    shifts = LaneBench(lambda m, c, v, a: (shift_left_bounded(v, a.as_unsigned(), 12),),
                       [6, 5], [13])
    cases = [(v, a) for v in range(-32, 32) for a in range(16)]
    (got,) = shifts.run([({}, cases)])
    assert [g[0] & 0xFFF for g in got] == [((v & 63) << a) & 0xFFF for v, a in cases]


if __name__ == "__main__":
    # How many cases each test compares (docs/results/reliability.md quotes these figures):
    # python tests/numerics/test_arith_exhaustive.py
    total = 0
    for name in ROUNDERS:
        count = sum(len(cases) for _, cases in rounder_jobs(name)[0])
        total += count
        print(f"Rounder {name}: {count} cases")
    for name in PIPELINED:
        count = sum(len(cases) for _, cases in rounder_jobs(name)[0])
        total += count
        print(f"Rounder.pipelined {name}: {count} cases")
    rng41 = random.Random(41)
    saturation = {
        "saturate, widths 1..10, every 10-bit value": 10 * len(ALL_WORD10),
        "saturate, width 32, corners": len(corner_values(32, 58, random.Random(32))),
        "saturate_runtime, widths 1..8, every 10-bit value": 8 * len(ALL_WORD10),
        "saturate_runtime, widths 2..32, corners": sum(len(corner_values(w, 41, rng41))
                                                      for w in range(2, 33)),
        "format_top, widths 1..32": 32,
        "format_limits, widths 1..32": 32,
        "shift_left_bounded, every 6-bit value and 4-bit amount": 64 * 16,
        "Rounder.pipelined_saturating, residual size, widths 2, 9, 32": sum(
            len(cases) for _, cases in saturating_rounder_jobs()[0]),
    }
    for what, count in saturation.items():
        total += count
        print(f"{what}: {count} cases")
    print(f"total: {total} cases compared with the spec")


@pytest.mark.parametrize(("a_shape", "b_shape"), [
    (signed(4), signed(4)), (signed(3), signed(5)), (unsigned(4), unsigned(4)),
    (unsigned(3), signed(4)), (signed(5), unsigned(2)), (unsigned(1), signed(1))])
def test_less_than_every_pair(a_shape, b_shape):
    """``less_than`` is ``<`` on every pair of values of the two shapes, and on a constant."""
    a, b = Signal(a_shape), Signal(b_shape)
    outputs = [less_than(a, b), less_than(a, -3), less_than(5, b)]
    got = []

    async def testbench(ctx):
        for x in shape_values(a_shape):
            ctx.set(a, x)
            for y in shape_values(b_shape):
                ctx.set(b, y)
                got.append((x, y, *(ctx.get(o) for o in outputs)))

    sim = Simulator(Module())
    sim.add_testbench(testbench)
    sim.run()
    assert got == [(x, y, int(x < y), int(x < -3), int(y > 5))
                   for x in shape_values(a_shape) for y in shape_values(b_shape)]


def shape_values(shape) -> range:
    return range(-(1 << (shape.width - 1)), 1 << (shape.width - 1)) if shape.signed \
        else range(1 << shape.width)


@pytest.mark.parametrize("width", [1, 2, 3, 5, 8, 11])
def test_popcount_every_value(width):
    """``popcount``'s tree of adders counts every value of every width (odd widths carry a
    term up a level unpaired)."""
    m = Module()
    bits, count = Signal(width), Signal(8)
    m.d.comb += count.eq(popcount(bits))
    sim = Simulator(m)
    wrong = []

    async def bench(ctx):
        for value in range(1 << width):
            ctx.set(bits, value)
            if ctx.get(count) != bin(value).count("1"):
                wrong.append(value)

    sim.add_testbench(bench)
    sim.run()
    assert wrong == []
    assert len(popcount(Signal(32))) == 6          # 0..32: depth five, not a chain of 32
