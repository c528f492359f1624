"""cocotb bench for the engine (``zipsgd/hw/top.py``): AXI4-Lite control, AXI4-Stream samples, and a
scoreboard that compares the model words and the status counters with the golden model after
every epoch, bit for bit.

The :class:`TB` class is the reusable part (clock, reset, an AXI-Lite master, a stream driver
with an idle pattern, register-level helpers).  The cocotb tests below read their work from
``test_params`` (see :func:`zipsgd.sim.runner.test_params`):

``params``
    ``EngineParams`` fields of the build.
``runs``
    Training runs, each ``{"config": RunConfig fields, "samples", "epochs", "seed", "idle",
    "model_init", "changes": [per-epoch RunConfig changes or null]}``; optionally ``"pattern"``
    (an idle pattern spec of ``zipsgd/sim/stress.py``, instead of ``idle``) and ``"frames"`` (send
    through cocotbext-axi's source).
``errors``
    For ``framing_and_config_errors``: which error cases to exercise.

Figures (beats, cycles, wall time) go to the JSON file named by ``ZIPSGD_SIM_REPORT``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSource

from zipsgd.golden.engine import GoldenEngine
from zipsgd.host.quantize import epoch_rng, quantize_fields
from zipsgd.sim.runner import test_params
from zipsgd.sim.stress import make_pattern
from zipsgd.spec import registers as regs
from zipsgd.spec.engine import EngineParams, RunConfig
from zipsgd.spec.stream import StreamLayout, pack_beats_v1


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >> 31 else value


def payload_beats(payload: np.ndarray, layout: StreamLayout, n_features: int):
    """The beats of a packed payload as integers, and their ``tlast`` flags."""
    raw = np.asarray(payload, dtype=np.uint8).reshape(-1, layout.beat_bytes)
    per_sample = layout.beats_per_sample(n_features)
    beats = [int.from_bytes(row.tobytes(), "little") for row in raw]
    return beats, [int((k + 1) % per_sample == 0) for k in range(len(beats))]


class IdlePattern:
    """A seeded on/off pattern for ``tvalid``: ``probability`` of an idle cycle (0: never),
    or a fixed repeating ``cycle`` of booleans (True = idle)."""

    def __init__(self, probability: float = 0.0, seed: int = 0, cycle=None):
        self.probability = probability
        self.cycle = list(cycle) if cycle else None
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def idle(self) -> bool:
        self.count += 1
        if self.cycle:
            return self.cycle[(self.count - 1) % len(self.cycle)]
        return bool(self.probability and self.rng.random() < self.probability)


def _pauses(idle: IdlePattern):
    while True:
        yield idle.idle()


class TB:
    """The engine under test: clock, reset, AXI-Lite master, stream driver."""

    def __init__(self, dut, params: EngineParams, axis_source: bool = False):
        self.dut = dut
        self.params = params
        self.edge = RisingEdge(dut.clk)
        Clock(dut.clk, 10, unit="ns").start()
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        # cocotbext-axi's source (one frame per sample, idle cycles from a pause generator),
        # or the lean driver of :meth:`stream` (about twice as fast).
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk,
                                      dut.rst) if axis_source else None

    async def reset(self):
        d = self.dut
        d.rst.value = 1
        d.s_axis_tvalid.value = 0
        d.s_axis_tlast.value = 0
        d.s_axis_tdata.value = 0
        await ClockCycles(d.clk, 4)
        d.rst.value = 0
        await ClockCycles(d.clk, 2)

    # -- registers -------------------------------------------------------------------------

    async def write(self, offset: int, value: int):
        await self.axil.write_dword(offset, value & 0xFFFF_FFFF)

    async def read(self, offset: int) -> int:
        return await self.axil.read_dword(offset)

    async def write_reg(self, name: str, **fields):
        await self.write(regs.register(name).offset, regs.encode(name, **fields))

    async def read_reg(self, name: str) -> dict:
        return regs.decode(name, await self.read(regs.register(name).offset))

    async def configure(self, config: RunConfig, samples: int, seed: bool = False):
        for offset, value in regs.run_config_writes(config, samples, seed=seed,
                                                    params=self.params):
            await self.write(offset, value)

    async def command(self, **bits):
        await self.write_reg("CTRL", **bits)

    async def status(self) -> dict:
        words = {}
        for offset in regs.status_offsets():
            words[offset] = await self.read(offset)
        return regs.decode_status_words(words)

    async def write_model(self, words):
        await self.write_reg("MODEL_INDEX", index=0)
        data = regs.register("MODEL_DATA").offset
        for word in words:
            await self.write(data, int(word))

    async def read_model(self, n: int) -> np.ndarray:
        await self.write_reg("MODEL_INDEX", index=0)
        data = regs.register("MODEL_DATA").offset
        return np.array([_signed32(await self.read(data)) for _ in range(n)], dtype=np.int64)

    # -- the stream ------------------------------------------------------------------------

    async def stream(self, beats, lasts, idle: IdlePattern | None = None,
                     stop_after: int | None = None) -> int:
        """Offer ``beats`` (valid never waits for ready; data held while not accepted);
        returns the number of clock cycles until the last one was accepted.

        Lean on purpose (each signal access costs microseconds of cocotb overhead): handles
        are cached and ``tvalid``/``tlast`` are written only when they change."""
        tdata, tlast, tvalid = (self.dut.s_axis_tdata, self.dut.s_axis_tlast,
                                self.dut.s_axis_tvalid)
        tready, edge = self.dut.s_axis_tready, self.edge
        end = len(beats) if stop_after is None else min(stop_after, len(beats))
        i = cycles = 0
        offered = valid = last = False
        tlast.value = tvalid.value = 0
        while i < end:
            if not offered:
                if idle is not None and idle.idle():
                    if valid:
                        tvalid.value = valid = 0
                else:
                    tdata.value = beats[i]
                    if lasts[i] != last:
                        tlast.value = last = lasts[i]
                    if not valid:
                        tvalid.value = valid = 1
                    offered = True
            await edge
            cycles += 1
            if offered and tready.value:
                i += 1
                offered = False
        if valid:
            tvalid.value = 0
        return cycles

    async def wait_done(self, poll: int = 16, limit: int = 5_000_000):
        status_offset = regs.register("STATUS").offset
        for _ in range(0, limit, poll):
            status = regs.decode("STATUS", await self.read(status_offset))
            if status["done"] or not status["busy"]:
                return status
            await ClockCycles(self.dut.clk, poll)
        raise AssertionError("the engine did not finish the epoch")

    async def send_frames(self, payload, layout, n_features, idle: IdlePattern | None) -> int:
        """Send every sample as one AXI4-Stream frame through cocotbext-axi's source."""
        source = self.source
        # cocotbext-axi 0.1.28 leaves ``pause`` latched when the generator is removed.
        source.set_pause_generator(_pauses(idle) if idle is not None else None)
        if idle is None:
            source.pause = False
        sample_bytes = layout.sample_bytes_v1(n_features)
        raw = np.asarray(payload, dtype=np.uint8).reshape(-1, sample_bytes)
        for sample in raw:
            await source.send(AxiStreamFrame(sample.tobytes()))
        await source.wait()
        return 0

    async def run_epoch(self, payload, layout, n_features, idle=None,
                        frames: bool | None = None) -> tuple[dict, int, float]:
        """One epoch: start, stream, wait for done; ``frames`` picks cocotbext-axi's source
        (default: when the bench has one)."""
        beats, lasts = payload_beats(payload, layout, n_features)
        await self.command(start=1)
        started = time.perf_counter()
        if frames if frames is not None else self.source is not None:
            cycles = await self.send_frames(payload, layout, n_features, idle)
        else:
            cycles = await self.stream(beats, lasts, idle)
        wall = time.perf_counter() - started   # streaming only: the simulation's speed
        await self.wait_done()
        return await self.status(), cycles, wall


