"""Long epochs from DRAM in the simulated SoC, the ULX3S's DRAM configuration: LiteDRAM's
controller with its SDR SDRAM model, 16 bits at the 50 MHz system clock (the ULX3S's
AS4C32M16 is a 16-bit SDR SDRAM on the same controller and clock), refresh included.  Each run
is synthetic:100's shape (100 features and the label), 1,000 samples, two epochs from one
upload, bit-exact with the golden model.

Per encoding: the beats per epoch, the run's cycles per epoch (from CTRL.RUN to its end as the
host saw it), the beats per cycle the engine took, the DRAM read bandwidth that is (MB/s at
50 MHz) and the epoch time against raw32's, beside the ratio of their bits on the wire.

Run: ``python -m benchmarks dram``.
"""

from __future__ import annotations

import sys
import tempfile
import time

from zipsgd.hw.soc import SIM_CLOCK_HZ
from zipsgd.sim.soc_sim import run_soc
from zipsgd.spec.engine2 import EngineParams2

PARAMS = EngineParams2(64, 4096, 512)
FEATURES, SAMPLES, EPOCHS = 100, 1000, 2
ENCODINGS = [("raw32", 32), ("double", 1), ("double", 2), ("double", 4), ("double", 8),
             ("single", 4)]


def runs() -> list[dict]:
    return [{"encoding": encoding, "bits": bits, "n": FEATURES, "batch": 16, "mode": "delayed",
             "rounding": "truncate", "samples": SAMPLES, "epochs": EPOCHS, "data_seed": 11}
            for encoding, bits in ENCODINGS]


def main(argv=None) -> int:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        report = run_soc(PARAMS, runs(), tmp)
    raw = report[0]
    raw_epoch = raw["cycles"] / raw["epochs"]
    print("| encoding | b | beats per epoch | cycles per epoch | beats/cycle | DRAM MB/s | "
          "epoch time vs raw32 | beats vs raw32 |")
    print("|---|---|---|---|---|---|---|---|")
    for row in report:
        run = row["run"]
        epoch = row["cycles"] / row["epochs"]
        rate = row["beats"] / epoch
        mbs = rate * PARAMS.bus_width / 8 * SIM_CLOCK_HZ / 1e6
        print(f"| {run['encoding']} | {run['bits']} | {row['beats']} | {epoch:.0f} | "
              f"{rate:.3f} | {mbs:.1f} | {epoch / raw_epoch:.3f} | "
              f"{row['beats'] / raw['beats']:.3f} |")
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
