"""Engine v2's throughput: beats per cycle of the core under Verilator (every epoch checked bit
for bit against the golden model), against the cycle model ``zipsgd.host.perf.EngineModel2``.

Run: ``python -m benchmarks throughput2`` (prints the tables); ``python
benchmarks/bench_throughput2.py --write`` also writes ``docs/results/throughput.md``.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

from zipsgd.host.perf import EngineModel2
from zipsgd.sim.core2_sim import run_core2
from zipsgd.spec.engine2 import EngineParams2
from zipsgd.spec.stream import StreamLayout

PARAMS = EngineParams2(64, 4096, 512)
PRECISIONS = [("double", b) for b in range(1, 9)] + [("single", 1), ("single", 4),
                                                     ("single", 8), ("raw32", 32)]
FEATURES = (8, 11, 100)
BATCHES = (16, 256)
MODES = ("delayed", "exact")
PAGE = Path(__file__).resolve().parent.parent / "docs" / "results" / "throughput.md"


def runs() -> list[dict]:
    out = []
    for (encoding, bits), n, batch, mode in itertools.product(PRECISIONS, FEATURES, BATCHES,
                                                              MODES):
        out.append({"encoding": encoding, "bits": bits, "n": n, "batch": batch, "mode": mode,
                    "samples": max(4 * batch, 1024), "epochs": 1, "data_seed": 1, "alpha": 0.01})
    return out


def table(report: list[dict]) -> tuple[list[str], float, float]:
    model = EngineModel2(PARAMS.bus_width)
    lines = ["| encoding | b | n | B | mode | beats | cycles | beats/cycle | model cycles | "
             "model error | long-epoch beats/cycle (model) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    worst = worst_large = 0.0
    for row in report:
        run = row["run"]
        layout = StreamLayout.make(run["encoding"], run["bits"], PARAMS.bus_width)
        predicted = model.cycles(run["samples"], run["n"], layout, run["batch"], run["mode"])
        error = abs(predicted["cycles"] - row["cycles"]) / row["cycles"]
        worst = max(worst, error)
        if row["cycles"] >= 2000:
            worst_large = max(worst_large, error)
        lines.append(f"| {run['encoding']} | {run['bits']} | {run['n']} | {run['batch']} | "
                     f"{run['mode']} | {row['beats']} | {row['cycles']} | "
                     f"{row['beats'] / row['cycles']:.3f} | {predicted['cycles']:.0f} | "
                     f"{100 * error:.1f} % | {predicted['steady']:.3f} |")
    return lines, worst, worst_large


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    started = time.perf_counter()
    report = run_core2(PARAMS, runs())
    lines, worst, worst_large = table(report)
    text = "\n".join(lines)
    print(text)
    within = sum(1 for line in lines[2:] if float(line.split("|")[10].split()[0]) <= 1.0)
    print(f"\nworst model error {100 * worst:.1f} %; on epochs of at least 2,000 cycles "
          f"{100 * worst_large:.1f} %; within 1 %: {within} of {len(lines) - 2} "
          f"({time.perf_counter() - started:.0f} s)")
    if "--write" in argv:
        _write(text, worst, worst_large, within, len(lines) - 2)


def _write(text: str, worst: float, worst_large: float, within: int, rows: int) -> None:
    head = ("# Engine v2 throughput\n\n"
            "Made by `python benchmarks/bench_throughput2.py --write`: the core of engine v2 "
            "(W = 64) under Verilator, input never idle, each epoch at least 1,024 samples "
            "and four batches, checked bit for bit against the golden model; cycles from the "
            "epoch's start to its end (the refresh pass and the last update included). The "
            "model is "
            "`zipsgd.host.perf.EngineModel2`; its last column is the rate of a long epoch of "
            "full batches (`docs/HARDWARE.md`, \"The update loop\").\n\n")
    PAGE.write_text(head + text + f"\n\nModel error: within 1 % on {within} of {rows} runs; "
                    f"worst {100 * worst:.1f} %, on epochs of at least 2,000 cycles "
                    f"{100 * worst_large:.1f} %.\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
