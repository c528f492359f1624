"""``BufferedFifo`` against Amaranth's ``SyncFIFOBuffered`` of the same capacity, cycle by
cycle, under random writes and reads (Amaranth's simulator)."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from zipsgd.hw.fifo import BufferedFifo, FabricOutputFifo


@pytest.mark.parametrize("fifo_class", [BufferedFifo, FabricOutputFifo])
@pytest.mark.parametrize("depth,write_rate,read_rate", [
    (4, 0.5, 0.5), (4, 0.9, 0.3), (4, 0.3, 0.9), (16, 0.7, 0.6), (2, 0.8, 0.8),
    (8, 1.0, 1.0), (8, 1.0, 0.5)])
def test_same_as_amaranths_buffered_fifo(fifo_class, depth, write_rate, read_rate):
    """Every cycle the same ``w_rdy``, ``r_rdy``, ``level`` and (when ready) ``r_data``;
    every register copy and invariant of the FIFO holds throughout.  Writes come only while there is
    room (as in the engine) and fill the FIFO, reads drain it."""
    m = Module()
    m.submodules.ours = ours = fifo_class(width=8, depth=depth)
    m.submodules.ref = ref = SyncFIFOBuffered(width=8, depth=depth + 1)
    rng = random.Random(depth * 1000 + int(write_rate * 10) * 10 + int(read_rate * 10))
    seen = {"full": 0, "empty_read": 0, "both": 0}

    async def bench(ctx):
        for cycle in range(2000):
            assert ctx.get(ours.w_rdy) == ctx.get(ref.w_rdy), cycle
            assert ctx.get(ours.r_rdy) == ctx.get(ref.r_rdy), cycle
            assert ctx.get(ours.level) == ctx.get(ref.level), cycle
            for copy, meaning in ours.register_copies:
                assert ctx.get(copy) == ctx.get(meaning), cycle
            for fact in ours.invariants:
                assert ctx.get(fact), cycle
            if ctx.get(ref.r_rdy):
                assert ctx.get(ours.r_data) == ctx.get(ref.r_data), cycle
            write = rng.random() < write_rate and ctx.get(ref.w_rdy)
            read = rng.random() < read_rate
            seen["full"] += not ctx.get(ref.w_rdy)
            seen["empty_read"] += read and not ctx.get(ref.r_rdy)
            seen["both"] += write and read and ctx.get(ref.r_rdy)
            data = rng.getrandbits(8)
            for fifo in (ours, ref):
                ctx.set(fifo.w_en, write)
                ctx.set(fifo.w_data, data)
                ctx.set(fifo.r_en, read)
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # The run reached the corners it is meant to compare.
    if write_rate > read_rate:
        assert seen["full"]
    if read_rate > write_rate:
        assert seen["empty_read"]
    assert seen["both"]


def test_depth_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        BufferedFifo(width=8, depth=6)


@pytest.mark.parametrize("distributed", [False, True])
def test_distributed_marks_the_memory_for_lut_ram(distributed):
    """``distributed`` puts Yosys's ``ram_style = "distributed"`` on the memory, and only then
    (the synthesis flow maps such a memory to LUT RAM)."""
    from amaranth.back import rtlil

    fifo = BufferedFifo(width=32, depth=128, distributed=distributed)
    text = rtlil.convert(fifo, ports=[fifo.w_en, fifo.w_data, fifo.r_en, fifo.r_data])
    assert ('attribute \\ram_style "distributed"' in text) == distributed