def make_data(config: RunConfig, samples: int, seed: int):
    """Seeded scaled data for a run: features in [-1, 1], labels from a linear model."""
    rng = np.random.default_rng(seed)
    n = config.n_features
    features = rng.uniform(-1, 1, (samples, n))
    truth = rng.normal(size=n) / np.sqrt(n)
    labels = np.clip(features @ truth * 0.5 + 0.05 * rng.normal(size=samples), -1, 1)
    return labels, features, rng


def check_epoch(golden_status, golden_model, status: dict, words: np.ndarray, where: str):
    mismatch = np.flatnonzero(words != golden_model)
    assert mismatch.size == 0, (
        f"{where}: model words differ at {mismatch[:8].tolist()}: engine "
        f"{words[mismatch[:8]].tolist()} golden {golden_model[mismatch[:8]].tolist()}")
    got = regs.epoch_status(status)
    for field in ("loss_acc", "samples", "beats", "updates", "model_saturations",
                  "residual_saturations", "loss_saturated"):
        assert getattr(got, field) == getattr(golden_status, field), (
            f"{where}: {field}: engine {getattr(got, field)} golden "
            f"{getattr(golden_status, field)}")
    assert status["error_flags"] == 0, f"{where}: error flags {status['error_flags']:#x}"


async def train_runs(tb: TB, params: EngineParams, runs: list[dict]) -> list[dict]:
    """Every run of ``runs``: epochs on the engine and the golden model, compared each epoch."""
    report = []
    for index, run in enumerate(runs):
        config = RunConfig(**run["config"])
        labels, features, rng = make_data(config, run["samples"], run.get("seed", 0))
        golden = GoldenEngine(params, config)
        init = np.zeros(config.n_features, dtype=np.int64)
        if run.get("model_init") == "random":
            span = 1 << (config.model_width - 2)
            init = rng.integers(-span, span, config.n_features)
            golden.set_model(init)
        await tb.configure(config, run["samples"], seed=True)
        await tb.write_model(init)
        # A stress pattern spec (``zipsgd/sim/stress.py``) or the plain idle probability/cycle.
        idle = (make_pattern(run["pattern"]) if "pattern" in run else
                IdlePattern(run.get("idle", 0.0), run.get("seed", 0) + 1, run.get("idle_cycle")))
        frames = run.get("frames")
        changes = run.get("changes") or []
        for epoch in range(run["epochs"]):
            change = changes[epoch] if epoch < len(changes) else None
            if change:
                config = replace(config, **change)
                golden.configure(config)
                await tb.configure(config, run["samples"], seed="seed" in change)
            layout = config.layout(params.bus_width)
            payload = pack_beats_v1(quantize_fields(labels, features, layout,
                                                  epoch_rng(run.get("seed", 0), epoch)), layout)
            expected = golden.run_epoch(payload)
            status, cycles, wall = await tb.run_epoch(payload, layout, config.n_features,
                                                     idle, frames)
            words = await tb.read_model(config.n_features)
            check_epoch(expected, golden.model, status, words, f"run {index} epoch {epoch}")
            report.append({"run": index, "epoch": epoch, "layout": str(layout),
                           "n_features": config.n_features, "batch": config.batch_size,
                           "beats": status["beats"], "cycles_busy": status["cycles_busy"],
                           "cycles_starved": status["cycles_starved"],
                           "cycles_update_stall": status["cycles_update_stall"],
                           "stream_cycles": cycles, "wall_s": wall})
    return report


