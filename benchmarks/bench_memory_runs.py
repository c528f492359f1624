"""Memory runs of engine v2 under Verilator: the engine's AXI4 master reads each epoch from
cocotbext-axi's ``AxiRamRead`` with 20-100 cycles of latency per burst and an R channel that
never pauses (the port's bandwidth: one beat per cycle); every run checked bit for bit against
the golden model.  The figures are the run's beats per cycle, from CTRL.RUN to the run's end,
and the same epochs streamed through the AXI4-Stream input with no idle cycle (the core's own
rate: its busy cycles per epoch); their ratio is what reading from memory costs.

Run: ``python -m benchmarks memory_runs``.
"""

from __future__ import annotations

import sys
import tempfile
import time

from zipsgd.sim.engine2_sim import run_engine2
from zipsgd.spec.engine2 import EngineParams2

PARAMS = EngineParams2(64, 4096, 512)
PRECISIONS = [("double", b) for b in range(1, 9)] + [("single", 4), ("raw32", 32)]


def runs(n: int = 100, batch: int = 16, samples: int = 512, epochs: int = 2) -> list[dict]:
    return [{"encoding": e, "bits": b, "n": n, "batch": batch, "mode": "delayed",
             "samples": samples, "epochs": epochs, "data_seed": 1, "alpha": 0.01}
            for e, b in PRECISIONS]


def main(argv=None) -> int:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        report = run_engine2(PARAMS, runs(), tmp, testcase="engine2_memory_runs")
        streamed = run_engine2(PARAMS, runs(), tmp, testcase="engine2_matches_golden")
    print("| encoding | b | n | B | epochs | beats per epoch | run cycles | beats/cycle | "
          "streamed cycles | beats/cycle | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in report:
        run = row["run"]
        rate = row["beats"] * row["epochs"] / row["cycles"]
        busy = sum(r["cycles_busy"] for r in streamed if r["run"] == run)
        beats = sum(r["beats"] for r in streamed if r["run"] == run)
        print(f"| {run['encoding']} | {run['bits']} | {run['n']} | {run['batch']} | "
              f"{row['epochs']} | {row['beats']} | {row['cycles']} | {rate:.3f} | {busy} | "
              f"{beats / busy:.3f} | {busy / row['cycles']:.3f} |")
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
