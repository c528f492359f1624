"""In simulation a marked memory's read that meets a write to its row in the same cycle is
poisoned (the old word inverted, ``zipsgd/hw/core.py``, ``_collision_checked``), so that an engine
that used such a read would fail its bit-exact sims; on a platform the read is undefined."""

from amaranth.hdl import Module, Signal
from amaranth.lib import memory
from amaranth.sim import Simulator

from zipsgd.hw.core import _collision_checked


def _bench(poison: bool):
    m = Module()
    m.submodules.mem = mem = memory.Memory(shape=16, depth=8, init=[0x1111 * k for k in range(8)])
    rd, wr = mem.read_port(), mem.write_port()
    data = Signal(16)
    m.d.comb += data.eq(_collision_checked(m, rd, wr, "mem", poison))
    return m, rd, wr, data


def _read(poison: bool, read_row: int, write_row: int, write: bool) -> int:
    m, rd, wr, data = _bench(poison)
    seen = {}

    async def bench(ctx):
        ctx.set(rd.addr, read_row)
        ctx.set(wr.addr, write_row)
        ctx.set(wr.data, 0xBEEF)
        ctx.set(wr.en, write)
        await ctx.tick()
        ctx.set(wr.en, 0)
        seen["data"] = ctx.get(data)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen["data"]


def test_a_read_that_meets_a_write_to_its_row_is_poisoned():
    assert _read(True, 3, 3, True) == 0x3333 ^ 0xFFFF       # the old word, inverted


def test_other_reads_are_the_memory_word():
    assert _read(True, 3, 4, True) == 0x3333                # another row written
    assert _read(True, 3, 3, False) == 0x3333               # no write
    assert _read(False, 3, 3, True) == 0x3333               # no poison: the old word
