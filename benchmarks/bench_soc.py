"""Engine v2 in the simulated LiteX SoC (``zipsgd/hw/soc.py``): LiteDRAM's controller with its
SDR SDRAM model (16 bits at the system clock, so at most a quarter of a 64-bit beat per
cycle), the host's driver uploading each run's stream and running its epochs from DRAM; every
run checked bit for bit against the golden model.  The figure is the run's beats per cycle,
from CTRL.RUN to its end as the host saw it (polled every 64 cycles).

Run: ``python -m benchmarks soc``.
"""

from __future__ import annotations

import sys
import tempfile
import time

from zipsgd.sim.engine2_sim import memory_runs
from zipsgd.sim.soc_sim import run_soc
from zipsgd.spec.engine2 import EngineParams2

PARAMS = EngineParams2(64, 4096, 512)


def main(argv=None) -> int:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        report = run_soc(PARAMS, memory_runs(), tmp)
    print("| encoding | b | n | B | epochs | beats per epoch | run cycles | beats/cycle |")
    print("|---|---|---|---|---|---|---|---|")
    for row in report:
        run = row["run"]
        rate = row["beats"] * row["epochs"] / row["cycles"]
        print(f"| {run['encoding']} | {run['bits']} | {run['n']} | {run['batch']} | "
              f"{row['epochs']} | {row['beats']} | {row['cycles']} | {rate:.3f} |")
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
