"""Bus efficiency of the engine and the speed of its simulation.

For every precision of one build (W = 64, N_max = 1024, B_max = 64), one epoch of 2048 samples of
64 features in mini-batches of 64, with the input never idle: beats / cycles from start to done
(the epoch's drain and flush included), for both update modes; "epoch overhead" is the cycles
that are neither beats nor stalls (start, drain, end-of-epoch flush).  Every epoch is also checked
bit for bit against the golden model, and compared with the performance model's cycle count
(``zipsgd.host.perf.predicted_cycles``).  Simulation speed is beats per second of wall time while
streaming.  Run with ``make bench`` or ``python -m benchmarks engine``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from zipsgd.host.cpu_baseline import machine_description
from zipsgd.host.perf import predicted_cycles
from zipsgd.hw.top import TOP_NAME, ZipsgdEngine
from zipsgd.sim import runner
from zipsgd.spec.engine import sim_params
from zipsgd.spec.fixed import RoundingMode
from zipsgd.spec.stream import StreamLayout

FEATURES, BATCH, SAMPLES = 64, 64, 2048
PRECISIONS = [("double", b) for b in range(1, 9)] + [("single", 1), ("single", 4),
                                                     ("raw32", 32)]


def main() -> None:
    params = sim_params(64)
    runs = []
    for mode in (0, 1):
        for encoding, bits in PRECISIONS:
            runs.append({"config": {"encoding": encoding, "bits": bits, "n_features": FEATURES,
                                    "batch_size": BATCH, "step": 1 << 14, "seed": 1,
                                    "update_mode": mode,
                                    "rounding": int(RoundingMode.STOCHASTIC)},
                         "samples": SAMPLES, "epochs": 1, "seed": 1})
    with tempfile.TemporaryDirectory() as folder:
        report_path = Path(folder) / "report.json"
        runner.build_and_test(ZipsgdEngine(params), TOP_NAME, "zipsgd.sim.engine_bench",
                              testcase="engine_matches_golden",
                              test_params={"params": params.__dict__, "runs": runs},
                              extra_env={"ZIPSGD_SIM_REPORT": str(report_path)})
        report = json.loads(report_path.read_text())
    print(f"machine: {machine_description()}")
    print(f"engine W=64, {FEATURES} features, batch {BATCH}, {SAMPLES} samples per epoch, input "
          "never idle (python -m benchmarks engine)")
    print(f"{'layout':>14} {'mode':>8} {'beats':>7} {'cycles':>7} {'beats/cycle':>11} "
          f"{'update stall':>12} {'epoch overhead':>14} {'sim beats/s':>11} {'model':>7} "
          f"{'error':>7}")
    errors = []
    for row, run in zip(report, runs, strict=True):
        mode = "exact" if run["config"]["update_mode"] == 0 else "delayed"
        speed = row["beats"] / row["wall_s"] if row["wall_s"] else float("nan")
        overhead = row["cycles_busy"] - row["beats"] - row["cycles_update_stall"] \
            - row["cycles_starved"]
        config = run["config"]
        layout = StreamLayout.make(config["encoding"], config["bits"], params.bus_width)
        model = predicted_cycles(SAMPLES, FEATURES, layout, BATCH, mode)
        errors.append((model - row["cycles_busy"]) / row["cycles_busy"])
        print(f"{row['layout']:>14} {mode:>8} {row['beats']:>7} {row['cycles_busy']:>7} "
              f"{row['beats'] / row['cycles_busy']:>11.4f} {row['cycles_update_stall']:>12} "
              f"{overhead:>14} {speed:>11.0f} {model:>7} {100 * errors[-1]:>+6.2f}%")
    total_beats = sum(r["beats"] for r in report)
    total_wall = sum(r["wall_s"] for r in report)
    print(f"simulation: {total_beats} beats in {total_wall:.1f} s of streaming = "
          f"{total_beats / total_wall:.0f} beats/s (cocotb + Verilator, one process)")
    print(f"performance model vs simulated cycles: largest error "
          f"{100 * max(map(abs, errors)):.3f} % over {len(errors)} epochs")


if __name__ == "__main__":
    main()
