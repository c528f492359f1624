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


def best_of(runs: int, action) -> float:
    """The shortest wall time of ``runs`` calls of ``action``."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    features = rng.uniform(-1, 1, (SAMPLES, FEATURES))
    labels = rng.uniform(-1, 1, SAMPLES)
    megabytes = SAMPLES * (FEATURES + 1) * 4 / 1e6
    print(f"machine: {machine_description()}")
    print(f"host quantize+pack: {SAMPLES} samples x {FEATURES} features = {megabytes:.2f} MB of "
          "float32 input, best of 3, one process (python -m benchmarks host)")
    print(f"{'path':>9} {'layout':>14} {'MB/s':>8}")
    figures = {}
    for encoding, bits, bus_width in CASES:
        layout = StreamLayout.make(encoding, bits, bus_width)
        seconds = best_of(3, lambda lay=layout: quantize_epoch(labels, features, lay, 1, 0))
        figures[str(layout)] = megabytes / seconds
        print(f"{'in memory':>9} {str(layout):>14} {megabytes / seconds:>8.1f}")
    source = ArraySource(labels, features, "uniform")
    layout = StreamLayout.make("double", 4, 64)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.zsgd"
        seconds = best_of(3, lambda: pack_source(source, path, layout, force=True,
                                                 progress=False))
    print(f"{'to file':>9} {str(layout):>14} {megabytes / seconds:>8.1f}")
    headline = figures["double4/W64"]
    print(f"goal >= {GOAL_MB_S:g} MB/s per core (double b=4, in memory): {headline:.1f} MB/s, "
          f"{'met' if headline >= GOAL_MB_S else 'not met'}")


if __name__ == "__main__":
    main()
