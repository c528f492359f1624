"""cocotb bench for the bare engine core (``hw/core.py``): drives its stream and control ports
directly, runs the golden model on the same stream, and compares every epoch bit for bit.

Run from pytest through :func:`zipsgd.sim.runner.build_and_test` with ``test_params``:

``runs``: list of dicts, each one training run: ``config`` (``RunConfig`` fields), ``samples``,
``epochs``, ``seed`` (data and quantization), ``idle`` (probability of an idle cycle on the
input), ``model_init`` (``"zero"`` or ``"random"``).  The bench raises on the first mismatch and
writes the measured figures to ``ZIPSGD_SIM_REPORT`` (JSON) when that is set.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from zipsgd.golden.engine import GoldenEngine
from zipsgd.host.quantize import epoch_rng, quantize_fields
from zipsgd.sim.runner import test_params
from zipsgd.spec.engine import EngineParams, RunConfig
from zipsgd.spec.stream import pack_fields


def _signed(value: int, width: int) -> int:
    return value - (1 << width) if value >> (width - 1) else value


class CoreBench:
    """Clock, reset, and the core's ports as Python calls."""

    def __init__(self, dut, params: EngineParams):
        self.dut = dut
        self.params = params
        self.edge = RisingEdge(dut.clk)

    async def reset(self):
        dut = self.dut
        Clock(dut.clk, 10, unit="ns").start()
        dut.rst.value = 1
        for name in ("s_valid", "s_last", "s_data", "start", "abort_epoch", "clear_errors",
                     "seed_write", "model_write", "model_read", "model_index", "model_wdata"):
            getattr(dut, name).value = 0
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await self.edge

    def configure(self, config: RunConfig, samples: int):
        d = self.dut
        d.cfg_encoding.value = int(config.encoding)
        d.cfg_bits.value = config.bits if config.bits <= 8 else 0
        d.cfg_n_features.value = config.n_features
        d.cfg_batch_size.value = config.batch_size
        d.cfg_samples.value = samples
        d.cfg_model_width.value = config.model_width
        d.cfg_model_frac.value = config.model_frac
        d.cfg_grad_width.value = config.grad_width
        d.cfg_grad_frac.value = config.grad_frac
        d.cfg_step.value = config.step
        d.cfg_decay.value = config.decay
        d.cfg_threshold.value = config.threshold
        d.cfg_rounding.value = int(config.rounding)
        d.cfg_update_mode.value = int(config.update_mode)
        d.cfg_seed.value = config.seed

    async def pulse(self, name: str):
        getattr(self.dut, name).value = 1
        await self.edge
        getattr(self.dut, name).value = 0

    async def write_model(self, words):
        d = self.dut
        for j, word in enumerate(words):
            d.model_index.value = j
            d.model_wdata.value = int(word) & 0xFFFF_FFFF
            d.model_write.value = 1
            await self.edge
        d.model_write.value = 0

    async def read_model(self, n: int) -> np.ndarray:
        d = self.dut
        words = np.zeros(n, dtype=np.int64)
        for j in range(n):
            d.model_index.value = j
            d.model_read.value = 1
            await self.edge
            d.model_read.value = 0
            while True:
                if int(d.model_rvalid.value):
                    break
                await self.edge
            words[j] = _signed(int(d.model_rdata.value), 32)
            await self.edge
        return words

    async def stream(self, beats: list[int], lasts: list[int], rng, idle: float) -> int:
        """Send beats; returns the cycles from the first offer to the last acceptance."""
        d = self.dut
        i, cycles, n = 0, 0, len(beats)
        valid = False
        while i < n:
            if not valid:
                if idle and rng.random() < idle:
                    d.s_valid.value = 0
                else:
                    d.s_data.value = beats[i]
                    d.s_last.value = lasts[i]
                    d.s_valid.value = 1
                    valid = True
            await self.edge
            cycles += 1
            if valid and int(d.s_ready.value):
                i += 1
                valid = False
        d.s_valid.value = 0
        return cycles

    async def wait_done(self, limit: int = 10_000_000):
        for _ in range(limit):
            if int(self.dut.done.value):
                return
            await self.edge
        raise AssertionError("engine did not finish the epoch")

    def status(self) -> dict:
        d = self.dut
        return {name: int(getattr(d, name).value) for name in (
            "loss", "beats", "samples", "updates", "model_saturations", "residual_saturations",
            "loss_saturated", "error_flags", "cycles_busy", "cycles_starved",
            "cycles_update_stall")}


