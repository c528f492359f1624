"""cocotb bench for engine v2's core (``zipsgd/hw/v2/core.py``) under Verilator: settings on
its ports, packed beats on its stream input, and a scoreboard that compares the model words and
the status counts with the golden model of engine v2 after every epoch, bit for bit.

``test_params``: ``params`` (``EngineParams2`` fields) and ``runs``, each ``{"encoding",
"bits", "n", "batch", "mode", "rounding", "alpha", "seed", "decay", "threshold", "samples",
"epochs", "data_seed", "idle", "levels"}`` (``zipsgd.sim.core2_sim.run_config`` and
``level_table``).  Figures (beats and
cycles of each epoch) go to the JSON file named by ``ZIPSGD_SIM_REPORT``.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from zipsgd.hw.v2.core import MODEL_READ_LATENCY
from zipsgd.sim.core2_sim import prepare_run, random_fields
from zipsgd.sim.runner import test_params
from zipsgd.spec.engine2 import EngineParams2, core_settings
from zipsgd.spec.stream import pack_stream


async def _write_levels(dut, table, per_feature):
    dut.level_we.value = 1
    for j, row in enumerate(table if per_feature else table[:1]):
        for q, word in enumerate(row[:-1].tolist()):
            dut.level_feature.value = j
            dut.level_index.value = q
            dut.level_data.value = word & 0x1FF
            await RisingEdge(dut.clk)
    dut.level_we.value = 0


async def _run(dut, params: EngineParams2, run: dict, report: list):
    setup = prepare_run(params, run)
    cfg, plan, per_feature, table, model, golden, rng = (
        setup.config, setup.plan, setup.per_feature, setup.table, setup.model, setup.golden,
        setup.rng)
    for name, value in core_settings(cfg, plan, per_feature).items():
        getattr(dut, name).value = value
    dut.seed.value = cfg.seed
    dut.seed_load.value = 1
    await RisingEdge(dut.clk)
    dut.seed_load.value = 0
    if table is not None:
        await _write_levels(dut, table, per_feature)
    dut.model_we.value = 1
    for m, word in enumerate(model.tolist()):
        dut.model_addr.value = m
        dut.model_wdata.value = word & 0xFFFFFFFF
        await RisingEdge(dut.clk)
    dut.model_we.value = 0
    idle = np.random.default_rng(run.get("data_seed", 1) + 1)
    for epoch in range(run["epochs"]):
        fields, layout = random_fields(rng, cfg, run["samples"], params.bus_width,
                                      per_feature)
        beats = [int.from_bytes(b.tobytes(), "little") for b in
                 pack_stream(fields, layout).reshape(-1, params.bus_width // 8)]
        status = golden.run_epoch_fields(fields)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        sent, cycles = 0, 0
        last_bit = 1 << params.bus_width
        while True:
            if sent < len(beats) and idle.random() >= run.get("idle", 0.0):
                dut.beats__valid.value = 1
                dut.beats__payload.value = beats[sent] | (last_bit if sent == len(beats) - 1
                                                          else 0)
            else:
                dut.beats__valid.value = 0
            await ReadOnly()
            took = int(dut.beats__valid.value) and int(dut.beats__ready.value)
            done = int(dut.done.value)
            assert not int(dut.framing_error.value), f"framing error in {run}"
            await RisingEdge(dut.clk)
            sent += took
            cycles += 1
            if done:
                break
            if cycles >= 40 * len(beats) + 10000:
                state = {name: int(getattr(dut, name).value) for name in
                         ("busy", "samples", "updates", "beats_read", "framing_error")}
                raise AssertionError(f"epoch {epoch} of {run} did not end: {state}, "
                                     f"{sent} of {len(beats)} beats sent")
        dut.beats__valid.value = 0
        words = []
        for m in range(cfg.n_features):
            dut.model_addr.value = m
            for _ in range(MODEL_READ_LATENCY):
                await RisingEdge(dut.clk)
            await ReadOnly()
            value = int(dut.model_rdata.value)
            words.append(value - (1 << 32) if value >> 31 else value)
            await RisingEdge(dut.clk)
        got = {"samples": int(dut.samples.value), "updates": int(dut.updates.value),
               "loss_acc": int(dut.loss_acc.value),
               "loss_saturated": bool(int(dut.loss_saturated.value)),
               "residual_saturations": int(dut.residual_saturations.value),
               "model_saturations": int(dut.model_saturations.value),
               "forward_saturations": int(dut.forward_saturations.value)}
        want = {"samples": status.samples, "updates": status.updates,
                "loss_acc": status.loss_acc, "loss_saturated": bool(status.loss_saturated),
                "residual_saturations": status.residual_saturations,
                "model_saturations": status.model_saturations,
                "forward_saturations": status.forward_saturations}
        assert got == want, (run, epoch, got, want)
        assert words == golden.model.tolist(), (run, epoch, "model words differ")
        report.append({"run": run, "epoch": epoch, "beats": len(beats), "cycles": cycles})


@cocotb.test()
async def core2_matches_golden(dut):
    spec = test_params()
    params = EngineParams2(**spec["params"])
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for name in ("start", "seed_load", "model_we", "level_we", "beats__valid"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    report: list = []
    for run in spec["runs"]:
        await _run(dut, params, run, report)
    path = os.environ.get("ZIPSGD_SIM_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(report, f)
