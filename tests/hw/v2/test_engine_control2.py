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


def test_settings_the_core_could_not_hold_are_refused():
    """WRAP above the build's lane capacity, STEP_ADDR not below WRAP and LAST_VALID above the
    lanes: the register fields are wider than the core's ports, so START refuses them
    (BAD_CONFIG) rather than let the ports drop their high bits."""
    cap = PARAMS.lane_capacity
    for name, value in [("wrap", cap + 1), ("step_addr", 11), ("last_valid", PARAMS.lanes + 1),
                        ("wrap", cap), ("step_addr", 10), ("last_valid", PARAMS.lanes)]:
        async def tb(ctx, dut, name=name, value=value):
            ctrl, status = dut.ctrl, dut.status
            good_config(ctx, ctrl)
            ctx.set(getattr(ctrl, name), value)
            if name == "wrap":
                ctx.set(ctrl.step_addr, 0)
            await ctx.tick().repeat(2)
            ctx.set(ctrl.start, 1)
            bad = (name == "wrap" and value > cap) or (name == "step_addr" and value >= 11) \
                or (name == "last_valid" and value > PARAMS.lanes)
            assert ctx.get(dut.core_start) == (not bad), (name, value)
            await ctx.tick()
            ctx.set(ctrl.start, 0)
            assert ctx.get(status.error_flags) == (bad << ErrorBit2.BAD_CONFIG), (name, value)
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


def run_config(ctx, ctrl, epochs=3, base=0x100, nbytes=0x80):
    good_config(ctx, ctrl)
    for name, value in {"run_base": base, "run_bytes": nbytes, "run_epochs": epochs}.items():
        ctx.set(getattr(ctrl, name), value)


async def epoch(ctx, dut, cycles=5):
    """The core runs for ``cycles`` cycles, then ends its epoch (``done`` with busy low)."""
    ctx.set(dut.core_busy, 1)
    await ctx.tick().repeat(cycles)
    ctx.set(dut.core_busy, 0)
    ctx.set(dut.core_done, 1)
    restarted = ctx.get(dut.core_start)
    await ctx.tick()
    ctx.set(dut.core_done, 0)
    return restarted


def test_memory_run_starts_each_epoch_and_ends():
    async def tb(ctx, dut):
        ctrl, status = dut.ctrl, dut.status
        run_config(ctx, ctrl, base=0x104)                    # not a multiple of W/8: refused
        await ctx.tick().repeat(2)
        ctx.set(ctrl.run, 1)
        assert not ctx.get(dut.core_start) and not ctx.get(dut.reader_start)
        await ctx.tick()
        ctx.set(ctrl.run, 0)
        assert ctx.get(status.error_flags) == 1 << ErrorBit2.BAD_CONFIG
        run_config(ctx, ctrl)
        await ctx.tick().repeat(2)
        ctx.set(ctrl.run, 1)
        assert ctx.get(dut.core_start) and ctx.get(dut.reader_start)
        await ctx.tick()
        ctx.set(ctrl.run, 0)
        ctx.set(dut.reader_busy, 1)
        assert ctx.get(dut.running) and ctx.get(status.busy)
        assert [await epoch(ctx, dut) for _ in range(3)] == [1, 1, 0]
        assert ctx.get(status.epochs_done) == 3 and ctx.get(status.done)
        assert ctx.get(dut.running)                           # until the reader is idle
        ctx.set(dut.reader_busy, 0)
        await ctx.tick()
        assert not ctx.get(dut.running) and not ctx.get(status.busy)

    simulate(tb)


def test_memory_run_stops_on_errors():
    async def tb(ctx, dut):
        ctrl, status = dut.ctrl, dut.status
        run_config(ctx, ctrl, epochs=5)
        await ctx.tick().repeat(2)
        # A read error: the epoch being read still ends, and no other starts.
        await pulse(ctx, ctrl.run)
        ctx.set(dut.reader_busy, 1)
        assert await epoch(ctx, dut)
        ctx.set(dut.reader_error, 1)
        await ctx.tick()
        assert ctx.get(status.error_flags) == 1 << ErrorBit2.READ_ERROR
        ctx.set(dut.reader_busy, 0)
        assert not await epoch(ctx, dut)
        await ctx.tick()
        assert not ctx.get(dut.running) and ctx.get(status.epochs_done) == 2
        ctx.set(dut.reader_error, 0)
        await pulse(ctx, ctrl.clear_errors)
        # A framing error: the reader is aborted, and the run ends once it is idle.
        await pulse(ctx, ctrl.run)
        ctx.set(dut.reader_busy, 1)
        ctx.set(dut.core_busy, 1)
        await ctx.tick().repeat(3)
        ctx.set(dut.core_framing, 1)
        ctx.set(dut.core_busy, 0)
        assert ctx.get(dut.reader_abort) and not ctx.get(dut.core_start)
        await ctx.tick().repeat(2)
        assert ctx.get(dut.running) and not ctx.get(dut.draining)
        ctx.set(dut.reader_busy, 0)
        await ctx.tick()
        assert not ctx.get(dut.running)
        assert ctx.get(status.error_flags) == 1 << ErrorBit2.FRAMING

    simulate(tb)
