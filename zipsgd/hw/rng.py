"""The engine's random generators: a bank of xorshift32 registers (:mod:`zipsgd.spec.rng`)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zipsgd.spec.rng import GOLDEN, ZERO_STATE_REPLACEMENT, seed_states

__all__ = ["XorshiftBank", "xorshift32_next", "STATE_WIDTH"]

#: Bits of one generator's state (and output).
STATE_WIDTH = 32


def xorshift32_next(state):
    """One xorshift32 step (shifts 13, 17, 5) of a 32-bit Amaranth value: the new state.

    The same map as :func:`zipsgd.spec.rng.xorshift32_step`; every left shift is taken mod
    ``2**32`` (sliced back to 32 bits).
    """
    state = state ^ (state << 13)[:STATE_WIDTH]
    state = state ^ (state >> 17)
    return state ^ (state << 5)[:STATE_WIDTH]


class XorshiftBank(wiring.Component):
    """``count`` xorshift32 generators with a common seed load and a step enable per generator.

    Timing (``sync`` domain): ``value[i]`` is generator ``i``'s state register, i.e. its most
    recent output.  On a clock edge where ``load`` is high, generator ``i`` takes its seed state
    ``seed ^ (0x9E3779B9 * (i + 1) mod 2**32)`` (``0x6D2B79F5`` if that is zero), exactly
    :func:`zipsgd.spec.rng.seed_states`, whatever ``step`` is.  Otherwise, on an edge where
    ``step[i]`` is high, generator ``i`` steps: ``value[i]`` shows the new state (the output of
    that step) from the next cycle on.  With ``step[i]`` low the state holds.  So after a load,
    the ``k``-th cycle with ``step[i]`` high is followed by ``value[i]`` equal to the ``k``-th
    output of generator ``i`` in the golden model (``xorshift32_step`` applied ``k`` times to
    its seed state); a consumer that wants "the output of this step" reads ``value`` in the
    cycle after the step.

    The engine ties ``step[0:L]`` (the lane generators) to one per-update-beat enable and
    ``step[L]`` (the residual generator) to a per-sample enable; an enable per generator costs
    nothing (each register has its own clock enable anyway) and keeps the grouping out of here.

    Parameters
    ----------
    count : int
        Number of generators (the engine uses ``lanes + 1``), at least 1.
    reset_seed : int
        After reset, the state is ``seed_states(reset_seed, count)`` (never zero, so the
        generators run even if no seed was ever loaded).  Default 0.

    Members
    -------
    seed : In(32)
        Seed register value, sampled when ``load`` is high.
    load : In(1)
        Load every generator from ``seed`` at the next clock edge (takes precedence over step).
    step : In(count)
        Bit ``i``: step generator ``i`` at the next clock edge.
    value : Out(data.ArrayLayout(32, count))
        ``value[i]``: generator ``i``'s current state (its most recent output).

    Raises
    ------
    TypeError
        If ``count`` or ``reset_seed`` is not an integer.
    ValueError
        If ``count < 1`` or ``reset_seed`` is not in ``0..2**32-1``.
    """

    def __init__(self, *, count, reset_seed=0):
        if not isinstance(count, int) or isinstance(count, bool):
            raise TypeError(f"Generator count must be an integer, not {count!r}")
        if count < 1:
            raise ValueError(f"Generator count must be at least 1, not {count!r}")
        if not isinstance(reset_seed, int) or isinstance(reset_seed, bool):
            raise TypeError(f"Reset seed must be an integer, not {reset_seed!r}")
        if not 0 <= reset_seed < 1 << STATE_WIDTH:
            raise ValueError(f"Reset seed must be in 0..2**32-1, not {reset_seed!r}")
        self._count = count
        self._reset_seed = reset_seed
        super().__init__({
            "seed": In(STATE_WIDTH),
            "load": In(1),
            "step": In(count),
            "value": Out(data.ArrayLayout(STATE_WIDTH, count),
                         init=[int(s) for s in seed_states(reset_seed, count)]),
        })

    @property
    def count(self):
        return self._count

    @property
    def reset_seed(self):
        return self._reset_seed

    def elaborate(self, platform):
        m = Module()
        mask = (1 << STATE_WIDTH) - 1
        for i in range(self._count):
            state = self.value[i]
            seeded = Signal(STATE_WIDTH, name=f"seeded{i}")
            m.d.comb += seeded.eq(self.seed ^ ((GOLDEN * (i + 1)) & mask))
            with m.If(self.load):
                with m.If(seeded == 0):
                    m.d.sync += state.eq(ZERO_STATE_REPLACEMENT)
                with m.Else():
                    m.d.sync += state.eq(seeded)
            with m.Elif(self.step[i]):
                m.d.sync += state.eq(xorshift32_next(state))
        return m
