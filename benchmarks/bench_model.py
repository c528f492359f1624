"""The performance model's cycle count against the simulated engine's.

For a few epoch shapes (feature counts that fill or pad the last beat, batch sizes from 1 to 64,
both update modes, every encoding) one epoch runs on the simulated engine (Verilator, W = 64,
``N_max`` = 1024, ``B_max`` = 64: the engine bench's build, so no extra build; input never idle;
bit-exact against the golden model) through :func:`zipsgd.host.perf.measure_cycles_busy`, and
:func:`zipsgd.host.perf.predicted_cycles` predicts its ``cycles_busy``.  Prints both and the
relative error.  About a minute per row on an idle machine.  Run with ``make bench`` or
``python -m benchmarks model``.
"""

from __future__ import annotations

import time

from zipsgd.host.cpu_baseline import machine_description
from zipsgd.host.perf import measure_cycles_busy, predicted_cycles
from zipsgd.spec.stream import StreamLayout

ROWS = [  # (encoding, bits, n_features, n_samples, batch, update mode)
    ("double", 4, 64, 256, 64, "exact"),
    ("double", 2, 100, 250, 16, "delayed"),
    ("single", 1, 3, 400, 4, "delayed"),
    ("double", 8, 7, 300, 1, "delayed"),
]


def main() -> None:
    print(f"machine: {machine_description()}")
    print("model vs simulated cycles_busy, one epoch each, W=64 (python -m benchmarks model)")
    print(f"{'layout':>12} {'features':>8} {'samples':>7} {'batch':>5} {'mode':>7} "
          f"{'simulated':>9} {'model':>9} {'error':>8} {'bit-exact':>9} {'wall s':>6}")
    errors = []
    for encoding, bits, n_features, n_samples, batch, mode in ROWS:
        layout = StreamLayout.make(encoding, bits, 64)
        started = time.perf_counter()
        counts = measure_cycles_busy(encoding, bits, n_features, n_samples, batch, mode, 64)
        wall = time.perf_counter() - started
        model = predicted_cycles(n_samples, n_features, layout, batch, mode)
        error = (model - counts["cycles_busy"]) / counts["cycles_busy"]
        errors.append(abs(error))
        print(f"{str(layout):>12} {n_features:>8} {n_samples:>7} {batch:>5} {mode:>7} "
              f"{counts['cycles_busy']:>9} {model:>9} {100 * error:>+7.3f}% "
              f"{'yes' if counts['bit_exact'] else 'NO':>9} {wall:>6.1f}", flush=True)
    print(f"largest model error: {100 * max(errors):.3f} % of cycles_busy over {len(errors)} "
          "epochs")


if __name__ == "__main__":
    main()
