"""``EngineControl2`` (``zipsgd/hw/v2/top.py``) alone in Amaranth's simulator: a START's
refusals, the sticky flags and their count, the done flag, and the model port's answer
``MODEL_READ_LATENCY`` cycles after its registered index (at once, ignored, while busy)."""

from __future__ import annotations

from amaranth.sim import Simulator

from zipsgd.hw.v2.core import MODEL_READ_LATENCY
from zipsgd.hw.v2.top import EngineControl2
from zipsgd.spec.engine2 import EngineParams2
from zipsgd.spec.registers2 import ErrorBit2

PARAMS = EngineParams2(64, 100, 64)


def simulate(testbench):
    dut = EngineControl2(PARAMS)

    async def tb(ctx):
        await testbench(ctx, dut)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def good_config(ctx, ctrl):
    for name, value in {"n_features": 10, "batches": 3, "wrap": 11, "last_valid": 5,
                        "field_width": 4}.items():
        ctx.set(getattr(ctrl, name), value)


async def pulse(ctx, signal):
    ctx.set(signal, 1)
    started = ctx.get(signal)
    await ctx.tick()
    ctx.set(signal, 0)
    return started


def test_start_refusals_flags_and_done():
    async def tb(ctx, dut):
        ctrl, status = dut.ctrl, dut.status
        good_config(ctx, ctrl)
        ctx.set(ctrl.n_features, PARAMS.max_features + 1)           # out of range
        await ctx.tick().repeat(2)
        ctx.set(ctrl.start, 1)
        assert not ctx.get(dut.core_start)
        await ctx.tick()
        ctx.set(ctrl.start, 0)
        assert ctx.get(status.error_flags) == 1 << ErrorBit2.BAD_CONFIG
        assert ctx.get(status.error_count) == 1
        good_config(ctx, ctrl)
        await ctx.tick().repeat(2)
        ctx.set(ctrl.start, 1)
        assert ctx.get(dut.core_start)
        await ctx.tick()
        ctx.set(dut.core_busy, 1)                                   # the core is running
        assert not ctx.get(dut.core_start)                          # START again: refused
        await ctx.tick()
        ctx.set(ctrl.start, 0)
        assert ctx.get(status.error_flags) == (1 << ErrorBit2.BAD_CONFIG) | \
            (1 << ErrorBit2.START_WHILE_BUSY)
        assert ctx.get(status.error_count) == 2
        ctx.set(dut.core_done, 1)
        await ctx.tick()
        ctx.set(dut.core_done, 0)
        ctx.set(dut.core_busy, 0)
        assert ctx.get(status.done) and ctx.get(status.cycles_busy) == 2
        await pulse(ctx, ctrl.clear_errors)
        assert ctx.get(status.error_flags) == 0 and ctx.get(status.error_count) == 2
    simulate(tb)


def test_model_port_answers_after_the_read_latency():
    async def tb(ctx, dut):
        port = dut.model
        ctx.set(port.index, 7)
        await pulse(ctx, port.read)
        assert ctx.get(dut.model_addr) == 7
        ctx.set(dut.model_rdata, -5)
        # (The core's word is ready MODEL_READ_LATENCY cycles after model_addr; the answer is
        # a register: one cycle more.)
        for _ in range(MODEL_READ_LATENCY + 1):
            assert not ctx.get(port.rvalid)
            await ctx.tick()
        assert ctx.get(port.rvalid) and ctx.get(port.rdata) == (-5) & 0xFFFF_FFFF
        await ctx.tick()
        assert not ctx.get(port.rvalid)
        # While busy: answered at once, ignored, MODEL_PORT_BUSY.
        ctx.set(dut.core_busy, 1)
        ctx.set(port.wdata, 9)
        await pulse(ctx, port.write)
        assert not ctx.get(dut.model_we)
        await pulse(ctx, port.read)
        assert ctx.get(port.rvalid) and ctx.get(port.rdata) == 0
        assert ctx.get(dut.status.error_flags) == 1 << ErrorBit2.MODEL_PORT_BUSY
    simulate(tb)
