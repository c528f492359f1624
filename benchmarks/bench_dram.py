"""Long epochs from DRAM in the simulated SoC, in each board's DRAM configuration
(``SOC_BOARDS[...].sim``): LiteDRAM's controller with its PHY model, 16 bits wide, refresh
included.

* ``ulx3s-85f``: an SDR SDRAM on LiteDRAM's SDR PHY settings (1:1) at 50 MHz (the ULX3S's
  AS4C32M16 is a 16-bit SDR SDRAM on the same controller and clock);
* ``orangecrab-85f`` and ``ecpix5-85``: the board's DDR3 module (its timings) with the ECP5
  DDR3 PHY's own settings (1:2, its CAS latencies and read pipeline) at the board's clock.
  LiteDRAM has no model of that PHY's I/O (its delays and read leveling), so this is the
  controller's and the module's share of the bandwidth.

Each run is synthetic:100's shape (100 features and the label), 1,000 samples and two epochs
from one upload, bit-exact with the golden model.  Per board and encoding: the beats per epoch,
the run's cycles per epoch (from CTRL.RUN to its end as the host saw it), the beats per cycle
the engine took, the DRAM read bandwidth that is, the epoch time, its ratio to raw32's beside
the ratio of their bits on the wire, and the speed-up over the CPU baseline: float64 mini-batch
SGD (``zipsgd.golden.float_sgd``, NumPy) on the same data and batch, on this machine.

Run: ``python -m benchmarks dram``.
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

from zipsgd.golden.float_sgd import SgdSettings, sgd_epoch
from zipsgd.hw.board_soc import SOC_BOARDS
from zipsgd.sim.soc_sim import run_soc
from zipsgd.spec.engine2 import EngineParams2

PARAMS = EngineParams2(64, 4096, 512)
FEATURES, SAMPLES, EPOCHS, BATCH = 100, 1000, 2, 16
ENCODINGS = [("raw32", 32), ("double", 1), ("double", 2), ("double", 4), ("double", 8),
             ("single", 4)]


def runs() -> list[dict]:
    return [{"encoding": encoding, "bits": bits, "n": FEATURES, "batch": BATCH,
             "mode": "delayed", "rounding": "truncate", "samples": SAMPLES, "epochs": EPOCHS,
             "data_seed": 11}
            for encoding, bits in ENCODINGS]


def cpu_epoch_seconds(repeats: int = 20) -> float:
    """The fastest of ``repeats`` float64 SGD epochs on data of the runs' shape."""
    rng = np.random.default_rng(11)
    features = rng.uniform(-1, 1, (SAMPLES, FEATURES))
    labels = features @ rng.uniform(-1, 1, FEATURES)
    settings = SgdSettings(alpha=0.01, batch_size=BATCH, delayed=True)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        sgd_epoch(np.zeros(FEATURES), features, labels, 1, settings)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    t0 = time.monotonic()
    cpu = cpu_epoch_seconds()
    print(f"CPU baseline: float64 SGD (NumPy), {SAMPLES} samples x {FEATURES} features, "
          f"B = {BATCH}: {cpu * 1e3:.2f} ms an epoch (the fastest of 20 on this machine)\n")
    print("| board | encoding | b | beats per epoch | cycles per epoch | beats/cycle | "
          "DRAM MB/s | epoch (ms) | vs raw32 | beats vs raw32 | vs CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for board in SOC_BOARDS.values():
        clock = board.sim.clock_hz
        with tempfile.TemporaryDirectory() as tmp:
            report = run_soc(PARAMS, runs(), tmp, dram=board.sim)
        raw = report[0]
        raw_epoch = raw["cycles"] / raw["epochs"]
        for row in report:
            run = row["run"]
            epoch = row["cycles"] / row["epochs"]
            rate = row["beats"] / epoch
            mbs = rate * PARAMS.bus_width / 8 * clock / 1e6
            seconds = epoch / clock
            print(f"| {board.name} | {run['encoding']} | {run['bits']} | {row['beats']} | "
                  f"{epoch:.0f} | {rate:.3f} | {mbs:.1f} | {seconds * 1e3:.3f} | "
                  f"{epoch / raw_epoch:.3f} | {row['beats'] / raw['beats']:.3f} | "
                  f"{cpu / seconds:.2f}x |")
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
