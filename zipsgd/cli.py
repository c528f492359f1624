"""The ``zipsgd`` command line.

Every subcommand turns bad input into exit status 2 and a one-line message on standard error
(``zipsgd: error: ...``) naming what was expected and what was found; output files are written
atomically and never replace an existing file without ``--force``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__
from .spec.errors import ZipsgdError

__all__ = ["main", "build_parser"]


def _format_pair(text: str) -> tuple[int, int]:
    try:
        width, frac = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WL,FL (two integers), found {text!r}") \
            from None
    return width, frac


def _add_quantize(sub) -> None:
    p = sub.add_parser("quantize", help="scale, quantize and pack a data set into a .zsgd file")
    p.add_argument("source", help="data source: FILE (.csv .npy .npz LIBSVM), synthetic:D, "
                                  "sklearn:diabetes")
    p.add_argument("-o", "--output", required=True, help="the .zsgd file to write")
    p.add_argument("--bits", type=int, default=4, help="interval-index bits b, 1..8 (default 4)")
    p.add_argument("--encoding", default="double", choices=["double", "single", "raw32"])
    p.add_argument("--bus-width", type=int, default=64, help="bits per beat: 64 128 256 512")
    p.add_argument("--seed", type=int, default=0, help="quantization seed (default 0)")
    p.add_argument("--epochs", type=int, default=1,
                   help="independently quantized epochs to store (default 1)")
    p.add_argument("--epoch-first", type=int, default=0, help="index of the first epoch")
    p.add_argument("--scaling", default="maxabs", choices=["maxabs", "minmax"])
    p.add_argument("--intercept", action="store_true", help="append a constant-1 feature")
    p.add_argument("--label-column", type=int, default=0,
                   help="label column of CSV/NPY input (default 0; negative counts from the end)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    p.set_defaults(run=_run_quantize)


def _run_quantize(args) -> int:
    from .host.datasets import open_source
    from .host.pack import pack_source
    from .spec.stream import StreamLayout

    layout = StreamLayout.make(args.encoding, args.bits, args.bus_width)
    source = open_source(args.source, label_column=args.label_column)
    header = pack_source(source, args.output, layout, seed=args.seed, epochs=args.epochs,
                         epoch_first=args.epoch_first, scaling=args.scaling,
                         add_intercept=args.intercept, force=args.force)
    print(f"wrote {args.output}: {header.n_samples} samples x {header.n_features} features, "
          f"{layout}, {header.epoch_count} epoch(s), "
          f"{header.header_bytes + header.payload_bytes} bytes")
    return 0


def _add_inspect(sub) -> None:
    p = sub.add_parser("inspect", help="print a .zsgd file's header and sizes")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(run=_run_inspect)


def _run_inspect(args) -> int:
    from .host.zsgd_file import StreamFile
    from .spec.stream import StreamLayout

    stream = StreamFile(args.file)
    h = stream.header
    raw = StreamLayout.make("raw32", 32, h.layout.bus_width)
    raw_bytes = raw.sample_bytes(h.n_features) * h.n_samples * h.epoch_count
    info = {
        "file": str(stream.path), "version": 1, "encoding": h.layout.encoding.name.lower(),
        "bits": h.layout.bits, "bus_width": h.layout.bus_width,
        "field_width": h.layout.field_width, "fields_per_beat": h.layout.fields_per_beat,
        "n_samples": h.n_samples, "n_features": h.n_features,
        "beats_per_sample": h.beats_per_sample, "epoch_first": h.epoch_first,
        "epoch_count": h.epoch_count, "seed": h.seed, "scaling": h.scaling.name.lower(),
        "label_format": h.label_format.name.lower(), "header_bytes": h.header_bytes,
        "payload_bytes": h.payload_bytes, "payload_crc32": f"{stream.payload_crc32:#010x}",
        "stored_bits_per_value": h.layout.stored_bits_per_value(h.n_features),
        "raw32_payload_bytes": raw_bytes, "compression_vs_raw32": raw_bytes / h.payload_bytes,
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            shown = f"{value:.4g}" if isinstance(value, float) else value
            print(f"{key:<{width}}  {shown}")
    return 0


def _add_train_options(p, epochs_default: int = 10) -> None:
    p.add_argument("--backend", default="golden",
                   choices=["float", "golden", "verilator", "board", "board-sim"],
                   help="float64 SGD, the bit-exact engine model (default), or the generated "
                        "engine checked against it: simulated by Verilator, on a board over "
                        "its serial port (--port), or the simulated board over the same link")
    p.add_argument("--port", help="the board's serial port (--backend board), e.g. "
                                  "/dev/ttyUSB0")
    p.add_argument("--baud", type=int, default=115200,
                   help="the board's baud rate, as built (default 115200)")
    p.add_argument("--bits", type=int, default=4, help="interval-index bits b, 1..8")
    p.add_argument("--encoding", default="double", choices=["double", "single", "raw32"])
    p.add_argument("--bus-width", type=int, default=64)
    p.add_argument("--lanes", type=int, default=None,
                   help="engine lanes L (power of two, 2..W/2; default W/2): the engine's "
                        "slicing decides which random bits each update uses")
    p.add_argument("--epochs", type=int, default=epochs_default)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--step-size", type=float, default=0.5,
                   help="alpha: epoch k uses step alpha/k (default 0.5)")
    p.add_argument("--loss", default="squared", choices=["squared", "lssvm"])
    p.add_argument("--l2", type=float, default=0.0, help="L2 regularization lambda")
    p.add_argument("--l1", type=float, default=0.0, help="L1 regularization lambda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--update-mode", default="exact", choices=["exact", "delayed"])
    p.add_argument("--rounding", default="stochastic",
                   choices=["truncate", "half-even", "stochastic"])
    p.add_argument("--model-format", type=_format_pair, default=(32, 24), metavar="WL,FL")
    p.add_argument("--grad-format", type=_format_pair, default=(32, 24), metavar="WL,FL")
    p.add_argument("--scaling", default="maxabs", choices=["maxabs", "minmax"])
    p.add_argument("--intercept", action="store_true", help="append a constant-1 feature")
    p.add_argument("--label-column", type=int, default=0)


def _settings(args):
    from .host.train import TrainSettings

    return TrainSettings(
        backend=args.backend, encoding=args.encoding, bits=args.bits, bus_width=args.bus_width,
        epochs=args.epochs, batch_size=args.batch_size, step_size=args.step_size,
        loss=args.loss, l2=args.l2, l1=args.l1, seed=args.seed, update_mode=args.update_mode,
        rounding=args.rounding, model_width=args.model_format[0],
        model_frac=args.model_format[1], grad_width=args.grad_format[0],
        port=getattr(args, "port", None), baud=getattr(args, "baud", 115200),
        grad_frac=args.grad_format[1], lanes=getattr(args, "lanes", None))


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a linear model on a data source or .zsgd file")
    p.add_argument("source", help="data source (see quantize) or a .zsgd file")
    _add_train_options(p)
    p.add_argument("--report", help="write the run's JSON report here")
    p.add_argument("--plot", help="write a loss-per-epoch plot (PNG) here")
    p.add_argument("--force", action="store_true", help="overwrite existing report/plot")
    p.set_defaults(run=_run_train)


def _check_outputs(args, *names) -> None:
    from .spec.errors import OutputExistsError

    for name in names:
        path = getattr(args, name, None)
        if path and Path(path).exists() and not args.force:
            raise OutputExistsError(f"{path} exists; pass --force to overwrite it")


def _run_train(args) -> int:
    from tqdm import tqdm

    from .host import report as reporting
    from .host.train import load_scaled, train_in_memory, train_stream_file
    from .host.zsgd_file import StreamFile

    _check_outputs(args, "report", "plot")
    settings = _settings(args)
    bar = tqdm(total=settings.epochs, desc="train", unit="epoch", disable=None, leave=False)

    def progress(epoch, record):
        bar.update(epoch - bar.n)
        if record is not None:
            loss = record.get("loss")
            bar.set_postfix(loss=f"{loss if loss is not None else record['engine_loss']:.4g}")

    try:
        if args.source.endswith(".zsgd"):
            report = train_stream_file(StreamFile(args.source), settings, progress)
        else:
            data = load_scaled(args.source, loss=settings.loss, scaling=args.scaling,
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
                              title=f"{report['source']} ({report['layout']})")
    return status


def _add_study(sub) -> None:
    p = sub.add_parser("study", help="rerun a study of the papers' claims")
    which = p.add_subparsers(dest="study", required=True)
    c = which.add_parser("convergence", help="final loss of float, single and double at b=1..8")
    c.add_argument("--datasets", nargs="+", default=["synthetic:100", "sklearn:diabetes"])
    c.add_argument("--bits", nargs="+", type=int, default=list(range(1, 9)))
    c.add_argument("--epochs", type=int, default=None, help="override the per-dataset epochs")
    c.add_argument("--out", default="docs/results", help="folder for the table and plots")
    c.add_argument("--force", action="store_true", help="overwrite existing results")
    c.set_defaults(run=_run_study)
    t = which.add_parser("performance", help="time to accuracy of every encoding on two "
                                             "platforms, with a measured CPU baseline")
    t.add_argument("--datasets", nargs="+",
                   default=["synthetic:10", "synthetic:100", "synthetic:1000", "sklearn:diabetes"])
    t.add_argument("--platforms", nargs="+", default=["pynq-z1", "harp-v1"])
    t.add_argument("--bits", nargs="+", type=int, default=[1, 2, 4, 6, 8])
    t.add_argument("--epochs", type=int, default=None, help="override the per-dataset epochs")
    t.add_argument("--out", default="docs/results", help="folder for the table and plots")
    t.add_argument("--force", action="store_true", help="overwrite existing results")
    t.set_defaults(run=_run_performance_study)


def _run_study(args) -> int:
    from .host.study import run_convergence_study

    run_convergence_study(args.datasets, bits=args.bits, epochs=args.epochs, out=args.out,
                          force=args.force)
    return 0


def _run_performance_study(args) -> int:
    from .host.time_to_accuracy import run_performance_study

    run_performance_study(args.datasets, args.platforms, tuple(args.bits), args.epochs,
                          args.out, args.force)
    return 0


def _add_export(sub) -> None:
    p = sub.add_parser("export-verilog", help="write the engine's Verilog and port description")
    p.add_argument("-o", "--output", default="build/verilog", help="output folder")
    p.add_argument("--bus-width", type=int, default=64, help="64, 128, 256 or 512")
    p.add_argument("--max-features", type=int, default=32768, help="N_max")
    p.add_argument("--max-batch", type=int, default=1024, help="B_max")
    p.add_argument("--lanes", type=int, default=None,
                   help="lanes L, a power of two from 2 to W/2 (default W/2)")
    p.set_defaults(run=_run_export)


def _run_export(args) -> int:
    from .hw.top import export_verilog
    from .spec.engine import EngineParams

    params = EngineParams(args.bus_width, args.max_features, args.max_batch, args.lanes)
    vpath, jpath = export_verilog(params, args.output)
    print(f"wrote {vpath} and {jpath} (W={params.bus_width}, N_max={params.max_features}, "
          f"B_max={params.max_batch}, {params.lanes} lanes)")
    return 0


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="pack synthetic:100 at 4 bits and train on the simulated "
                                    "engine, checked against the golden model")
    p.add_argument("--out", default="build/demo", help="folder for the demo's files")
    p.add_argument("--epochs", type=int, default=5)
    p.set_defaults(run=_run_demo)


def _run_demo(args) -> int:
    from .host.study import run_demo

    reports = run_demo(args.out, epochs=args.epochs)
    return 0 if all(r.get("bit_exact", True) for r in reports.values()) else 1


def _add_perf(sub) -> None:
    p = sub.add_parser("perf", help="model the time per epoch of each encoding on a platform "
                                    "(memory bandwidth vs engine clock)")
    p.add_argument("source", help="data source (see quantize)")
    p.add_argument("--platform", default="pynq-z1",
                   help="platform preset (default pynq-z1; see docs/PLATFORMS.md): "
                        "ulx3s-85f orangecrab pynq-z1 harp-v1 u280-hbm-channel u280-hbm")
    p.add_argument("--bits", type=int, nargs="+", default=[1, 2, 4, 6, 8],
                   help="interval-index bits b of the single and double rows (default 1 2 4 6 8)")
    p.add_argument("--epochs", type=int, default=None,
                   help="epochs to total (default 1); with --target, epochs to train (default "
                        "the convergence study's: 60 for sklearn:diabetes, else 20)")
    p.add_argument("--batch-size", type=int, default=16, help="mini-batch size (default 16)")
    p.add_argument("--update-mode", default="delayed", choices=["exact", "delayed"])
    p.add_argument("--target", action="store_true",
                   help="time to accuracy: train float SGD and the golden model of every "
                        "encoding, find the first epoch within 1%% of float SGD's final loss, "
                        "and time NumPy SGD on this machine to the same loss")
    p.add_argument("--step-size", type=float, default=None,
                   help="alpha for --target (default: tuned for float SGD as in the "
                        "convergence study)")
    p.add_argument("--cpu-repeats", type=int, default=5,
                   help="runs of the CPU baseline, median taken (default 5)")
    p.add_argument("--plot", help="with --target: write loss vs bytes moved and vs time (PNG)")
    p.add_argument("--json", help="write the rows as JSON here")
    p.add_argument("--force", action="store_true", help="overwrite existing --json/--plot files")
    p.set_defaults(run=_run_perf)


def _run_perf(args) -> int:
    from .host import report as reporting
    from .host.datasets import open_source
    from .host.perf import PLATFORMS, perf_table
    from .spec.errors import ConfigError

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
    from .host import report as reporting
    from .host.time_to_accuracy import (
        REFERENCES,
        format_table,
        plot_curves,
        schedule_for,
        summary_lines,
        time_to_accuracy,
    )

    schedule = schedule_for(args.source, args.epochs, batch_size=args.batch_size,
                            update_mode=args.update_mode, step_size=args.step_size)
    result = time_to_accuracy(args.source, args.platform, tuple(args.bits), schedule,
                              args.cpu_repeats)
    print(format_table(result))
    print("\n".join(summary_lines(result)))
    print("context: " + "\ncontext: ".join(REFERENCES))
    if args.plot:
        plot_curves(result, args.plot, force=args.force)
    if args.json:
        reporting.write_json(result, args.json, force=args.force)
    return 0


def _add_synth(sub) -> None:
    from .spec.engine import BOARD_FREQ_MHZ, BOARD_LANES, OOC_FREQ_MHZ

    p = sub.add_parser("synth", help="build the engine for an ECP5 board (Yosys, nextpnr, "
                                     "ecppack; YoWASP) and print fmax and resource use")
    p.add_argument("--board", default="ulx3s-85f",
                   help="target board: ulx3s-85f (default), orangecrab-85f, ecpix5-85")
    p.add_argument("--bus-width", type=int, default=64, help="64, 128, 256 or 512 (default 64)")
    p.add_argument("--max-features", type=int, default=2048, help="N_max (default 2048)")
    p.add_argument("--max-batch", type=int, default=256, help="B_max (default 256)")
    p.add_argument("--lanes", type=int, default=BOARD_LANES,
                   help=f"lanes L, a power of two from 2 to W/2 (default {BOARD_LANES}: the "
                        "W=64 board build routes on an 85F; docs/results/synthesis.md)")
    p.add_argument("--freq", type=float, default=None, metavar="MHZ",
                   help=f"target engine clock in MHz (default {BOARD_FREQ_MHZ:g}, which the "
                        f"default board build meets; {OOC_FREQ_MHZ:g} with --ooc, the goal)")
    p.add_argument("--ooc", action="store_true",
                   help="out of context: the engine alone with registered, LFSR-driven inputs "
                        "and XOR-folded outputs (zipsgd/hw/ooc.py), clocked from the board "
                        "clock pin constrained to --freq")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None,
                       help="nextpnr placement seed (default: nextpnr's); routed fmax moves "
                            "by several MHz between seeds")
    seeds.add_argument("--seeds", default=None, metavar="LIST",
                       help="try these placement seeds (e.g. 1-6 or 2,5,9) in order until one "
                            "meets timing, each built in OUTPUT/seed<N>; the best is copied to "
                            "OUTPUT")
    p.add_argument("--jobs", type=int, default=1,
                   help="with --seeds, builds run at a time (default 1; each takes one core)")
    p.add_argument("--seed-minutes", type=float, default=None, metavar="M",
                   help="with --seeds, stop a seed's build after M minutes (a router that "
                        "does not converge) and go on with the next (default: no limit)")
    p.add_argument("-o", "--output", default="build/synth", help="build folder")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(run=_run_synth)


def _run_synth(args) -> int:
    from .hw import synth
    from .spec.engine import EngineParams

    params = EngineParams(args.bus_width, args.max_features, args.max_batch, args.lanes)
    if args.seed_minutes is not None and args.seeds is None:
        from .spec.errors import ConfigError

        raise ConfigError(f"--seed-minutes limits each seed of --seeds; found it "
                          f"({args.seed_minutes:g}) without --seeds")
    common = {"board": args.board, "freq_mhz": args.freq, "ooc": args.ooc,
              "out_dir": args.output}
    try:
        if args.seeds is not None:
            summary = synth.run_seed_sweep(params, synth.parse_seeds(args.seeds),
                                           jobs=args.jobs, seed_minutes=args.seed_minutes,
                                           **common)
        else:
            summary = synth.run_synth(params, seed=args.seed, **common)
        status = 0
    except synth.BuildError as error:  # a tool failed: not bad input, so status 1, not 2
        print(f"zipsgd: error: {error}", file=sys.stderr)
        return 1
    except synth.TimingError as error:
        summary, status = error.summary, 1
        message = f"zipsgd: error: {error}"
    print(json.dumps(summary, indent=1) if args.json else synth.format_table(summary))
    if status:
        print(message, file=sys.stderr)
    return status


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
    for add in (_add_quantize, _add_inspect, _add_train, _add_study, _add_export, _add_demo,
                _add_perf, _add_synth):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``zipsgd`` command; returns the exit status (2 for bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except ZipsgdError as error:
        print(f"zipsgd: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("zipsgd: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