def _write_report(report):
    out = os.environ.get("ZIPSGD_SIM_REPORT")
    if out:
        with open(out, "w") as file:
            json.dump(report, file)


@cocotb.test()
async def engine_matches_golden(dut):
    """Every run of ``test_params()["runs"]`` is bit-exact with the golden model."""
    p = test_params()
    params = EngineParams(**p["params"])
    tb = TB(dut, params, axis_source=p.get("axis_source", False))
    await tb.reset()
    ident = await tb.read_reg("ID")
    assert ident["id"] == regs.ENGINE_ID, f"ID register reads {ident}"
    _write_report(await train_runs(tb, params, p.get("runs", [])))


async def _correct_epoch(tb: TB, params: EngineParams, config: RunConfig, samples: int,
                         seed: int, where: str):
    """Reload seed and a zero model, train one epoch, compare with a fresh golden model."""
    labels, features, _ = make_data(config, samples, seed)
    golden = GoldenEngine(params, config)
    await tb.configure(config, samples, seed=True)
    await tb.write_model(np.zeros(config.n_features, dtype=np.int64))
    layout = config.layout(params.bus_width)
    payload = pack_beats_v1(quantize_fields(labels, features, layout, epoch_rng(seed, 0)), layout)
    expected = golden.run_epoch(payload)
    status, _, _ = await tb.run_epoch(payload, layout, config.n_features)
    words = await tb.read_model(config.n_features)
    check_epoch(expected, golden.model, status, words, where)


async def _flags(tb: TB) -> dict:
    return await tb.read_reg("ERROR_FLAGS")


