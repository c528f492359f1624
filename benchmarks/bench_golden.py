"""Throughput of the bit-exact engine model.

Prints feature values per second (one core: the golden model is single-threaded NumPy) for
several encodings and batch sizes on random data, timed on packed streams prepared beforehand
(``run_epoch`` only).  Host quantize+pack throughput is ``bench_host``.
Run with ``make bench`` or ``python -m benchmarks golden``.
"""

from __future__ import annotations

import numpy as np

from benchmarks.bench_host import best_of
from zipsgd.golden.engine import GoldenEngine
from zipsgd.host.cpu_baseline import machine_description
from zipsgd.host.quantize import epoch_rng, quantize_fields
from zipsgd.spec.engine import EngineParams, RunConfig
from zipsgd.spec.stream import StreamLayout, pack_beats_v1

SAMPLES = 20000
FEATURES = 100
CASES = [  # (encoding, bits, batch size)
    ("double", 4, 1), ("double", 4, 16), ("double", 4, 64), ("double", 8, 64),
    ("single", 4, 64), ("raw32", 32, 64),
]


def main() -> None:
    rng = np.random.default_rng(0)
    features = rng.uniform(-1, 1, (SAMPLES, FEATURES))
    labels = rng.uniform(-1, 1, SAMPLES)
    print(f"machine: {machine_description()}")
    print(f"golden model: {SAMPLES} samples x {FEATURES} features per epoch, W=64, "
          "best of 3 (python -m benchmarks golden)")
    print(f"{'encoding':>8} {'b':>3} {'batch':>5} {'Mvalues/s':>10}")
    for encoding, bits, batch in CASES:
        layout = StreamLayout.make(encoding, bits, 64)
        payload = pack_beats_v1(quantize_fields(labels, features, layout, epoch_rng(1, 0)), layout)
        config = RunConfig(encoding=encoding, bits=bits, n_features=FEATURES, batch_size=batch,
                           step=1 << 10, seed=3)
        samples = SAMPLES if batch > 1 else SAMPLES // 10
        part = payload[: samples * layout.sample_bytes_v1(FEATURES)]
        engine = GoldenEngine(EngineParams(), config)
        seconds = best_of(3, lambda e=engine, p=part: e.run_epoch(p))
        print(f"{encoding:>8} {bits:>3} {batch:>5} {samples * FEATURES / seconds / 1e6:>10.2f}")


if __name__ == "__main__":
    main()
