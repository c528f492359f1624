"""Host side of training on the simulated engine (``zipsgd train --backend verilator``).

:func:`run_training_job` builds the engine's Verilog for an ``EngineParams`` (cached by the hash
of the Verilog, like every simulation build), writes every epoch's packed payload and register
settings into a job folder, runs :mod:`zipsgd.sim.train_job` under Verilator, and returns, per
epoch, the status counters and the model words read back through the AXI4-Lite registers.
A progress callback is called as epochs finish (the simulation runs in a background thread).
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from ..host.backend import EpochJob
from ..hw.top import TOP_NAME, ZipsgdEngine
from ..spec.engine import EngineParams, RunConfig
from .runner import build, run

__all__ = ["run_job", "run_training_job", "build_engine"]


def build_engine(params: EngineParams, build_root=None):
    """Verilate the engine for ``params`` (cached); returns the runner's BuildResult."""
    return build(ZipsgdEngine(params), TOP_NAME, build_root=build_root)


def _config_dict(config: RunConfig) -> dict:
    out = {f.name: getattr(config, f.name) for f in fields(RunConfig) if f.name != "extra"}
    return {k: (int(v) if not isinstance(v, (list, dict)) else v) for k, v in out.items()}


def run_training_job(params: EngineParams, epochs: list[EpochJob], initial_model,
                     progress: Callable[[int], None] | None = None, build_root=None,
                     poll_seconds: float = 0.5) -> list[dict]:
    """Run ``epochs`` on the simulated engine; returns one dict per epoch with ``status``
    (decoded status registers) and ``model_words``.

    Raises
    ------
    zipsgd.sim.runner.SimulationFailed
        If the build or the simulation fails.
    """
    built = build_engine(params, build_root)
    job = {"params": asdict(params), "model": [int(w) for w in initial_model],
           "epochs": [{"config": _config_dict(epoch.config), "samples": epoch.samples,
                       "seed": epoch.write_seed} for epoch in epochs]}
    return run_job(built, "zipsgd.sim.train_job", "train_job", job,
                   [epoch.payload for epoch in epochs], progress, poll_seconds)


def run_job(built, test_module: str, testcase: str, job: dict, payloads: list,
            progress: Callable[[int], None] | None = None,
            poll_seconds: float = 0.5) -> list[dict]:
    """Run a job runner's ``testcase`` on a built engine: ``job`` (its ``epochs`` a list of
    dicts) is written as the job file with each epoch's ``payload`` (a file of
    ``payloads[k]``), ``result`` and ``progress`` paths; the simulation runs in a thread while
    ``progress(epochs_done)`` follows the progress file.  Returns the result file's list."""
    with tempfile.TemporaryDirectory(prefix="zipsgd-job-") as folder:
        folder = Path(folder)
        job = {**job, "result": str(folder / "result.json"),
               "progress": str(folder / "progress.json")}
        for k, (epoch, payload) in enumerate(zip(job["epochs"], payloads, strict=True)):
            path = folder / f"epoch{k}.bin"
            np.ascontiguousarray(payload, dtype=np.uint8).tofile(path)
            epoch["payload"] = str(path)
        (folder / "job.json").write_text(json.dumps(job))
        failure: list[BaseException] = []

        def simulate():
            try:
                run(built, test_module, testcase=testcase,
                    extra_env={"ZIPSGD_SIM_JOB": str(folder / "job.json")})
            except BaseException as error:
                failure.append(error)

        worker = threading.Thread(target=simulate, daemon=True)
        worker.start()
        done = 0
        while worker.is_alive():
            worker.join(poll_seconds)
            done = _report_progress(folder / "progress.json", done, progress)
        if failure:
            raise failure[0]
        _report_progress(folder / "progress.json", done, progress)
        return json.loads((folder / "result.json").read_text())


def _report_progress(path: Path, done: int, progress) -> int:
    try:
        now = json.loads(path.read_text())["epochs_done"]
    except (OSError, ValueError, KeyError):
        return done
    if progress is not None and now > done:
        progress(now)
    return now

