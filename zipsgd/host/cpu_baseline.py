"""The CPU baseline of ``zipsgd perf --target``: plain vectorized NumPy mini-batch SGD, what a
user would write instead of using the engine, timed on this machine to the same target loss.

Same problem and schedule as float SGD (:mod:`zipsgd.golden.float_sgd`, least squares without
regularization): epoch ``k`` (from 1) takes steps ``x -= alpha/k / B * A_S^T (A_S x - b_S)`` over
the mini-batches ``S`` in stream order (plain, not delayed, updates), then evaluates the training
loss ``1/(2K) |A x - b|^2`` and stops at the first epoch whose loss is at most the target.  The
wall time covers the whole run including the per-epoch loss (the run needs it to know when to
stop), but not converting the data to ``dtype``.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from ..spec.errors import ConfigError

__all__ = ["numpy_sgd", "measure_cpu_baseline", "machine_description"]


def numpy_sgd(features: np.ndarray, labels: np.ndarray, epochs: int, batch_size: int,
              step_size: float, target: float | None = None) -> dict:
    """Run mini-batch SGD for at most ``epochs`` epochs, stopping after the first epoch whose
    loss is at most ``target`` (never stops early when ``target`` is None).

    ``features`` and ``labels`` are used in their own dtype (float64 or float32).  Returns
    ``losses`` (one per epoch run), ``epoch_end_s`` (wall time from the start to the end of each
    epoch, loss included), ``epochs_to_target`` (None if not reached) and ``model``.
    """
    if epochs < 1 or batch_size < 1 or not step_size > 0:
        raise ConfigError(f"epochs and batch size must be >= 1 and the step size > 0, found "
                          f"{epochs}, {batch_size}, {step_size}")
    n_samples = features.shape[0]
    model = np.zeros(features.shape[1], dtype=features.dtype)
    losses, ends, reached = [], [], None
    started = time.perf_counter()
    for epoch in range(1, epochs + 1):
        scale = features.dtype.type(step_size / epoch / batch_size)
        for start in range(0, n_samples, batch_size):
            rows = features[start:start + batch_size]
            model -= scale * (rows.T @ (rows @ model - labels[start:start + batch_size]))
        residual = features @ model - labels
        losses.append(0.5 * float(residual @ residual) / n_samples)
        ends.append(time.perf_counter() - started)
        if target is not None and losses[-1] <= target:
            reached = epoch
            break
    return {"losses": losses, "epoch_end_s": ends, "epochs_to_target": reached, "model": model}


def measure_cpu_baseline(features: np.ndarray, labels: np.ndarray, target: float, epochs: int,
                         batch_size: int, step_size: float, repeats: int = 5,
                         dtype=np.float64) -> dict:
    """Time :func:`numpy_sgd` to ``target`` ``repeats`` times; report the median wall time.

    Returns a JSON-ready dict: ``wall_s`` (median), ``wall_s_runs``, ``epochs_to_target`` (None
    if ``epochs`` epochs do not reach the target; ``wall_s`` is then the time of all of them),
    ``losses`` and ``epoch_end_s`` of the median run, ``dtype``, ``repeats`` and
    ``load_average`` (the machine's 1-minute load average before the runs: on a shared machine
    a load above its CPU count slows the runs down).
    """
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1, found {repeats}")
    features = np.ascontiguousarray(features, dtype=dtype)
    labels = np.ascontiguousarray(labels, dtype=dtype)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    runs = [numpy_sgd(features, labels, epochs, batch_size, step_size, target)
            for _ in range(repeats)]
    walls = [run["epoch_end_s"][-1] for run in runs]
    median_run = runs[sorted(range(repeats), key=walls.__getitem__)[(repeats - 1) // 2]]
    return {"method": "NumPy mini-batch SGD (plain updates), "
                      f"{np.dtype(dtype).name}, median of {repeats}",
            "dtype": np.dtype(dtype).name, "repeats": repeats,
            "wall_s": statistics.median(walls), "wall_s_runs": walls, "load_average": load,
            "epochs_to_target": runs[0]["epochs_to_target"],
            "final_loss": runs[0]["losses"][-1], "losses": runs[0]["losses"],
            "epoch_end_s": median_run["epoch_end_s"]}


def machine_description() -> str:
    """The machine a measurement ran on: CPU model, logical CPUs, OS, Python and NumPy."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{model}, {os.cpu_count()} logical CPUs, {platform.system()} "
            f"{platform.machine()}, Python {platform.python_version()}, NumPy {np.__version__}")