def _beats(payload: np.ndarray, beat_bytes: int, beats_per_sample: int):
    raw = payload.reshape(-1, beat_bytes)
    beats = [int.from_bytes(row.tobytes(), "little") for row in raw]
    lasts = [int((k + 1) % beats_per_sample == 0) for k in range(len(beats))]
    return beats, lasts


@cocotb.test()
async def core_matches_golden(dut):
    p = test_params()
    params = EngineParams(**p["params"])
    bench = CoreBench(dut, params)
    await bench.reset()
    report = []
    for run in p["runs"]:
        config = RunConfig(**run["config"])
        rng = np.random.default_rng(run.get("seed", 0))
        n, samples = config.n_features, run["samples"]
        features = rng.uniform(-1, 1, (samples, n))
        truth = rng.normal(size=n) / np.sqrt(n)
        labels = np.clip(features @ truth * 0.5 + 0.05 * rng.normal(size=samples), -1, 1)
        golden = GoldenEngine(params, config)
        if run.get("model_init") == "random":
            init = rng.integers(-(1 << (config.model_width - 2)), 1 << (config.model_width - 2),
                                n)
            golden.set_model(init)
            await bench.write_model(init)
        else:
            await bench.write_model(np.zeros(n, dtype=np.int64))
        bench.configure(config, samples)
        await bench.pulse("seed_write")
        layout = config.layout(params.bus_width)
        for epoch in range(run["epochs"]):
            payload = pack_fields(quantize_fields(labels, features, layout,
                                                  epoch_rng(run.get("seed", 0), epoch)), layout)
            expected = golden.run_epoch(payload)
            beats, lasts = _beats(payload, layout.beat_bytes, layout.beats_per_sample(n))
            await bench.pulse("start")
            started = time.perf_counter()
            cycles = await bench.stream(beats, lasts, rng, run.get("idle", 0.0))
            await bench.wait_done()
            wall = time.perf_counter() - started
            status = bench.status()
            words = await bench.read_model(n)
            mismatch = np.flatnonzero(words != golden.model)
            assert mismatch.size == 0, (
                f"run {run} epoch {epoch}: model words differ at {mismatch[:8].tolist()}: "
                f"engine {words[mismatch[:8]].tolist()} golden "
                f"{golden.model[mismatch[:8]].tolist()}")
            for field in ("loss", "beats", "samples", "updates", "model_saturations",
                          "residual_saturations"):
                want = {"loss": expected.loss_acc}.get(field, getattr(expected, field, None))
                assert status[field] == want, (
                    f"run {run} epoch {epoch}: {field} engine {status[field]} golden {want}")
            assert status["loss_saturated"] == int(expected.loss_saturated)
            assert status["error_flags"] == 0, f"error flags {status['error_flags']:#x}"
            report.append({"run": run, "epoch": epoch, "beats": status["beats"],
                           "model_nonzero": int(np.count_nonzero(words)),
                           "loss": status["loss"], "updates": status["updates"],
                           "cycles_busy": status["cycles_busy"],
                           "stream_cycles": cycles, "wall_s": wall,
                           "beats_per_s": status["beats"] / wall if wall else None})
    out = os.environ.get("ZIPSGD_SIM_REPORT")
    if out:
        with open(out, "w") as file:
            json.dump(report, file)
