"""Host quantize+pack throughput, in MB/s of float32 input (goal: >= 100 MB/s per core).

The input is counted as float32 values, label included: ``samples * (features + 1) * 4`` bytes,
whatever dtype the host holds them in (float64 here).  Two paths, best of 3, one process (the
quantizer and packer are single-threaded NumPy):

* in memory: :func:`zipsgd.host.pack.quantize_epoch` (stochastic rounding + packing) on data
  already scaled to [-1, 1];
* to a file: :func:`zipsgd.host.pack.pack_source` from an in-memory source (statistics, scaling,
  quantizing, packing, CRC and writing the ``.zsgd`` file).

Run with ``make bench`` or ``python -m benchmarks host``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

from zipsgd.host.cpu_baseline import machine_description
from zipsgd.host.datasets import ArraySource
from zipsgd.host.pack import pack_source, quantize_epoch
from zipsgd.spec.stream import StreamLayout

SAMPLES, FEATURES = 20000, 100
CASES = [  # (encoding, bits, bus width)
    ("double", 1, 64), ("double", 4, 64), ("double", 8, 64), ("double", 4, 512),
    ("single", 4, 64), ("raw32", 32, 64),
]
GOAL_MB_S = 100.0


def best_of(runs: int, action, clock=time.perf_counter) -> float:
    """The shortest time of ``runs`` calls of ``action`` on ``clock``."""
    best = float("inf")
    for _ in range(runs):
        started = clock()
        action()
        best = min(best, clock() - started)
    return best


def _rates(megabytes: float, action) -> tuple[float, float]:
    """MB/s over wall time and over this process's CPU time (the per-core figure: the work is
    single-threaded, and CPU time does not count the time other processes hold the core)."""
    return (megabytes / best_of(3, action),
            megabytes / best_of(3, action, time.process_time))


def main() -> None:
    rng = np.random.default_rng(0)
    features = rng.uniform(-1, 1, (SAMPLES, FEATURES))
    labels = rng.uniform(-1, 1, SAMPLES)
    megabytes = SAMPLES * (FEATURES + 1) * 4 / 1e6
    print(f"machine: {machine_description()}")
    print(f"host quantize+pack: {SAMPLES} samples x {FEATURES} features = {megabytes:.2f} MB of "
          "float32 input, best of 3 (wall and CPU time), one process (python -m benchmarks host)")
    print(f"{'path':>9} {'layout':>14} {'MB/s wall':>9} {'MB/s CPU':>9}")
    figures = {}
    for encoding, bits, bus_width in CASES:
        layout = StreamLayout.make(encoding, bits, bus_width)
        wall, cpu = _rates(megabytes,
                           lambda lay=layout: quantize_epoch(labels, features, lay, 1, 0))
        figures[str(layout)] = cpu
        print(f"{'in memory':>9} {str(layout):>14} {wall:>9.1f} {cpu:>9.1f}")
    source = ArraySource(labels, features, "uniform")
    layout = StreamLayout.make("double", 4, 64)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.zsgd"
        wall, cpu = _rates(megabytes, lambda: pack_source(source, path, layout, force=True,
                                                          progress=False))
    print(f"{'to file':>9} {str(layout):>14} {wall:>9.1f} {cpu:>9.1f}")
    headline = figures["double4/W64"]
    print(f"goal >= {GOAL_MB_S:g} MB/s per core (double b=4, in memory, CPU time): "
          f"{headline:.1f} MB/s, {'met' if headline >= GOAL_MB_S else 'not met'}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

if __name__ == "__main__":
    main()
