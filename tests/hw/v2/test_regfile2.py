"""The register file with engine v2's map (``zipsgd/spec/registers2.py``) in Amaranth's
simulator: configuration fields on ``ctrl`` under their core names, the level port's index
stepping through rows (``FORMAT.INDEX_MASK``), level and configuration writes refused while
busy, a level row past N_max refused; and the map's own rules (document, write lists)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from amaranth.sim import Simulator

from zipsgd.hw.regfile import RegisterFile
from zipsgd.spec import registers2 as regs
from zipsgd.spec.engine2 import EngineParams2, RunConfig2, UpdateMode, core_settings, lane_plan
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.registers import RESP_OKAY, RESP_SLVERR

_SPEC = importlib.util.spec_from_file_location(
    "regfile_v1_test", Path(__file__).resolve().parents[1] / "test_regfile.py")
_V1 = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_V1)
Manager = _V1.Manager

PARAMS = EngineParams2(64, 100, 64)
OFF = {r.name: r.offset for r in regs.REGISTERS2}


def simulate(testbench, busy_from: int | None = None):
    """Run ``testbench(ctx, dut, manager, writes)``; ``writes`` collects the level port's
    ``(feature, level, data)`` pulses.  ``status.busy`` rises at cycle ``busy_from``."""
    dut = RegisterFile(params=PARAMS, regmap=regs.MAP)
    manager = Manager(dut.axil)
    writes: list[tuple[int, int, int]] = []

    async def levels(ctx):
        cycle = 0
        while True:
            await ctx.tick()
            cycle += 1
            if busy_from is not None and cycle >= busy_from:
                ctx.set(dut.status.busy, 1)
            if ctx.get(dut.levels.write):
                writes.append((ctx.get(dut.levels.feature), ctx.get(dut.levels.level),
                               ctx.get(dut.levels.wdata)))

    async def tb(ctx):
        await testbench(ctx, dut, manager, writes)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(levels, background=True)
    sim.add_testbench(tb)
    sim.run()
    return writes


def test_configuration_reaches_the_core_settings():
    cfg = RunConfig2(encoding="double", bits=3, n_features=30, batch_size=4, step=1234,
                     residual_shift=40, decay=77, threshold=5, update_mode=UpdateMode.EXACT)
    plan = lane_plan(cfg, PARAMS, 24, True)
    want = core_settings(cfg, plan, True)

    async def tb(ctx, dut, manager, _):
        for offset, value in regs.config_writes(cfg, plan, per_feature=True, seed=True):
            await manager.write_word(ctx, offset, value)
        for name, value in want.items():
            assert ctx.get(getattr(dut.ctrl, name)) == value, name
        assert ctx.get(dut.ctrl.seed) == cfg.seed
        assert await manager.read_word(ctx, OFF["VERSION"]) == regs.ENGINE_VERSION2
        assert await manager.read_word(ctx, OFF["LANES"]) == PARAMS.lanes
    simulate(tb)


def test_levels_step_through_rows():
    table = np.array([[-256, -3, 7, 100, 256], [-256, 0, 1, 2, 256], [-256, -100, 50, 255, 256]])

    async def tb(ctx, dut, manager, _):
        await manager.write_word(ctx, OFF["FORMAT"], 3 << 16)      # index_mask = 3 (b = 2)
        for offset, value in regs.level_writes(table):
            await manager.write_word(ctx, offset, value)
        index = await manager.read_word(ctx, OFF["LEVEL_INDEX"])
        assert index == 3 << 8                                    # row 3, level 0
    writes = simulate(tb)
    want = [(j, q, int(table[j, q]) & 0x1FF) for j in range(3) for q in range(4)]
    assert writes == want


def test_level_writes_refused_while_busy_and_past_n_max():
    async def tb(ctx, dut, manager, _):
        await manager.write_word(ctx, OFF["LEVEL_INDEX"], (PARAMS.max_features + 1) << 8)
        assert await manager.write(ctx, OFF["LEVEL_DATA"], 5) == RESP_SLVERR
        await manager.write_word(ctx, OFF["LEVEL_INDEX"], PARAMS.max_features << 8)
        assert await manager.write(ctx, OFF["LEVEL_DATA"], 6) == RESP_OKAY
        assert await manager.write(ctx, OFF["LEVEL_DATA"], 7, strb=0x3) == RESP_SLVERR
        for _ in range(60):
            await ctx.tick()
        assert await manager.write(ctx, OFF["LEVEL_DATA"], 8) == RESP_SLVERR
        assert await manager.write(ctx, OFF["STEP"], 8) == RESP_SLVERR
        assert await manager.read(ctx, OFF["LEVEL_DATA"]) == (0, RESP_SLVERR)
    writes = simulate(tb, busy_from=50)
    assert writes == [(PARAMS.max_features, 0, 6)]


def test_every_epoch_of_a_memory_run_raises_the_done_interrupt():
    """In a memory run the next epoch starts in the cycle the last ends, so STATUS.DONE does
    not rise between them: EPOCHS_DONE's step sets IRQ_STATUS.DONE; its reset at CTRL.RUN
    does not."""
    async def tb(ctx, dut, manager, _):
        await manager.write_word(ctx, OFF["IRQ_ENABLE"], 1)         # done
        ctx.set(dut.status.epochs_done, 3)                          # (a reset from 3: none)
        await ctx.tick().repeat(2)
        ctx.set(dut.status.epochs_done, 0)
        await ctx.tick().repeat(3)
        assert await manager.read_word(ctx, OFF["IRQ_STATUS"]) == 0
        assert not ctx.get(dut.irq)
        for epoch in (1, 2):
            ctx.set(dut.status.epochs_done, epoch)                  # STATUS.DONE stays 0
            await ctx.tick().repeat(3)
            assert ctx.get(dut.irq), epoch
            assert await manager.read_word(ctx, OFF["IRQ_STATUS"]) == 1
            await manager.write_word(ctx, OFF["IRQ_STATUS"], 1)     # cleared by the handler
            await ctx.tick().repeat(2)
            assert not ctx.get(dut.irq), epoch
    simulate(tb)


def test_the_document_is_the_rendering():
    doc = Path(__file__).resolve().parents[3] / "docs" / "REGISTERS2.md"
    assert doc.read_text() == regs.render()


def test_every_core_setting_has_a_field_of_its_width():
    from zipsgd.hw.v2.core import Core2
    core = Core2(PARAMS)
    core._MustUse__silence = True       # only its ports are read
    members = regs.MAP.config_members()
    for name in core_settings(RunConfig2(), lane_plan(RunConfig2(), PARAMS, 1)):
        width = len(getattr(core, name))
        assert members[name] >= width, name
        # Wider fields only where the core's port is sized by the build (N_max, its lane
        # capacity): BAD_CONFIG refuses what the port could not hold.
        assert members[name] == width or name in ("n_features", "wrap", "step_addr"), name


def test_write_lists_refuse_values_that_do_not_fit():
    with pytest.raises(ConfigError, match="level word"):
        regs.level_writes([[-256, 300, 256]])
    cfg = RunConfig2(n_features=3)
    plan = lane_plan(cfg, PARAMS, 5)
    bad = plan.__class__(**{**plan.__dict__, "wrap": 1 << 16})
    with pytest.raises(ConfigError, match="PLAN.wrap"):
        regs.config_writes(cfg, bad)