@cocotb.test()
async def framing_and_config_errors(dut):
    """Each bad input sets its error flag and counts; the next correct epoch trains normally."""
    p = test_params()
    params = EngineParams(**p["params"])
    tb = TB(dut, params)
    await tb.reset()
    config = RunConfig(encoding="double", bits=4, n_features=params.bus_width, batch_size=4,
                       step=1 << 16, seed=9)
    layout = config.layout(params.bus_width)
    per_sample = layout.beats_per_sample(config.n_features)
    assert per_sample >= 3, "the framing cases need samples of three beats or more"
    labels, features, _ = make_data(config, 8, 3)
    payload = pack_beats_v1(quantize_fields(labels, features, layout, epoch_rng(3, 0)), layout)
    beats, lasts = payload_beats(payload, layout, config.n_features)
    count = 0

    async def expect(flag: str, what: str):
        nonlocal count
        flags = await _flags(tb)
        assert flags[flag] == 1, f"{what}: {flag} not set ({flags})"
        count += 1
        assert (await tb.read_reg("ERROR_COUNT"))["error_count"] == count, what
        await tb.command(clear_errors=1)
        assert not any((await _flags(tb)).values()), f"{what}: flags not cleared"

    # tlast early: the second beat of the first sample claims to be its last.
    await tb.configure(config, 8, seed=True)
    await tb.command(start=1)
    await tb.stream(beats[:2], [0, 1])
    await expect("tlast_early", "tlast early")
    status = await tb.read_reg("STATUS")
    assert status["draining"] == 1 and status["busy"] == 0, status
    await tb.stream(beats[2:6], lasts[2:6])       # the rest is discarded
    assert (await tb.status())["discarded_beats"] == 4
    await _correct_epoch(tb, params, config, 8, 4, "after tlast early")

    # tlast missing on the last beat of a sample.
    await tb.command(start=1)
    await tb.stream(beats[:per_sample], [0] * per_sample)
    await expect("tlast_missing", "tlast missing")
    await _correct_epoch(tb, params, config, 8, 5, "after tlast missing")

    # Out-of-range settings are refused at start (the engine stays idle).
    for name, bad in (("bits", 0), ("n_features", params.max_features + 1),
                      ("batch_size", 0), ("batch_size", params.max_batch + 1)):
        await tb.configure(config, 8)
        field_writes = {"bits": ("FORMAT", {"encoding": 0, "bits": bad}),
                        "n_features": ("N_FEATURES", {"n_features": bad}),
                        "batch_size": ("BATCH_SIZE", {"batch_size": bad})}[name]
        await tb.write_reg(field_writes[0], **field_writes[1])
        await tb.command(start=1)
        await expect("bad_config", f"{name}={bad}")
        assert (await tb.read_reg("STATUS"))["busy"] == 0, f"{name}={bad} started"
    await _correct_epoch(tb, params, config, 8, 6, "after bad settings")

    # Start while busy is refused and counted; the running epoch is unharmed.
    labels, features, _ = make_data(config, 8, 7)
    golden = GoldenEngine(params, config)
    await tb.configure(config, 8, seed=True)
    await tb.write_model(np.zeros(config.n_features, dtype=np.int64))
    payload = pack_beats_v1(quantize_fields(labels, features, layout, epoch_rng(7, 0)), layout)
    expected = golden.run_epoch(payload)
    beats, lasts = payload_beats(payload, layout, config.n_features)
    await tb.command(start=1)
    await tb.stream(beats[:5], lasts[:5])
    await tb.command(start=1)
    flags = await _flags(tb)
    assert flags["start_while_busy"] == 1, flags
    await tb.read(regs.register("MODEL_DATA").offset)     # the model port while busy
    flags = await _flags(tb)
    assert flags["model_port_busy"] == 1, flags
    await tb.stream(beats[5:], lasts[5:])
    await tb.wait_done()
    status = await tb.status()
    words = await tb.read_model(config.n_features)
    status["error_flags"] = 0  # the two flags above were expected
    check_epoch(expected, golden.model, status, words, "start while busy")


@cocotb.test()
async def clock_speed(dut):
    """Cycles per second of wall time with no Python work per cycle (the simulator's own
    speed, for the benchmark's reference)."""
    p = test_params()
    tb = TB(dut, EngineParams(**p["params"]))
    await tb.reset()
    cycles = p.get("cycles", 100_000)
    started = time.perf_counter()
    await ClockCycles(dut.clk, cycles)
    _write_report({"cycles": cycles, "wall_s": time.perf_counter() - started})
