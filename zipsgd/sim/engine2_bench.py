"""cocotb bench for engine v2 as an IP (``zipsgd/hw/v2/top.py``): every setting, level table and
model word through the AXI4-Lite registers of ``docs/REGISTERS2.md`` (cocotbext-axi's
master), each epoch's packed stream as one AXI4-Stream packet (cocotbext-axi's source, idle
cycles from a seeded pause pattern), and the status registers and model words read back and
compared with the golden model of engine v2 after every epoch, bit for bit.

``test_params``: ``params`` (``EngineParams2`` fields) and ``runs`` as for the core's bench
(``zipsgd/sim/core2_sim.py``; a run's ``pattern``, a stress pattern of ``zipsgd/sim/stress.py``,
sets the input's idle cycles, and its ``axil_pauses`` pauses every AXI4-Lite channel).
``engine2_errors`` checks the error flags, the refusals and the drain after a framing error.
``engine2_memory_runs`` runs each run's epochs from memory (CTRL.RUN: the engine's AXI4
master reads one packed stream, the same every epoch, from cocotbext-axi's ``AxiRamRead``
with 20-100 cycles of latency per burst), and a read error.  ``engine2_resets`` resets an
epoch mid-stream.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiReadBus,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamSource,
)
from cocotbext.axi.constants import AxiResp

from zipsgd.sim.axi_memory import DramRead
from zipsgd.sim.core2_sim import prepare_run, random_fields, run_config
from zipsgd.sim.runner import test_params
from zipsgd.sim.soak import logged_run
from zipsgd.sim.soak2 import soak_run2
from zipsgd.sim.stress import make_pattern
from zipsgd.sim.stress_bench import set_axil_pauses
from zipsgd.spec import registers2 as regs
from zipsgd.spec.engine2 import EngineParams2, lane_plan
from zipsgd.spec.registers import ENGINE_ID
from zipsgd.spec.registers2 import ErrorBit2
from zipsgd.spec.stream import pack_stream


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >> 31 else value


def _offset(name: str) -> int:
    return regs.MAP.register(name).offset


class TB2:
    """Engine v2 under test: clock, reset, AXI4-Lite master, AXI4-Stream source."""

    def __init__(self, dut, params: EngineParams2):
        self.dut, self.params = dut, params
        Clock(dut.clk, 10, unit="ns").start()
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk,
                                      dut.rst)

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def write(self, offset: int, value: int, okay: bool = True):
        resp = await self.axil.write(offset, (value & 0xFFFF_FFFF).to_bytes(4, "little"))
        assert (resp.resp == AxiResp.OKAY) == okay, (offset, value, resp.resp)

    async def read(self, offset: int) -> int:
        return await self.axil.read_dword(offset)

    async def writes(self, pairs):
        for offset, value in pairs:
            await self.write(offset, value)

    @staticmethod
    def offset(name: str) -> int:
        return _offset(name)

    async def status(self) -> dict:
        return regs.decode_status({o: await self.read(o) for o in regs.status_offsets()})

    async def write_model(self, words):
        await self.write(_offset("MODEL_INDEX"), 0)
        for word in words:
            await self.write(_offset("MODEL_DATA"), int(word))

    async def read_model(self, n: int) -> list[int]:
        await self.write(_offset("MODEL_INDEX"), 0)
        return [_signed32(await self.read(_offset("MODEL_DATA"))) for _ in range(n)]

    async def wait_done(self, limit: int = 2_000_000):
        for _ in range(0, limit, 32):
            status = await self.read(_offset("STATUS"))
            if status & 2 or not status & 1:      # DONE, or no longer BUSY
                return
            await ClockCycles(self.dut.clk, 32)
        raise AssertionError("the epoch did not end")

    def idle(self, probability: float, seed: int):
        rng = np.random.default_rng(seed)

        def pauses():
            while True:
                yield bool(rng.random() < probability)
        self.source.set_pause_generator(pauses() if probability else None)
        if not probability:
            self.source.pause = False


def _beats_bytes(fields, layout) -> bytes:
    return pack_stream(fields, layout).tobytes()


async def _run(tb: TB2, run: dict, report: list):
    params = tb.params
    setup = prepare_run(params, run)
    cfg, plan, per_feature, table, model, golden, rng = (
        setup.config, setup.plan, setup.per_feature, setup.table, setup.model, setup.golden,
        setup.rng)
    await tb.writes(regs.config_writes(cfg, plan, per_feature=per_feature, seed=True))
    if table is not None:
        await tb.writes(regs.level_writes(table if per_feature else table[:1]))
    await tb.write_model(model)
    tb.idle(run.get("idle", 0.0), run.get("data_seed", 1) + 1)
    if run.get("pattern"):                     # a stress pattern's idle cycles instead
        pattern = make_pattern(run["pattern"])
        tb.source.set_pause_generator(pattern.pauses() if pattern else None)
    set_axil_pauses(tb, run.get("axil_pauses"))
    for epoch in range(run["epochs"]):
        fields, layout = random_fields(rng, cfg, run["samples"], params.bus_width,
                                      per_feature)
        want = golden.run_epoch_fields(fields)
        await tb.write(_offset("CTRL"), 1)
        await tb.source.send(AxiStreamFrame(_beats_bytes(fields, layout)))
        await tb.source.wait()
        await tb.wait_done()
        got = await tb.status()
        assert got["done"] and not got["busy"] and not got["error_flags"], (run, epoch, got)
        checks = {"samples": want.samples, "updates": want.updates, "loss": want.loss_acc,
                  "loss_saturated": int(want.loss_saturated),
                  "residual_saturations": want.residual_saturations,
                  "model_saturations": want.model_saturations,
                  "forward_saturations": want.forward_saturations,
                  "beats": len(pack_stream(fields, layout)) * 8 // params.bus_width}
        assert {k: got[k] for k in checks} == checks, (run, epoch, got, checks)
        words = await tb.read_model(cfg.n_features)
        assert words == golden.model.tolist(), (run, epoch, "model words differ")
        report.append({"run": run, "epoch": epoch, "beats": checks["beats"],
                       "cycles_busy": got["cycles_busy"]})


@cocotb.test()
async def engine2_matches_golden(dut):
    spec = test_params()
    tb = TB2(dut, EngineParams2(**spec["params"]))
    await tb.reset()
    assert await tb.read(_offset("ID")) == ENGINE_ID
    assert await tb.read(_offset("VERSION")) == regs.ENGINE_VERSION2
    assert await tb.read(_offset("LANES")) == tb.params.lanes
    report: list = []
    for run in spec["runs"]:
        await _run(tb, run, report)
    path = os.environ.get("ZIPSGD_SIM_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(report, f)


@cocotb.test()
async def soak2_runs(dut):
    """The soak configurations of the given seeds (``zipsgd/sim/soak2.py``), each logged as it
    ends; a mismatch is logged with its seed before the test fails."""
    spec = test_params()
    params = EngineParams2(**spec["params"])
    soak = spec["soak"]
    tb = TB2(dut, params)
    await tb.reset()
    with open(soak["log"], "a") as log:
        for seed in soak["seeds"]:
            run, epochs = soak_run2(seed, params), []

            async def one(run=run, epochs=epochs):
                await _run(tb, run, epochs)
                return epochs
            await logged_run(log, {"seed": seed, "run": run}, one())


async def _flags(tb: TB2) -> int:
    return await tb.read(_offset("ERROR_FLAGS"))


@cocotb.test()
async def engine2_errors(dut):
    """Refusals and sticky flags: BAD_CONFIG, START_WHILE_BUSY, MODEL_PORT_BUSY (a model write
    and a read while busy), a level or configuration write while busy (SLVERR), a framing
    error (a stream without ``tlast``, drained up to its ``tlast``); then a correct epoch
    still matches the golden model."""
    spec = test_params()
    tb = TB2(dut, EngineParams2(**spec["params"]))
    await tb.reset()
    run = spec["runs"][0]
    cfg = run_config(run)
    plan = lane_plan(cfg, tb.params, run["samples"])
    writes = regs.config_writes(cfg, plan, seed=True)
    # BAD_CONFIG: no batches.
    await tb.writes(writes)
    await tb.write(_offset("BATCHES"), 0)
    await tb.write(_offset("CTRL"), 1)
    await ClockCycles(dut.clk, 4)
    assert await _flags(tb) == 1 << ErrorBit2.BAD_CONFIG
    assert not await tb.read(_offset("STATUS")) & 1
    await tb.write(_offset("CTRL"), 4)                  # CLEAR_ERRORS
    assert await _flags(tb) == 0
    count = await tb.read(_offset("ERROR_COUNT"))
    # A start, then: START again, a model access, a configuration and a level write.
    await tb.writes(writes)
    await tb.write(_offset("CTRL"), 1)
    await tb.write(_offset("CTRL"), 1)
    await tb.write(_offset("MODEL_DATA"), 5)
    assert await tb.read(_offset("MODEL_DATA")) == 0          # (answered at once, ignored)
    await tb.write(_offset("STEP"), 3, okay=False)
    await tb.write(_offset("LEVEL_DATA"), 3, okay=False)
    assert await _flags(tb) == (1 << ErrorBit2.START_WHILE_BUSY) | \
        (1 << ErrorBit2.MODEL_PORT_BUSY)
    assert await tb.read(_offset("ERROR_COUNT")) == count + 3
    # The epoch's stream with tlast on a beat past its end: a framing error, the rest drained.
    rng = np.random.default_rng(3)
    fields, layout = random_fields(rng, cfg, run["samples"], tb.params.bus_width)
    data = _beats_bytes(fields, layout)
    await tb.source.send(AxiStreamFrame(data + data))
    await tb.source.wait()
    await tb.wait_done()
    assert await _flags(tb) & (1 << ErrorBit2.FRAMING)
    status = regs.MAP.register("STATUS")
    assert not (await tb.read(status.offset)) & 2              # not DONE
    await tb.write(_offset("CTRL"), 4)
    # A correct run after it.
    await _run(tb, run, [])


# -- memory runs ----------------------------------------------------------------------------
_RUN = 1 << 3                                     # CTRL.RUN
_RAM_BYTES = 1 << 22


async def _wait_run(tb: TB2, limit: int = 4_000_000) -> int:
    """Cycles until STATUS.RUNNING falls (polled every 16 cycles)."""
    running = 1 << 5
    for cycle in range(0, limit, 16):
        if not await tb.read(_offset("STATUS")) & running:
            return cycle
        await ClockCycles(tb.dut.clk, 16)
    raise AssertionError("the memory run did not end")


async def _memory_run(tb: TB2, ram: DramRead, run: dict, report: list):
    params = tb.params
    ram.pauses(run.get("pause", 0.0), run.get("data_seed", 1))
    setup = prepare_run(params, run)
    cfg, golden = setup.config, setup.golden
    await tb.writes(regs.config_writes(cfg, setup.plan, per_feature=setup.per_feature,
                                       seed=True))
    if setup.table is not None:
        await tb.writes(regs.level_writes(setup.table if setup.per_feature
                                          else setup.table[:1]))
    await tb.write_model(setup.model)
    fields, layout = random_fields(setup.rng, cfg, run["samples"], params.bus_width,
                                   setup.per_feature)
    data = _beats_bytes(fields, layout)
    base = run.get("base", 0x1000 - 5 * params.bus_width // 8)   # (its first burst is short)
    ram.write(base, data)
    epochs = run["epochs"]
    await tb.writes(regs.run_writes(base, len(data), epochs, params.bus_width))
    start = ram.cycle
    await tb.write(_offset("CTRL"), _RUN)
    await _wait_run(tb)
    cycles = ram.cycle - start
    for _ in range(epochs):
        want = golden.run_epoch_fields(fields)
    got = await tb.status()
    assert got["done"] and not got["busy"] and not got["error_flags"], (run, got)
    assert got["epochs_done"] == epochs, (run, got)
    beats = len(data) * 8 // params.bus_width
    checks = {"samples": want.samples, "updates": want.updates, "loss": want.loss_acc,
              "model_saturations": want.model_saturations, "beats": beats}
    assert {k: got[k] for k in checks} == checks, (run, got, checks)
    words = await tb.read_model(cfg.n_features)
    assert words == golden.model.tolist(), (run, "model words differ")
    report.append({"run": run, "beats": beats, "epochs": epochs, "cycles": cycles,
                   "cycles_busy": got["cycles_busy"]})


@cocotb.test()
async def engine2_memory_runs(dut):
    """Each run's epochs from memory, bit for bit against the golden model."""
    spec = test_params()
    tb = TB2(dut, EngineParams2(**spec["params"]))
    ram = DramRead(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=_RAM_BYTES,
                   seed=spec.get("memory_seed", 1))
    await tb.reset()
    report: list = []
    for run in spec["runs"]:
        await _memory_run(tb, ram, run, report)
    path = os.environ.get("ZIPSGD_SIM_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(report, f)


@cocotb.test()
async def engine2_memory_errors(dut):
    """A bad run (BAD_CONFIG), and a read error in a run's first epoch: READ_ERROR, no
    further epoch, the run ends; then a streamed epoch and a memory run still match."""
    spec = test_params()
    params = EngineParams2(**spec["params"])
    tb = TB2(dut, params)
    beat = params.bus_width // 8
    run = spec["runs"][0]
    setup = prepare_run(params, run)
    fields, layout = random_fields(setup.rng, setup.config, run["samples"], params.bus_width,
                                   setup.per_feature)
    data = _beats_bytes(fields, layout)
    base = 0x2000
    ram = DramRead(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=_RAM_BYTES,
                   fail={base + (len(data) // beat // 2) * beat})
    await tb.reset()
    await tb.writes(regs.config_writes(setup.config, setup.plan, seed=True))
    ram.write(base, data)
    # BAD_CONFIG: a base that is not a multiple of W/8.
    await tb.writes(regs.run_writes(base, len(data), 3, params.bus_width))
    await tb.write(_offset("RUN_BASE"), base + 4)
    await tb.write(_offset("CTRL"), _RUN)
    await ClockCycles(dut.clk, 4)
    assert await _flags(tb) == 1 << ErrorBit2.BAD_CONFIG
    assert not await tb.read(_offset("STATUS")) & 1
    await tb.write(_offset("CTRL"), 4)
    # The read error: the failing beat is in every epoch's range, so the first epoch stops.
    await tb.write(_offset("RUN_BASE"), base)
    await tb.write(_offset("CTRL"), _RUN)
    await tb.write(_offset("CTRL"), _RUN)                        # refused: busy
    await _wait_run(tb)
    flags = await _flags(tb)
    assert flags & (1 << ErrorBit2.READ_ERROR) and flags & (1 << ErrorBit2.START_WHILE_BUSY)
    got = await tb.status()
    assert got["epochs_done"] == 0 and not got["busy"] and not got["running"], got
    await tb.write(_offset("CTRL"), 4)
    # A streamed epoch, then a memory run from a good copy, both bit-exact.
    await _run(tb, run, [])
    ram.fail.clear()
    await _memory_run(tb, ram, dict(run, epochs=2), [])


# -- resets mid-stream ------------------------------------------------------------------------
def _reset_words(params: EngineParams2) -> dict[int, int]:
    """Every readable register a reset defines, with its word: the identity constants, and
    the others' reset values (not the model window's data, which a read steps)."""
    identity = {"ID": ENGINE_ID, "VERSION": regs.ENGINE_VERSION2, "BUS_WIDTH": params.bus_width,
                "MAX_FEATURES": params.max_features, "MAX_BATCH": params.max_batch,
                "LANES": params.lanes, "UPDATE_UNITS": params.update_units}
    words = {_offset(name): value for name, value in identity.items()}
    for reg in regs.MAP.registers:
        if reg.group != "identity" and reg.access != "wo" and reg.name != "MODEL_DATA":
            words[reg.offset] = sum(f.reset << f.lsb for f in reg.fields)
    return words


async def _reset_point(tb: TB2, run: dict, point: dict) -> dict:
    """An epoch of ``run`` measured (bit-exact); the same epoch again, reset after
    ``point["fraction"]`` of its busy cycles with its stream still offered, for
    ``point["cycles"]`` cycles; every register then reads its reset value, and the epoch once
    more is bit-exact in as many cycles as the first (nothing of the reset one remains)."""
    dut, params = tb.dut, tb.params
    first: list = []
    await _run(tb, run, first)
    busy = first[0]["cycles_busy"]
    setup = prepare_run(params, run)
    await tb.writes(regs.config_writes(setup.config, setup.plan,
                                       per_feature=setup.per_feature, seed=True))
    if setup.table is not None:
        await tb.writes(regs.level_writes(setup.table if setup.per_feature
                                          else setup.table[:1]))
    await tb.write_model(setup.model)
    await tb.write(_offset("IRQ_STATUS"), 3)           # (the measured epoch's events)
    await tb.write(_offset("IRQ_ENABLE"), 1)           # irq: the epoch's end
    fields, layout = random_fields(setup.rng, setup.config, run["samples"], params.bus_width,
                                   setup.per_feature)
    total = len(pack_stream(fields, layout)) * 8 // params.bus_width
    taken = 0

    async def count():
        nonlocal taken
        while True:
            await FallingEdge(dut.clk)          # (the handshake of the next rising edge)
            if dut.s_axis_tvalid.value == 1 and dut.s_axis_tready.value == 1:
                taken += 1
    counter = cocotb.start_soon(count())
    await tb.write(_offset("CTRL"), 1)
    await tb.source.send(AxiStreamFrame(_beats_bytes(fields, layout)))
    await ClockCycles(dut.clk, int(point["fraction"] * busy))
    await FallingEdge(dut.clk)
    done = int(dut.irq.value)
    landed = ("stream" if taken < total else "update" if not done else "idle")
    dut.rst.value = 1                                  # (the source's beat still offered)
    await ClockCycles(dut.clk, point["cycles"])
    counter.cancel()
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    for offset, word in _reset_words(params).items():
        got = await tb.read(offset)
        assert got == word, (point, regs.MAP.register_at(offset).name, got, word)
    again: list = []
    await _run(tb, run, again)
    assert again[0]["cycles_busy"] == busy, (point, again, first)
    return {"fraction": point["fraction"], "cycles": point["cycles"], "landed": landed,
            "taken": taken, "beats": total, "cycles_busy": busy}


@cocotb.test()
async def engine2_resets(dut):
    """Every point of ``test_params()["points"]`` (``run``: an index into ``runs``), each
    reported with where it landed: in the stream, after its last beat (the updates), or
    after the epoch's end."""
    spec = test_params()
    tb = TB2(dut, EngineParams2(**spec["params"]))
    await tb.reset()
    report = []
    for point in spec["points"]:
        run = dict(spec["runs"][point["run"]], epochs=1)
        report.append(await _reset_point(tb, run, point))
    path = os.environ.get("ZIPSGD_SIM_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(report, f)
