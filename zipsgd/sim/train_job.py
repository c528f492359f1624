"""cocotb job runner: trains epoch by epoch on the simulated engine, driven like a host would.

The host side (:mod:`zipsgd.sim.engine_sim`) writes a job file and names it in
``ZIPSGD_SIM_JOB``; this module reads it, and for every epoch loads the registers, streams the
packed payload file, waits for the end of the epoch, reads the status counters and the model
back, and appends the results to the job's result file.  After each epoch it rewrites the
progress file so the host can show a progress bar.

Job file (JSON): ``params`` (EngineParams fields), ``model`` (initial model words),
``epochs``: list of ``{"config": RunConfig fields, "samples", "payload": path, "seed": bool}``,
``result``: path of the result file, ``progress``: path of the progress file.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np

from zipsgd.sim.engine_bench import TB, payload_beats
from zipsgd.spec.engine import EngineParams, RunConfig


@cocotb.test()
async def train_job(dut):
    with open(os.environ["ZIPSGD_SIM_JOB"]) as file:
        job = json.load(file)
    params = EngineParams(**job["params"])
    tb = TB(dut, params)
    await tb.reset()
    results = []
    model = np.asarray(job["model"], dtype=np.int64)
    for index, epoch in enumerate(job["epochs"]):
        config = RunConfig(**epoch["config"])
        await tb.configure(config, epoch["samples"], seed=epoch.get("seed", False))
        if index == 0:
            await tb.write_model(model)
        layout = config.layout(params.bus_width)
        payload = np.fromfile(epoch["payload"], dtype=np.uint8)
        beats, lasts = payload_beats(payload, layout, config.n_features)
        await tb.command(start=1)
        started = time.perf_counter()
        await tb.stream(beats, lasts)
        await tb.wait_done()
        wall = time.perf_counter() - started
        status = await tb.status()
        words = await tb.read_model(config.n_features)
        results.append({"status": {k: int(v) for k, v in status.items()},
                        "model_words": words.tolist(), "wall_s": wall})
        with open(job["progress"], "w") as file:
            json.dump({"epochs_done": index + 1}, file)
    with open(job["result"], "w") as file:
        json.dump(results, file)
