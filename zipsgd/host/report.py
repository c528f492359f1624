"""Writing run reports: JSON, per-epoch tables and loss plots (all written atomically)."""

from __future__ import annotations

import json

import numpy as np

from .zsgd_file import atomic_output

__all__ = ["write_json", "write_text", "print_epochs", "plot_losses", "step_line", "LOSS_COLUMNS"]


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def write_json(data: dict, path, force: bool = False) -> None:
    with atomic_output(path, force, mode="w") as file:
        json.dump(_jsonable(data), file, indent=1)
        file.write("\n")


def write_text(text: str, path, force: bool = False) -> None:
    with atomic_output(path, force, mode="w") as file:
        file.write(text)


#: The losses a training record can hold, in the order shown, with their column headings and
#: plot labels: the loss on the training data as given (float data), on the original data of
#: ``--eval``, on the dequantized data of a packed file, and the engine's own (on-chip) loss.
LOSS_COLUMNS = (
    ("loss", "loss", "loss on the data"),
    ("loss_eval", "eval loss", "loss on the --eval data"),
    ("loss_dequantized", "dequant. loss", "loss on the dequantized data"),
    ("engine_loss", "on-chip loss", "on-chip loss (quantized samples, model in force)"),
)


def _columns(report: dict) -> list[tuple[str, str, str]]:
    first = report["epochs"][0] if report["epochs"] else {}
    return [column for column in LOSS_COLUMNS if first.get(column[0]) is not None]


def step_line(report: dict) -> str | None:
    """How the step size was chosen, in one line (None for a report without the record)."""
    step = report.get("step_size")
    if step is None:
        return None
    if step["chosen"] != "auto":
        return f"step size alpha {step['alpha']:.4g} (given; epoch k: alpha/k)"
    return (f"step size alpha {step['alpha']:.4g} (auto: {step['factor']:g} x the bound "
            f"1/L_B = {step['bound']:.4g} below which float SGD cannot diverge; epoch k: "
            "alpha/k)")


def print_epochs(report: dict, file=None) -> None:
    """A per-epoch table of a training report on standard output."""
    optimum = report.get("optimum", {}).get("loss")
    print(f"{report['source']}: {report['n_samples']} samples x {report['n_features']} "
          f"features, {report['settings']['backend']} backend, {report['layout']}", file=file)
    step = step_line(report)
    if step is not None:
        print(step, file=file)
    columns = _columns(report)
    simulated = "bit_exact" in report
    extra = f" {'cycles':>10} {'bus eff.':>8} {'bit-exact':>9}" if simulated else ""
    # A SoC's epochs (``soc``, ``soc-sim``) also time the stream's upload into its DRAM.
    timed = simulated and any("upload_seconds" in r for r in report["epochs"])
    if timed:
        extra += f" {'upload s':>9} {'epoch s':>9}"
    heads = "".join(f" {head:>13}" for _, head, _ in columns)
    print(f"{'epoch':>5}{heads} {'bytes':>12}{extra}", file=file)
    for record in report["epochs"]:
        values = "".join(f" {_num(record.get(key)):>13}" for key, _, _ in columns)
        line = f"{record['epoch']:>5}{values} {record['bytes_streamed']:>12}"
        if simulated:
            line += (f" {record['cycles']:>10} {record['bus_efficiency']:>8.4f} "
                     f"{'yes' if record['bit_exact'] else 'NO':>9}")
        if timed:
            line += f" {record['upload_seconds']:>9.3f} {record['epoch_seconds']:>9.3f}"
        print(line, file=file)
    if optimum is not None:
        print(f"optimum loss {optimum:.6g} ({report['optimum']['method']})", file=file)
    if timed:
        print("upload s: the epoch's stream written into the board's DRAM (0: there from an "
              "earlier epoch); epoch s: its settings written and its run from DRAM to the "
              "engine's end", file=file)
    if any(key == "engine_loss" for key, _, _ in columns):
        print("on-chip loss: the engine's own, on the quantized samples with the model in force "
              "at each sample (docs/LOSS.md)", file=file)


def _num(value) -> str:
    return "-" if value is None else f"{value:.6g}"


def plot_losses(reports: dict, path, force: bool = False, title: str = "",
                optimum: float | None = None, every_loss: bool = False) -> None:
    """Plot training loss per epoch of several reports (label -> report) into a PNG: each
    report's first loss of :data:`LOSS_COLUMNS`, or with ``every_loss`` each of them, labelled
    with what it is."""
    import matplotlib  # imported when a plot is drawn: it takes a second to load

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for label, report in reports.items():
        epochs = [r["epoch"] for r in report["epochs"]]
        columns = _columns(report)
        if not every_loss:  # one curve a report: the first loss it has
            columns = columns[:1]
        for key, _, name in columns:
            losses = [r[key] for r in report["epochs"]]
            style = ":" if key == "engine_loss" else "--" if "single" in label else "-"
            ax.plot(epochs, losses, style, marker="o", markersize=3,
                    label=f"{label}: {name}" if every_loss else label)
        if optimum is None and report.get("optimum"):
            optimum = report["optimum"]["loss"]
    if optimum is not None:
        ax.axhline(optimum, color="black", linestyle=":", linewidth=1, label="optimum")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("training loss (scaled units)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path, force) as file:
        fig.savefig(file, format="png")
    plt.close(fig)
