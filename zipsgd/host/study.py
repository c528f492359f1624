"""Studies anyone can rerun: the convergence study of the ZipML claims, and the demo.

Convergence study (``zipsgd study convergence``): for each data set, the step size ``alpha`` is
tuned for float64 SGD over :data:`ALPHA_GRID` (best final loss; the paper tunes for full
precision and reuses the step for low precision), then the bit-exact engine model trains with
the ``single`` and ``double`` encodings at every ``b`` with the same ``alpha``, batch size,
epochs and seed.  The table compares each final training loss (the exact objective on the
unquantized scaled data) with float SGD's and with the optimum.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from ..spec.engine2 import BOARD_PARAMS2
from ..spec.errors import ConfigError, OutputExistsError
from .datasets import open_source
from .output import check_output_folder
from .pack import pack_source
from .perf import EngineModel2
from .report import plot_losses, write_json, write_text
from .train import TrainSettings, load_scaled, train_in_memory

__all__ = ["StudyDataset", "STUDY_DATASETS", "ALPHA_GRID", "run_convergence_study", "run_demo",
           "convergence_rows", "demo_settings", "demo_model_efficiency", "DEMO_BATCH"]

ALPHA_GRID = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)
#: The paper's claim: double sampling reaches the float solution within this relative gap.
CLAIM_GAP = 0.01


@dataclass(frozen=True)
class StudyDataset:
    """A data set of the study with its training schedule."""

    spec: str
    epochs: int
    batch_size: int = 16
    intercept: bool = False


STUDY_DATASETS = {
    "synthetic:100": StudyDataset("synthetic:100", epochs=20),
    "sklearn:diabetes": StudyDataset("sklearn:diabetes", epochs=60, intercept=True),
}


def _dataset(spec: str, epochs: int | None) -> StudyDataset:
    entry = STUDY_DATASETS.get(spec, StudyDataset(spec, epochs=20))
    return replace(entry, epochs=epochs) if epochs else entry


def tune_alpha(data, base: TrainSettings) -> tuple[float, dict]:
    """The alpha of :data:`ALPHA_GRID` with the lowest final float-SGD loss, and its report
    (an alpha whose run diverges is passed over)."""
    best = None
    for alpha in ALPHA_GRID:
        try:
            report = train_in_memory(data, replace(base, backend="float", step_size=alpha))
        except ConfigError:  # this alpha diverges: the run stopped
            continue
        loss = report["epochs"][-1]["loss"]
        if best is None or loss < best[1]["epochs"][-1]["loss"]:
            best = (alpha, report)
    return best


def convergence_rows(spec: str, bits, epochs: int | None = None, seed: int = 0,
                     progress: bool = True) -> dict:
    """Run the study on one data set; returns ``{"rows": [...], "reports": {...}, ...}``."""
    entry = _dataset(spec, epochs)
    data = load_scaled(entry.spec, intercept=entry.intercept)
    base = TrainSettings(epochs=entry.epochs, batch_size=entry.batch_size, seed=seed)
    alpha, float_report = tune_alpha(data, base)
    float_loss = float_report["epochs"][-1]["loss"]
    optimum = float_report["optimum"]["loss"]
    reports = {"float": float_report}
    rows = [_row("float", "-", 32, float_loss, float_loss, optimum, float_report)]
    runs = [(enc, b) for enc in ("single", "double") for b in bits]
    for encoding, b in tqdm(runs, desc=spec, disable=None if progress else True, leave=False):
        settings = replace(base, backend="golden", encoding=encoding, bits=b, step_size=alpha)
        report = train_in_memory(data, settings)
        reports[f"{encoding} b={b}"] = report
        row = _row(encoding, b, settings.layout().field_width, report["epochs"][-1]["loss"],
                   float_loss, optimum, report)
        # The same run on engine v2's numerics (the golden2 model).
        v2 = train_in_memory(data, replace(settings, backend="golden2"))["epochs"][-1]["loss"]
        row.update(final_loss_v2=v2, v2_vs_v1=v2 / row["final_loss"] - 1.0)
        rows.append(row)
    doubles = [r for r in rows if r["encoding"] == "double" and r["gap_to_float"] <= CLAIM_GAP]
    return {"dataset": entry.spec, "n_samples": data.features.shape[0],
            "n_features": data.features.shape[1], "epochs": entry.epochs,
            "batch_size": entry.batch_size, "alpha": alpha, "seed": seed,
            "intercept": entry.intercept, "optimum_loss": optimum, "float_loss": float_loss,
            "smallest_double_bits_within_1pct": min((r["bits"] for r in doubles), default=None),
            "rows": rows, "reports": reports}


def _row(encoding, bits, field_width, loss, float_loss, optimum, report) -> dict:
    return {"encoding": encoding, "bits": bits, "field_bits": field_width, "final_loss": loss,
            "gap_to_float": loss / float_loss - 1.0, "gap_to_optimum": loss / optimum - 1.0,
            "bytes_streamed": report["bytes_streamed"]}


def _markdown(results: list[dict], command: str, seconds: float) -> str:
    lines = ["# Convergence: float SGD vs the bit-exact engine, single vs double sampling", "",
             f"Made by `{command}` in {seconds:.0f} s. Final training loss is the exact "
             "objective `1/(2K) sum (a.x - b)^2` on the unquantized scaled data after the last "
             "epoch. `alpha` was tuned for float SGD over "
             f"{list(ALPHA_GRID)} and reused for every encoding (step alpha/k in epoch k); "
             "engine model <32,24>, gradient <32,24>, stochastic rounding, exact mini-batch "
             "updates, W = 64.", ""]
    for result in results:
        lines += [f"## {result['dataset']}", "",
                  f"{result['n_samples']} samples x {result['n_features']} features"
                  f"{' (with intercept column)' if result['intercept'] else ''}; "
                  f"{result['epochs']} epochs, batch {result['batch_size']}, "
                  f"alpha {result['alpha']}, seed {result['seed']}; optimum loss "
                  f"{result['optimum_loss']:.6g} (closed form).", "",
                  "| encoding | b | bits per field | final loss | vs float | vs optimum | "
                  "engine v2 final loss | v2 vs v1 |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in result["rows"]:
            v2 = (f"{row['final_loss_v2']:.6g} | {100 * row['v2_vs_v1']:+.4f}%"
                  if "v2_vs_v1" in row else "- | -")
            lines.append(f"| {row['encoding']} | {row['bits']} | {row['field_bits']} | "
                         f"{row['final_loss']:.6g} | {100 * row['gap_to_float']:+.2f}% | "
                         f"{100 * row['gap_to_optimum']:+.2f}% | {v2} |")
        gaps = [abs(r["v2_vs_v1"]) for r in result["rows"] if "v2_vs_v1" in r]
        if gaps:
            lines += ["", f"Engine v2's numerics (the `golden2` model, same data, seeds and "
                          f"schedule): largest difference from v1's final loss "
                          f"{100 * max(gaps):.4f}% (goal: within 0.1%)."]
        by_key = {(r["encoding"], r["bits"]): r for r in result["rows"]}
        pairs = [(b, by_key[("double", b)], by_key[("single", b + 1)])
                 for (enc, b) in by_key if enc == "double" and ("single", b + 1) in by_key]
        if pairs:
            lines += ["", "At equal bits per field (double b vs single b+1): " + "; ".join(
                f"{b + 2} bits: double {100 * d['gap_to_float']:+.2f}% vs single "
                f"{100 * s['gap_to_float']:+.2f}%" for b, d, s in pairs) + "."]
        smallest = result["smallest_double_bits_within_1pct"]
        lines += ["", f"Smallest b at which `double` ends within 1% of float SGD: "
                      f"{smallest if smallest is not None else 'none'}.", "",
                  f"![loss curves](convergence_{_slug(result['dataset'])}.png)", ""]
    return "\n".join(lines)


def _slug(spec: str) -> str:
    return spec.replace(":", "_").replace("/", "_")


def check_study_arguments(datasets, bits, epochs) -> None:
    """A study's data sets (each opened), ``bits`` (1..8 each, at least one) and ``epochs``
    (None or >= 1), checked before anything is made.

    Raises
    ------
    ConfigError, DatasetError
    """
    bits = list(bits)
    if not bits or any(not isinstance(b, int) or not 1 <= b <= 8 for b in bits):
        raise ConfigError(f"bits must be integers in 1..8, found {bits}")
    if epochs is not None and (not isinstance(epochs, int) or epochs < 1):
        raise ConfigError(f"epochs must be >= 1, found {epochs!r}")
    for spec in datasets:  # each one found and readable before anything is made
        open_source(spec)


def prepare_outputs(out: Path, names, force: bool) -> None:
    """Refuse a study whose files exist in ``out`` (without ``force``), then make ``out``.

    Raises
    ------
    OutputExistsError, OutputError
    """
    existing = [str(out / name) for name in names if (out / name).exists()]
    if existing and not force:
        raise OutputExistsError(f"{', '.join(existing)} exist; pass --force to overwrite")
    check_output_folder(out, create=True)


def run_convergence_study(datasets, bits=range(1, 9), epochs=None, out="docs/results",
                          force=False, seed: int = 0) -> list[dict]:
    """Run the study and write ``convergence.md``, ``convergence.json`` and one plot per data
    set into ``out``; returns the per-data-set results (without the full reports)."""
    check_study_arguments(datasets, bits, epochs)
    out = Path(out)
    prepare_outputs(out, ["convergence.md", "convergence.json"]
                    + [f"convergence_{_slug(d)}.png" for d in datasets], force)
    started = time.perf_counter()
    results = []
    for spec in datasets:
        result = convergence_rows(spec, list(bits), epochs, seed)
        reports = result.pop("reports")
        shown = {k: v for k, v in reports.items()
                 if k == "float" or k.endswith(("b=2", "b=4", "b=6", "b=8"))}
        plot_losses(shown, out / f"convergence_{_slug(spec)}.png", force=force,
                    title=f"{spec}: float vs engine (single/double)")
        results.append(result)
        _print_result(result)
    command = "zipsgd study convergence" + (f" --epochs {epochs}" if epochs else "")
    write_text(_markdown(results, command, time.perf_counter() - started),
               out / "convergence.md", force=force)
    write_json(results, out / "convergence.json", force=force)
    return results


def _print_result(result: dict) -> None:
    print(f"{result['dataset']}: alpha={result['alpha']} optimum={result['optimum_loss']:.6g}")
    for row in result["rows"]:
        print(f"  {row['encoding']:>6} b={row['bits']!s:<2} loss={row['final_loss']:.6g} "
              f"vs float {100 * row['gap_to_float']:+7.2f}%")


#: The demo's batch: DELAYED batch ``k + 2`` waits for batch ``k``'s update, which takes
#: about 170 cycles at n = 100 (``docs/HARDWARE.md``, "The update loop"); 32 samples at
#: double b = 4 stream for 303 cycles, so the engine never waits (16 is at the edge: 0.98 of
#: the bus in the cycle model; 8 would give 0.57).
DEMO_BATCH = 32


def demo_settings(epochs: int = 5) -> TrainSettings:
    """The demo's run: double sampling at b = 4, on engine v2 as the boards build it
    (:data:`~zipsgd.spec.engine2.BOARD_PARAMS2`) with the update mode a board uses (DELAYED)."""
    return TrainSettings(backend="verilator2", epochs=epochs, batch_size=DEMO_BATCH,
                         step_size=0.125, bits=4, update_mode="delayed",
                         bus_width=BOARD_PARAMS2.bus_width,
                         max_features=BOARD_PARAMS2.max_features,
                         max_batch=BOARD_PARAMS2.max_batch)


def demo_model_efficiency(settings: TrainSettings, n_samples: int, n_features: int) -> float:
    """Beats per cycle of one of the demo's epochs in engine v2's cycle model."""
    run = EngineModel2(settings.bus_width).cycles(n_samples, n_features, settings.layout(),
                                                  settings.batch_size, settings.update_mode)
    return run["beats"] / run["cycles"]


def run_demo(out="build/demo", epochs: int = 5, spec: str = "synthetic:100") -> dict:
    """The README's main job: pack ``spec`` at 4 bits (double sampling) into a ``.zsgd`` file,
    train on engine v2 as the boards build it, simulated by Verilator, with the golden model
    and float SGD side by side, check every epoch bit for bit, and save a plot and the
    reports."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = demo_settings(epochs)
    stream_path = out / f"{_slug(spec)}_double4.zsgd"
    header = pack_source(open_source(spec), stream_path, base.layout(), epochs=1, force=True)
    print(f"packed {stream_path}: {header.n_samples} samples x {header.n_features} features, "
          f"{base.layout()}, {header.payload_bytes} payload bytes "
          f"({header.bits_per_value:.2f} bits per value)")
    data = load_scaled(spec)
    print(f"engine v2 as the boards build it: W = {base.bus_width} ({base.bus_width // 2} "
          f"lanes), N_max = {base.max_features}, B_max = {base.max_batch}; "
          f"{base.update_mode.upper()} updates, batches of {base.batch_size}")
    print("building the engine (Verilator; cached after the first run) and simulating "
          f"{epochs} epochs ...", flush=True)
    bar = tqdm(total=epochs, desc="engine", unit="epoch", disable=None, leave=False)
    simulated = train_in_memory(data, base, lambda done, _record: bar.update(done - bar.n))
    bar.close()
    reports = {"float SGD": train_in_memory(data, replace(base, backend="float")),
               "engine v2 (Verilator) double b=4": simulated}
    print(f"{'epoch':>5} {'float SGD':>12} {'golden':>12} {'engine':>12} {'bit-exact':>9} "
          f"{'cycles':>9} {'bus eff.':>8}")
    for k in range(epochs):
        row = simulated["epochs"][k]
        print(f"{k + 1:>5} {reports['float SGD']['epochs'][k]['loss']:>12.6g} "
              f"{row['golden_loss']:>12.6g} {row['loss']:>12.6g} "
              f"{'yes' if row['bit_exact'] else 'NO':>9} {row['cycles']:>9} "
              f"{row['bus_efficiency']:>8.4f}")
    print(f"optimum (closed form) {simulated['optimum']['loss']:.6g}; the engine's model and "
          f"counters {'equal' if simulated['bit_exact'] else 'DIFFER FROM'} the golden "
          "model's after every epoch")
    efficiency = min(row["bus_efficiency"] for row in simulated["epochs"])
    modeled = demo_model_efficiency(base, header.n_samples, header.n_features)
    print(f"bus efficiency {efficiency:.4f} beats/cycle (the lowest epoch's; the cycle "
          f"model's {modeled:.4f}; goal >= 0.98)")
    plot_losses(reports, out / "demo_loss.png", force=True,
                title=f"{spec}: engine v2 (double sampling, 4 bits) vs float SGD")
    write_json(simulated, out / "demo_report.json", force=True)
    print(f"plot: {out / 'demo_loss.png'}  report: {out / 'demo_report.json'}")
    return reports
