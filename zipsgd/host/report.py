"""Writing run reports: JSON, per-epoch tables and loss plots (all written atomically)."""

from __future__ import annotations

import json

import numpy as np

from .zsgd_file import atomic_output

__all__ = ["write_json", "write_text", "print_epochs", "plot_losses"]


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


def print_epochs(report: dict, file=None) -> None:
    """A per-epoch table of a training report on standard output."""
    optimum = report.get("optimum", {}).get("loss")
    print(f"{report['source']}: {report['n_samples']} samples x {report['n_features']} "
          f"features, {report['settings']['backend']} backend, {report['layout']}", file=file)
    simulated = "bit_exact" in report
    extra = f" {'cycles':>10} {'bus eff.':>8} {'bit-exact':>9}" if simulated else ""
    print(f"{'epoch':>5} {'loss':>12} {'engine loss':>12} {'bytes':>12}{extra}", file=file)
    for record in report["epochs"]:
        loss = record.get("loss")
        engine = record.get("engine_loss")
        line = (f"{record['epoch']:>5} {_num(loss):>12} {_num(engine):>12} "
                f"{record['bytes_streamed']:>12}")
        if simulated:
            line += (f" {record['cycles']:>10} {record['bus_efficiency']:>8.4f} "
                     f"{'yes' if record['bit_exact'] else 'NO':>9}")
        print(line, file=file)
    if optimum is not None:
        print(f"optimum loss {optimum:.6g} ({report['optimum']['method']})", file=file)


def _num(value) -> str:
    return "-" if value is None else f"{value:.6g}"


def plot_losses(reports: dict, path, force: bool = False, title: str = "",
                optimum: float | None = None) -> None:
    """Plot training loss per epoch of several reports (label -> report) into a PNG."""
    import matplotlib  # imported when a plot is drawn: it takes a second to load

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for label, report in reports.items():
        epochs = [r["epoch"] for r in report["epochs"]]
        losses = [r["loss"] if r.get("loss") is not None else r.get("engine_loss")
                  for r in report["epochs"]]
        style = "--" if "single" in label else "-"
        ax.plot(epochs, losses, style, marker="o", markersize=3, label=label)
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
