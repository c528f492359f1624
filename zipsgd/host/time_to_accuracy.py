"""Time to accuracy: epochs each encoding needs to reach a target loss, times the modeled epoch.

For one data set and platform (``zipsgd perf SOURCE --target``):

1. float SGD (:mod:`zipsgd.golden.float_sgd`) trains for ``E`` epochs; its final training loss
   times ``1 + TARGET_GAP`` is the target (the float solution's final loss + 1 %);
2. engine v2's bit-exact model (the golden2 backend of ``zipsgd train``, same step schedule
   ``alpha / k``, batch, update mode and seed, the platform's bus width) trains with ``raw32``
   and with ``single`` and ``double`` at each ``b``; an encoding's *epochs to target* is the
   first epoch whose training loss is at most the target (None: not reached in ``E`` epochs);
3. its modeled time to target is that many epochs of :func:`~zipsgd.host.perf.epoch_cost`'s
   ``time_s`` (engine v2 fed at the platform's memory rate); its speedup is raw32's time to
   target over its own;
4. a CPU baseline (:mod:`zipsgd.host.cpu_baseline`) measures NumPy mini-batch SGD on this
   machine to the same target, wall time.

The step size ``alpha`` is the convergence study's (float SGD's best final loss over
``ALPHA_GRID``) unless given.  Losses are the exact objective on the unquantized scaled data.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..spec.errors import ConfigError, DatasetError
from ..spec.stream import Encoding, StreamLayout
from .cpu_baseline import machine_description, measure_cpu_baseline
from .perf import PLATFORMS, TARGET_GAP, Platform, epoch_cost
from .report import write_json, write_text
from .study import STUDY_DATASETS, check_study_arguments, prepare_outputs, tune_alpha
from .train import UPDATE_MODES, TrainSettings, load_scaled, train_in_memory
from .zsgd_file import atomic_output

__all__ = ["Schedule", "schedule_for", "first_epoch_reaching", "training_curves",
           "FieldLayout", "time_to_accuracy", "format_table", "summary_lines", "plot_curves",
           "plot_name", "REFERENCES",
           "PERFORMANCE_DATASETS", "PERFORMANCE_PLATFORMS", "SPEEDUP_GOAL", "DEFAULT_BITS",
           "run_performance_study"]

DEFAULT_BITS = (1, 2, 4, 6, 8)
#: The data sets and platforms of ``docs/results/performance.md``: the boards whose DRAM is
#: measured, and the papers' platform.
PERFORMANCE_DATASETS = ("synthetic:10", "synthetic:100", "synthetic:1000", "sklearn:diabetes")
PERFORMANCE_PLATFORMS = ("ulx3s-85f", "orangecrab-85f", "harp-v1")
#: The goal: at equal final loss, this many times less time than raw32.
SPEEDUP_GOAL = 8.0

#: Published points to place the table against (context only: nothing here is measured).
REFERENCES = (
    "ZipML (Zhang et al., ICML 2017, sec. 4 'Speedup'): the FPGA prototype on Intel Xeon+FPGA "
    "(harp-v1 here) converges 6-7x faster with quantized data than with 32-bit data ('up to "
    "6.5x'); the 32-bit engine is memory-bandwidth bound and 5-6 bit data save up to 8x bandwidth.",
    "ZipML-XeonFPGA (public fpgasystems repository, Kara et al., FCCM 2017): stores the two "
    "samples of double sampling as two b-bit values, 2b bits per value; zipsgd stores one b-bit "
    "index plus one bit per sample, b+2 bits, a saving from b = 3 on (row '2b-bit layout': the "
    "same epochs as double b, modeled with 2b-bit fields).",
    "MLWeaving (Wang et al., VLDB 2019): a bit-weaving memory layout lets one engine read any "
    "precision from a single copy of the data, b bits per value without padding, but rounds each "
    "value once (no double sampling): its convergence per epoch is that of the 'single' rows.",
)


@dataclass(frozen=True)
class Schedule:
    """The training schedule shared by float SGD, every encoding and the CPU baseline.

    ``step_size`` None means: tune it for float SGD as the convergence study does.
    """

    epochs: int = 20
    batch_size: int = 16
    step_size: float | None = None
    update_mode: str = "delayed"
    seed: int = 0
    intercept: bool = False

    def __post_init__(self):
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ConfigError(f"epochs must be an integer >= 1, found {self.epochs!r}")
        if self.update_mode not in UPDATE_MODES:
            raise ConfigError(f"update mode must be exact or delayed, found "
                              f"{self.update_mode!r}")
        if self.step_size is not None and not (math.isfinite(self.step_size)
                                               and self.step_size > 0):
            raise ConfigError(f"step size must be > 0, found {self.step_size!r}")


def schedule_for(spec: str, epochs: int | None = None, **changes) -> Schedule:
    """The convergence study's schedule for ``spec`` (its epochs, batch and intercept; 20 epochs
    of batch 16 for other sources), with ``epochs`` and ``changes`` applied."""
    entry = STUDY_DATASETS.get(spec)
    schedule = Schedule(epochs=entry.epochs, batch_size=entry.batch_size,
                        intercept=entry.intercept) if entry else Schedule()
    if epochs is not None:
        changes["epochs"] = epochs
    return replace(schedule, **changes)


def first_epoch_reaching(losses, target: float) -> int | None:
    """The first epoch (counted from 1) whose loss is at most ``target``; None if none is."""
    for epoch, loss in enumerate(losses, start=1):
        if loss is not None and loss <= target:
            return epoch
    return None


def training_curves(data, encodings, schedule: Schedule, bus_width: int) -> dict:
    """Train float SGD and engine v2's golden model of each ``(encoding, bits)`` for
    ``schedule.epochs`` epochs; returns ``alpha``, ``float_losses``, ``target_loss`` and
    ``losses`` ({(encoding, bits): per-epoch training losses})."""
    base = TrainSettings(epochs=schedule.epochs, batch_size=schedule.batch_size,
                         update_mode=schedule.update_mode, seed=schedule.seed,
                         bus_width=bus_width, step_size=schedule.step_size or 0.5)
    if schedule.step_size is None:
        alpha, float_report = tune_alpha(data, base)
    else:
        alpha = schedule.step_size
        float_report = train_in_memory(data, replace(base, backend="float"))
    float_losses = [r["loss"] for r in float_report["epochs"]]
    losses, diverged = {}, {}
    for encoding, bits in encodings:
        try:
            report = train_in_memory(data, replace(base, backend="golden2", encoding=encoding,
                                                   bits=bits, step_size=alpha))
        except ConfigError as error:   # the run diverged at float SGD's step: no losses
            losses[(encoding, bits)], diverged[(encoding, bits)] = [], str(error)
            continue
        losses[(encoding, bits)] = [r["loss"] for r in report["epochs"]]
    return {"alpha": alpha, "float_losses": float_losses, "diverged": diverged,
            "target_loss": float_losses[-1] * (1 + TARGET_GAP), "losses": losses}


@dataclass(frozen=True)
class FieldLayout(StreamLayout):
    """A ``DOUBLE`` stream whose fields take ``field_bits`` bits instead of ``b + 2``, packed as
    zipsgd packs its own: the cost of a layout the engine does not implement (the two-sample
    2b-bit layout), for :func:`~zipsgd.host.perf.epoch_cost`."""

    field_bits: int = 0

    def __post_init__(self):
        super().__post_init__()
        if not 1 <= self.field_bits <= self.bus_width:
            raise ConfigError(f"field bits must be in 1..{self.bus_width}, found "
                              f"{self.field_bits!r}")

    @property
    def field_width(self) -> int:
        return self.field_bits

    def __str__(self):
        return f"two-sample {self.field_bits}-bit/W{self.bus_width}"


def _encodings(bits) -> list[tuple[str, int]]:
    bits = sorted(set(bits))
    if not bits or any(not isinstance(b, int) or not 1 <= b <= 8 for b in bits):
        raise ConfigError(f"bits must be integers in 1..8, found {bits!r}")
    return [("raw32", 32)] + [(enc, b) for enc in ("single", "double") for b in bits]


def _row(encoding, bits, layout, losses, target, cost_of, diverged=None) -> dict:
    """A row; ``diverged``: the message of a run that stopped (no losses, target not reached)."""
    cost = cost_of(layout)
    epochs = first_epoch_reaching(losses, target)
    return {"encoding": encoding, "bits": bits, "layout": str(layout),
            "bits_per_value": cost["bits_per_value"], "bytes_per_epoch": cost["bytes"],
            "epoch_s": cost["time_s"], "bound": cost["bound"],
            "epoch_speedup_vs_raw32": cost["speedup_vs_raw32"], "losses": losses,
            "final_loss": losses[-1] if losses else None, "diverged": diverged,
            "epochs_to_target": epochs,
            "time_to_target_s": None if epochs is None else epochs * cost["time_s"]}


def time_to_accuracy(spec: str, platform: Platform | str, bits=DEFAULT_BITS,
                     schedule: Schedule | None = None, cpu_repeats: int = 5) -> dict:
    """Epochs to target and modeled time to target of every encoding on ``platform``, and the
    CPU baseline, for the data source ``spec``.  Returns a JSON-ready dict (``rows``: one per
    encoding, then a ``2b-bit layout`` context row; ``cpu``; ``best``; ``references``).

    Raises
    ------
    ConfigError
        For an unknown platform or a parameter out of range.
    DatasetError
        For a source that cannot be read.
    """
    if isinstance(platform, str):
        if platform not in PLATFORMS:
            raise ConfigError(f"platform must be one of {', '.join(PLATFORMS)}, found "
                              f"{platform!r}")
        platform = PLATFORMS[platform]
    schedule = schedule or schedule_for(spec)
    encodings = _encodings(bits)
    if cpu_repeats < 1:
        raise ConfigError(f"CPU repeats must be >= 1, found {cpu_repeats}")
    data = load_scaled(spec, intercept=schedule.intercept)
    n_samples, n_features = data.features.shape
    if n_samples < 1:
        raise DatasetError(f"{spec}: expected at least one sample, found none")
    curves = training_curves(data, encodings, schedule, platform.bus_width)
    target = curves["target_loss"]

    def cost_of(layout):
        return epoch_cost(platform, None, n_samples, n_features, layout, schedule.batch_size,
                          schedule.update_mode)

    rows = [_row(enc, b, StreamLayout.make(enc, b, platform.bus_width),
                 curves["losses"][(enc, b)], target, cost_of, curves["diverged"].get((enc, b)))
            for enc, b in encodings]
    raw_time = rows[0]["time_to_target_s"]
    for row in rows:
        row["kind"] = "engine"
        row["speedup_vs_raw32"] = _ratio(raw_time, row["time_to_target_s"])
    # Ties go to double sampling (the paper's encoding), then to fewer bits.
    best = max((r for r in rows[1:] if r["speedup_vs_raw32"] is not None),
               key=lambda r: (r["speedup_vs_raw32"], r["encoding"] == "double", -r["bits"]),
               default=None)
    if best is not None and best["encoding"] == "double":
        context = _row("2b-bit layout", best["bits"],
                       FieldLayout(Encoding.DOUBLE, best["bits"], platform.bus_width,
                                   field_bits=2 * best["bits"]),
                       best["losses"], target, cost_of)
        context["kind"] = "context"
        context["speedup_vs_raw32"] = _ratio(raw_time, context["time_to_target_s"])
        rows.append(context)
    cpu = measure_cpu_baseline(data.features, data.labels, target, schedule.epochs,
                               schedule.batch_size, curves["alpha"], repeats=cpu_repeats)
    cpu["speedup_vs_raw32"] = _ratio(raw_time, cpu["wall_s"] if cpu["epochs_to_target"]
                                     else None)
    return {"dataset": spec, "n_samples": n_samples, "n_features": n_features,
            "platform": asdict(platform), "schedule": asdict(schedule), "alpha": curves["alpha"],
            "float_losses": curves["float_losses"], "float_final_loss": curves["float_losses"][-1],
            "target_loss": target, "gap": TARGET_GAP, "rows": rows, "cpu": cpu,
            "max_epoch_speedup": max(r["epoch_speedup_vs_raw32"] for r in rows),
            "best": None if best is None else {
                "encoding": best["encoding"], "bits": best["bits"],
                "speedup_vs_raw32": best["speedup_vs_raw32"],
                "epoch_speedup_vs_raw32": best["epoch_speedup_vs_raw32"],
                "epochs_to_target": best["epochs_to_target"],
                "raw32_epochs_to_target": rows[0]["epochs_to_target"],
                "vs_cpu": _ratio(cpu["wall_s"] if cpu["epochs_to_target"] else None,
                                 best["time_to_target_s"])},
            "goal_speedup": SPEEDUP_GOAL,
            "goal_met": best is not None and best["speedup_vs_raw32"] >= SPEEDUP_GOAL,
            "machine": machine_description(), "references": list(REFERENCES)}


def _ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _time(seconds) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _speedup(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def format_table(result: dict, markdown: bool = False) -> str:
    """The time-to-accuracy table of :func:`time_to_accuracy` (text, or a Markdown table)."""
    head = ("dataset", "encoding", "b", "bits/value", "epochs to target", "time to target",
            "speedup vs raw32", "final loss")
    lines = []
    cells = []
    for row in result["rows"]:
        epochs = row["epochs_to_target"]
        cells.append((result["dataset"], row["encoding"], str(row["bits"]),
                      f"{row['bits_per_value']:.2f}",
                      "not reached" if epochs is None else str(epochs),
                      _time(row["time_to_target_s"]), _speedup(row["speedup_vs_raw32"]),
                      "diverged" if row.get("diverged") else f"{row['final_loss']:.6g}"))
    cpu = result["cpu"]
    cells.append((result["dataset"], f"CPU NumPy {cpu['dtype']}", "-",
                  f"{8 * _dtype_bytes(cpu['dtype'])}",
                  "not reached" if cpu["epochs_to_target"] is None
                  else str(cpu["epochs_to_target"]),
                  _time(cpu["wall_s"]) + " (measured)", _speedup(cpu["speedup_vs_raw32"]),
                  f"{cpu['final_loss']:.6g}"))
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        lines += ["| " + " | ".join(c) + " |" for c in cells]
    else:
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
        lines.append("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
        lines += ["  ".join(v.rjust(w) for v, w in zip(c, widths, strict=True)) for c in cells]
    return "\n".join(lines)


def _dtype_bytes(name: str) -> int:
    return {"float64": 8, "float32": 4}.get(name, 8)


def summary_lines(result: dict) -> list[str]:
    """The results printed under the table: setting, target, best encoding, CPU baseline."""
    p, s = result["platform"], result["schedule"]
    lines = [f"{result['dataset']}: {result['n_samples']} samples x {result['n_features']} "
             f"features on {p['name']} ({p['bandwidth'] / 1e9:.3g} GB/s, "
             f"{p['clock_hz'] / 1e6:.0f} MHz, W={p['bus_width']}); {s['epochs']} epochs, batch "
             f"{s['batch_size']}, alpha {result['alpha']:g} (step alpha/k), {s['update_mode']} "
             f"updates, seed {s['seed']}",
             f"target: loss <= {result['target_loss']:.6g} (float SGD's final loss "
             f"{result['float_final_loss']:.6g} + {100 * result['gap']:g} %)"]
    best = result["best"]
    lines.append(f"largest speedup per epoch (smallest encoding, padding included): "
                 f"{result['max_epoch_speedup']:.2f}x")
    if best is None:
        lines.append("no low-precision encoding reached the target with raw32 reaching it")
    else:
        vs_cpu = best["vs_cpu"]
        lines.append(f"best: {best['encoding']} b={best['bits']}, speedup "
                     f"{best['speedup_vs_raw32']:.2f}x over raw32 in modeled time = "
                     f"{best['epoch_speedup_vs_raw32']:.2f}x per epoch x "
                     f"{best['raw32_epochs_to_target']}/{best['epochs_to_target']} epochs"
                     + ("" if vs_cpu is None else
                        f"; {vs_cpu:.3g}x faster than the CPU baseline's measured time"))
    cpu = result["cpu"]
    load = "" if cpu["load_average"] is None else f", load average {cpu['load_average']:.1f}"
    lines.append(f"CPU baseline: {cpu['method']} on {result['machine']}{load}")
    return lines


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def plot_curves(result: dict, path, force: bool = False) -> None:
    """Training loss against bytes moved (left) and against modeled time (right, with the CPU
    baseline's measured time) for every encoding, into one PNG (written atomically)."""
    import matplotlib  # imported when a plot is drawn: it takes a second to load

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_bytes, by_time) = plt.subplots(1, 2, figsize=(11, 4.4), dpi=100)
    palette = plt.get_cmap("tab10")
    engine_rows = [r for r in result["rows"] if r["kind"] == "engine"]
    all_bits = sorted({r["bits"] for r in engine_rows if r["encoding"] != "raw32"})
    for row in engine_rows:
        if not row["losses"]:      # (a run that diverged)
            continue
        epochs = range(1, len(row["losses"]) + 1)
        # Colour by b, line style by encoding: single and double at the same b side by side.
        if row["encoding"] == "raw32":
            style = {"color": "black", "linestyle": "-", "linewidth": 2}
        else:
            style = {"color": palette(all_bits.index(row["bits"]) % 10), "marker": ".",
                     "linestyle": "--" if row["encoding"] == "single" else "-"}
        label = "raw32" if row["encoding"] == "raw32" else f"{row['encoding']} b={row['bits']}"
        by_bytes.plot([k * row["bytes_per_epoch"] for k in epochs], row["losses"], label=label,
                      **style)
        by_time.plot([k * row["epoch_s"] for k in epochs], row["losses"], **style)
    cpu = result["cpu"]
    by_time.plot(cpu["epoch_end_s"], cpu["losses"], color="tab:red", linestyle=":",
                 marker=".", label="CPU NumPy (measured)")
    for ax, xlabel in ((by_bytes, "bytes moved"), (by_time, "time (s): modeled, CPU measured")):
        ax.axhline(result["target_loss"], color="gray", linewidth=1, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.grid(True, which="both", alpha=0.3)
    by_bytes.set_ylabel("training loss (scaled units)")
    fig.legend(fontsize=7, loc="center right")
    fig.suptitle(f"{result['dataset']} on {result['platform']['name']}: loss vs bytes moved and "
                 "vs time (dotted line: target)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.87, 1))
    with atomic_output(path, force) as file:
        fig.savefig(file, format="png")
    plt.close(fig)


def plot_name(result: dict) -> str:
    return f"performance_{_slug(result['dataset'])}_{_slug(result['platform']['name'])}.png"


def _markdown(results: list[dict], command: str, seconds: float) -> str:
    machine = results[0]["machine"] if results else machine_description()
    lines = ["# Time to accuracy: modeled FPGA time per encoding and a measured CPU baseline", "",
             f"Made by `{command}` in {seconds:.0f} s on {machine}.", "",
             "For each data set, float SGD (float64) trains for E epochs; the **target** is its "
             f"final training loss + {100 * TARGET_GAP:g} %. Engine v2's bit-exact model trains "
             "with each encoding (same step schedule alpha/k, batch, update mode and seed; the "
             "platform's bus width W); **epochs to target** is the first epoch at or below the "
             "target; **time to target** is that many epochs of the performance model's epoch time "
             "(`docs/PLATFORMS.md`: engine v2's cycle model fed at the platform's memory rate); "
             "**speedup** is raw32's time to target over the row's. **bits/value** counts the "
             "label and the padding of the epoch's last beat (samples back to back)."
             " Platforms: `docs/PLATFORMS.md` (the boards' DRAM rates are measured in their "
             "simulated SoCs; every engine clock is an estimate). The CPU row is NumPy "
             "mini-batch SGD (float64, plain updates, same schedule) measured on the machine "
             "above, median of several runs, wall time to the same target "
             "(`zipsgd.host.cpu_baseline`); its speedup "
             "column is raw32's modeled time over the CPU's measured time. The CPU time depends "
             "on the machine's load: each section gives the 1-minute load average when it was "
             "measured (a load above the CPU count slows the baseline down by about that "
             "factor).", "",
             "Context (published, not measured here):", ""]
    lines += [f"* {ref}" for ref in REFERENCES]
    met = sum(r["goal_met"] for r in results)
    lines += ["", "## Verdict on the goal (>= 8x less time than raw32 at equal final loss)", "",
              f"**The goal is met on {met} of the {len(results)} data set and platform pairs.**",
              ""]
    for result in results:
        best = result["best"]
        verdict = ("no low-precision encoding reached the target" if best is None else
                   f"best {best['encoding']} b={best['bits']}: "
                   f"{best['speedup_vs_raw32']:.2f}x (per epoch "
                   f"{best['epoch_speedup_vs_raw32']:.2f}x, epochs to target raw32 "
                   f"{best['raw32_epochs_to_target']} vs {best['epochs_to_target']}), goal "
                   f"{'met' if result['goal_met'] else 'not met'}; largest speedup per epoch "
                   f"of any encoding {result['max_epoch_speedup']:.2f}x")
        lines.append(f"* {result['dataset']} on {result['platform']['name']}: {verdict}.")
    lines += ["", _WHY, ""]
    for result in results:
        lines += [f"## {result['dataset']} on {result['platform']['name']}", ""]
        lines += [f"* {line}" for line in summary_lines(result)]
        lines += ["", format_table(result, markdown=True), "",
                  f"![loss vs bytes and time]({plot_name(result)})", ""]
    return "\n".join(lines)


_WHY = (
    "Why: the speedup to target is the speedup per epoch times raw32's epochs to target over "
    "the encoding's.\n\n"
    "* Per epoch. Memory moves the samples back to back, b + 2 bits a value (double), b + 1 "
    "(single) or 32 (raw32), plus the label's field; the engine takes at most one W-bit beat "
    "a clock at every encoding, and fewer when its model update is the bound: in DELAYED "
    "mode batch k + 2 waits for batch k's update, a loop of about 70 cycles plus the "
    "update's issue cycles (`docs/results/throughput.md`), which a batch of 16 short samples "
    "does not cover. Where the memory is the bound an epoch's time follows its bytes and the "
    "ratio approaches 32/(b+2): every encoding of synthetic:100 on the ULX3S. Where the "
    "engine is, the epoch takes the engine's cycles whatever its bytes: b <= 2 of "
    "synthetic:100 on the OrangeCrab, every low-precision row of the 10- and 11-feature sets "
    "there, and every low-precision row on harp-v1 (each row's bound is in "
    "`performance.json`).\n"
    "* Epochs. The target is float SGD's final loss + 1 %, and float SGD is within 1 % of its "
    "final loss after a few epochs, so raw32, which follows float SGD closely, reaches the "
    "target in a few epochs. An encoding with few bits adds quantization variance to every "
    "gradient; with the step alpha/k it reaches the 1 % band later, or not within E epochs "
    "('not reached'), so the smallest encodings, which have the largest speedup per epoch, "
    "drop out, and the best row is the smallest b that still reaches the target in about "
    "raw32's epochs. With many features the variance can make the loss rise at float SGD's "
    "step: such a run stops ('diverged', no curve) and counts as not reached.")


def run_performance_study(datasets=PERFORMANCE_DATASETS, platforms=PERFORMANCE_PLATFORMS,
                          bits=DEFAULT_BITS, epochs: int | None = None, out="docs/results",
                          force: bool = False, cpu_repeats: int = 5) -> list[dict]:
    """Run :func:`time_to_accuracy` for every data set and platform; write
    ``performance.md``, ``performance.json`` and one plot per pair into ``out``."""
    for name in platforms:
        if name not in PLATFORMS:
            raise ConfigError(f"platform must be one of {', '.join(PLATFORMS)}, found {name!r}")
    check_study_arguments(datasets, bits, epochs)
    out = Path(out)
    prepare_outputs(out, ["performance.md", "performance.json"]
                    + [f"performance_{_slug(d)}_{_slug(p)}.png" for d in datasets
                       for p in platforms], force)
    started = time.perf_counter()
    results = []
    for spec in datasets:
        for name in platforms:
            result = time_to_accuracy(spec, name, bits, schedule_for(spec, epochs),
                                      cpu_repeats)
            plot_curves(result, out / plot_name(result), force=force)
            print(format_table(result))
            print("\n".join(summary_lines(result)), flush=True)
            results.append(result)
    command = "zipsgd study performance" + (f" --epochs {epochs}" if epochs else "")
    for option, value, default in (("--bits", tuple(bits), DEFAULT_BITS),
                                   ("--datasets", tuple(datasets), PERFORMANCE_DATASETS),
                                   ("--platforms", tuple(platforms), PERFORMANCE_PLATFORMS)):
        if value != default:
            command += f" {option} " + " ".join(map(str, value))
    write_text(_markdown(results, command, time.perf_counter() - started),
               out / "performance.md", force=force)
    write_json(results, out / "performance.json", force=force)
    return results
