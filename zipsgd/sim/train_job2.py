"""cocotb job runner for engine v2 (``zipsgd/hw/v2/top.py``): trains epoch by epoch through
the registers and the stream, driven like a host would (:mod:`zipsgd.sim.engine2_sim` writes
the job; the format is :mod:`zipsgd.sim.train_job`'s, with each epoch's settings the register
writes of ``docs/REGISTERS2.md``, its level table and its packed v2 stream)."""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotbext.axi import AxiStreamFrame

from zipsgd.sim.engine2_bench import TB2
from zipsgd.spec.engine2 import EngineParams2


@cocotb.test()
async def train_job2(dut):
    with open(os.environ["ZIPSGD_SIM_JOB"]) as file:
        job = json.load(file)
    tb = TB2(dut, EngineParams2(**job["params"]))
    await tb.reset()
    await tb.write_model(job["model"])
    results = []
    for index, epoch in enumerate(job["epochs"]):
        await tb.writes(epoch["writes"])
        payload = np.fromfile(epoch["payload"], dtype=np.uint8).tobytes()
        await tb.write(tb.offset("CTRL"), 1)
        started = time.perf_counter()
        await tb.source.send(AxiStreamFrame(payload))
        await tb.source.wait()
        await tb.wait_done()
        wall = time.perf_counter() - started
        status = await tb.status()
        words = await tb.read_model(epoch["n_features"])
        results.append({"status": status, "model_words": words, "wall_s": wall})
        with open(job["progress"], "w") as file:
            json.dump({"epochs_done": index + 1}, file)
    with open(job["result"], "w") as file:
        json.dump(results, file)
