"""Soak: millions of beats of random configurations on the simulated engine, bit-exact against
the golden model, every configuration logged with its seed so that a failure is replayed alone.

    python -m zipsgd.sim.soak --beats 10000000 --seed 1     # `make soak`
    python -m zipsgd.sim.soak --replay SEED                 # one configuration again
    python -m zipsgd.sim.soak --summarize                   # figures of the last soak's log
    python -m zipsgd.sim.soak --beats 10000000 --seed 1 --resume   # go on with a stopped soak

A configuration is a pure function of its seed (:func:`soak_run`): encoding and bits, feature
count, batch size, samples, epochs, update and rounding modes, formats, step, decay, threshold,
the initial model, the input idle pattern and the stream driver.  The soak draws configuration
seeds from its master seed until the beat budget is met and runs them in chunks (one simulator
process each) on one engine build; the cocotb side (``soak_runs`` in ``zipsgd/sim/stress_bench.py``)
appends one JSON line per configuration to the log (``build/soak/log.jsonl``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zipsgd.hw.top import TOP_NAME, ZipsgdEngine
from zipsgd.sim import runner
from zipsgd.sim.runner import SimulationFailed
from zipsgd.sim.stress import PRECISIONS, random_pattern, run_config
from zipsgd.spec.engine import (
    EngineParams,
    RunConfig,
    UpdateMode,
    sim_params,
)
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.fixed import RoundingMode

__all__ = ["SOAK_PARAMS", "SoakTarget", "V1", "soak_run", "run_beats", "plan_seeds", "soak",
           "replay", "last_soak", "logged_run", "bench_simulator", "main"]

#: The engine build of the soak: the test suite's W = 64 build (cached).
SOAK_PARAMS = sim_params(64)

#: Model and gradient formats <WL_m, FL_m, WL_g, FL_g> the soak draws from: the default, two
#: narrower ones and one that saturates.
FORMATS = ((32, 24, 32, 24), (24, 16, 20, 14), (16, 12, 16, 10), (8, 4, 6, 2))

DEFAULT_LOG = Path("build/soak/log.jsonl")


def soak_run(seed: int, params: EngineParams = SOAK_PARAMS) -> dict:
    """The run of configuration ``seed`` (the ``runs`` entry format of
    ``zipsgd/sim/engine_bench.py``): one to sixteen thousand beats per epoch.  Batches of one sample
    are rare because
    the golden model is slowest there."""
    rng = np.random.default_rng([seed, 0x50A4])
    encoding, bits = PRECISIONS[int(rng.integers(len(PRECISIONS)))]
    if encoding == "double":
        bits = int(rng.integers(1, 9))
    n = int(min(params.max_features, np.exp(rng.uniform(0, np.log(600)))))
    batch = int(rng.choice([1, 2, 4, 8, 16, 32, 64], p=[.04, .08, .16, .2, .2, .16, .16]))
    batch = min(batch, params.max_batch)
    wl_m, fl_m, wl_g, fl_g = FORMATS[int(rng.choice(4, p=[.55, .2, .15, .1]))]
    config = run_config(encoding, bits, n, batch,
                        rounding=list(RoundingMode)[int(rng.integers(3))],
                        mode=list(UpdateMode)[int(rng.integers(2))],
                        seed=int(rng.integers(1, 1 << 31)), step=1 << int(rng.integers(8, 22)),
                        model_width=wl_m, model_frac=fl_m, grad_width=wl_g, grad_frac=fl_g,
                        decay=int(rng.integers(1, 1 << 16)) if rng.random() < .3 else 0,
                        threshold=int(rng.integers(1, 1 << 8)) if rng.random() < .2 else 0)
    RunConfig(**config)   # a configuration the engine accepts
    layout = RunConfig(**config).layout(params.bus_width)
    beats = int(rng.integers(1_000, 16_000))
    samples = max(batch + 1, beats // layout.beats_per_sample(n))
    run = {"config": config, "samples": samples, "epochs": int(rng.integers(1, 4)),
           "seed": int(rng.integers(1 << 31)),
           "model_init": "random" if rng.random() < .5 else "zero"}
    if rng.random() < .35:
        run["pattern"] = random_pattern(seed)
    if rng.random() < .2:
        run["frames"] = True    # cocotbext-axi's AxiStreamSource instead of the lean driver
    return run


def run_beats(run: dict, params: EngineParams = SOAK_PARAMS) -> int:
    """Beats a run streams (all epochs)."""
    config = RunConfig(**run["config"])
    per_sample = config.layout(params.bus_width).beats_per_sample(config.n_features)
    return per_sample * run["samples"] * run["epochs"]


@dataclass(frozen=True)
class SoakTarget:
    """What a soak runs: the engine's build (``params``), a configuration from its seed
    (``make_run(seed, params)``), the beats a configuration streams (``beats(run, params)``),
    and the simulation of a list of seeds that logs one JSON line per configuration
    (``simulate(seeds, log, params, timeout_s)``); ``command`` runs it from the shell."""

    name: str
    params: object
    make_run: Callable
    beats: Callable
    simulate: Callable
    command: str
    #: The digest of the engine's Verilog at ``params`` (a resumed soak needs the same).
    digest: Callable | None = None


def plan_seeds(master: int, beats: int, params=SOAK_PARAMS, target: SoakTarget | None = None
               ) -> list[int]:
    """Configuration seeds drawn from ``master`` until their runs stream ``beats`` beats."""
    target = target or V1
    rng = np.random.default_rng([master, 0x5EED])
    seeds, total = [], 0
    while total < beats:
        seed = int(rng.integers(1 << 31))
        seeds.append(seed)
        total += target.beats(target.make_run(seed, params), params)
    return seeds


def _chunks(seeds: list[int], chunk_beats: int, params, target: SoakTarget):
    chunk, total = [], 0
    for seed in seeds:
        chunk.append(seed)
        total += target.beats(target.make_run(seed, params), params)
        if total >= chunk_beats:
            yield chunk
            chunk, total = [], 0
    if chunk:
        yield chunk


def _entries(log: Path, seeds: list[int]) -> dict[int, dict]:
    """The log's entries for ``seeds`` (the last one of each seed)."""
    wanted, out = set(seeds), {}
    if log.is_file():
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("seed") in wanted:
                out[entry["seed"]] = entry
    return out


@functools.lru_cache(maxsize=4)
def _verilog(make_top: Callable, top_name: str, params) -> str:
    """The engine's Verilog at ``params``, elaborated once per process for every chunk."""
    return runner.elaborate_verilog(make_top(params), top_name)


def bench_simulator(make_top: Callable, top_name: str, bench: str, testcase: str) -> Callable:
    """A :class:`SoakTarget`'s ``simulate``: the engine ``make_top(params)`` built (cached)
    and the cocotb test ``testcase`` of module ``bench`` run on the seeds, logging to ``log``."""
    def simulate(seeds: list[int], log: Path, params, timeout_s: float):
        runner.build_and_test(_verilog(make_top, top_name, params), top_name, bench,
                              testcase=testcase,
                              timeout_s=timeout_s,
                              test_params={"params": params.__dict__,
                                           "soak": {"seeds": seeds,
                                                    "log": str(log.resolve())}})
    return simulate


def verilog_digest(make_top: Callable, top_name: str) -> Callable:
    """A :class:`SoakTarget`'s ``digest``: the SHA-256 of the engine's Verilog at ``params``
    (the text the simulation builds), first 16 hex digits."""
    def digest(params) -> str:
        return hashlib.sha256(_verilog(make_top, top_name, params).encode()).hexdigest()[:16]
    return digest


#: Engine v1's soak (its engine, its configurations, ``zipsgd/sim/stress_bench.py``).
V1 = SoakTarget("engine v1", SOAK_PARAMS, soak_run, run_beats,
                bench_simulator(ZipsgdEngine, TOP_NAME, "zipsgd.sim.stress_bench", "soak_runs"),
                "python -m zipsgd.sim.soak", verilog_digest(ZipsgdEngine, TOP_NAME))


def _failure(seeds: list[int], log: Path) -> int:
    """The seed that failed: the first logged as failed, else the first not logged at all (a
    crash or timeout inside its run)."""
    entries = _entries(log, seeds)
    for seed in seeds:
        if seed not in entries or not entries[seed]["ok"]:
            return seed
    return seeds[-1]


#: What a resumed soak must share with the log's last soak.
_SAME_SOAK = ("master_seed", "beats", "configs", "params", "engine", "verilog")


def _resumable(log: Path, header: dict) -> list[int]:
    """The seeds the log's last soak finished bit-exact, when that soak is ``header``'s (same
    seeds, build and engine Verilog) and none failed; :class:`ConfigError` otherwise."""
    old, entries = last_soak(log) if log.is_file() else (None, [])
    if old is None or any(old.get(k) != header[k] for k in _SAME_SOAK):
        found = "no soak" if old is None else ", ".join(
            f"{k} {old.get(k)!r}" for k in _SAME_SOAK if old.get(k) != header[k])
        raise ConfigError(f"--resume: expected the last soak in {log} to be master seed "
                          f"{header['master_seed']}, {header['beats']} beats, engine Verilog "
                          f"{header['verilog']}; found {found}")
    bad = [e["seed"] for e in entries if not e["ok"]]
    if bad:
        raise ConfigError(f"--resume: expected a soak without failures, found seed {bad[0]} "
                          f"failed in {log} (replay it with --replay {bad[0]})")
    return [e["seed"] for e in entries]


def soak(beats: int, master: int, log: Path, chunk_beats: int, timeout_s: float,
         params=None, out=sys.stdout, target: SoakTarget | None = None,
         resume: bool = False) -> dict:
    """Run the soak of ``target`` (engine v1's unless given); returns the summary
    (``mismatches`` is 0 or 1: the soak stops at the first failure, whose seed and replay
    command are printed).  With ``resume``, the log's last soak goes on from the
    configurations it has not finished, if it is this one on the same engine Verilog."""
    target = target or V1
    params = target.params if params is None else params
    log.parent.mkdir(parents=True, exist_ok=True)
    seeds = plan_seeds(master, beats, params, target)
    header = {"master_seed": master, "beats": beats, "configs": len(seeds),
              "params": params.__dict__, "engine": target.name,
              "verilog": target.digest(params) if target.digest else None,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    finished = set(_resumable(log, header)) if resume else set()
    if not resume:
        with open(log, "a") as file:
            file.write(json.dumps({"soak": header}) + "\n")
    print(f"soak ({target.name}): master seed {master}, {len(seeds)} configurations, at least "
          f"{beats} beats, log {log}" + (f", {len(finished)} finished before" if resume else ""),
          file=out, flush=True)
    started = time.monotonic()
    done: list[int] = [s for s in seeds if s in finished]
    failed = None
    for chunk in _chunks([s for s in seeds if s not in finished], chunk_beats, params, target):
        try:
            target.simulate(chunk, log, params, timeout_s)
        except SimulationFailed as error:
            failed = _failure(chunk, log)
            print(f"soak: FAILED at configuration seed {failed}\n{str(error)[:3000]}", file=out)
            print(f"replay: {target.command} --replay {failed}", file=out, flush=True)
            done += chunk[:chunk.index(failed)]
            break
        done += chunk
        so_far = sum(e.get("beats", 0) for e in _entries(log, done).values())
        print(f"soak: {len(done)}/{len(seeds)} configurations, {so_far} beats, "
              f"{time.monotonic() - started:.0f} s", file=out, flush=True)
    entries = _entries(log, done)
    summary = {"engine": target.name, "master_seed": master, "configs": len(entries),
               "epochs": sum(target.make_run(s, params)["epochs"] for s in entries),
               "beats": sum(e["beats"] for e in entries.values()),
               "cycles": sum(e["cycles"] for e in entries.values()),
               "frames_configs": sum(bool(e.get("frames")) for e in entries.values()),
               "idle_pattern_configs": sum(e.get("pattern") is not None
                                           for e in entries.values()),
               "wall_s": round(time.monotonic() - started, 1),
               "mismatches": 0 if failed is None else 1, "failed_seed": failed}
    print("soak: " + json.dumps(summary), file=out, flush=True)
    return summary


def last_soak(log: Path) -> tuple[dict | None, list[dict]]:
    """The header and the entries of the last soak in ``log``."""
    header, entries = None, []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if "soak" in entry:
            header, entries = entry["soak"], []
        else:
            entries.append(entry)
    return header, entries


async def logged_run(log, entry: dict, run) -> None:
    """Await ``run`` (a bench's run of one configuration, returning its epochs' ``beats`` and
    ``cycles_busy``) and append ``entry`` with its result to the open ``log``; a mismatch
    (AssertionError) is logged before it is raised."""
    started = time.perf_counter()
    try:
        epochs = await run
    except AssertionError as error:
        log.write(json.dumps({**entry, "ok": False, "error": str(error)[:2000]}) + "\n")
        log.flush()
        raise
    log.write(json.dumps({**entry, "ok": True, "beats": sum(e["beats"] for e in epochs),
                          "cycles": sum(e["cycles_busy"] for e in epochs),
                          "wall_s": round(time.perf_counter() - started, 3)}) + "\n")
    log.flush()


def summarize_log(log: Path) -> dict:
    """Figures of the last soak in ``log`` (the entries after its last header), also when the
    soak was stopped before its budget."""
    header, entries = last_soak(log)
    done = [e for e in entries if e["ok"]]
    configs = [RunConfig(**e["config"]) for e in done]
    return {"master_seed": header and header["master_seed"],
            "planned_beats": header and header["beats"], "configs": len(done),
            "epochs": sum(e["epochs"] for e in done), "beats": sum(e["beats"] for e in done),
            "cycles": sum(e["cycles"] for e in done),
            "sim_wall_s": round(sum(e["wall_s"] for e in done), 1),
            "precisions": len({(c.encoding, c.bits) for c in configs}),
            "batch_sizes": sorted({c.batch_size for c in configs}),
            "frames_configs": sum(bool(e["frames"]) for e in done),
            "idle_pattern_configs": sum(e["pattern"] is not None for e in done),
            "mismatches": sum(not e["ok"] for e in entries),
            "failed_seeds": [e["seed"] for e in entries if not e["ok"]]}


def replay(seed: int, log: Path, timeout_s: float, params=None, out=sys.stdout,
           target: SoakTarget | None = None) -> int:
    """Run configuration ``seed`` alone; 0 when it is bit-exact."""
    target = target or V1
    params = target.params if params is None else params
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"replay: configuration seed {seed}: {json.dumps(target.make_run(seed, params))}",
          file=out)
    try:
        target.simulate([seed], log, params, timeout_s)
    except SimulationFailed as error:
        print(f"replay: FAILED\n{error}", file=out)
        return 1
    print(f"replay: seed {seed} bit-exact: {json.dumps(_entries(log, [seed])[seed])}", file=out)
    return 0


def main(argv=None, target: SoakTarget | None = None, summarize=None, doc: str = __doc__,
         default_log: Path = DEFAULT_LOG) -> int:
    """The command line of a soak (engine v1's unless ``target``; ``summarize(log)`` gives the
    figures of its last soak)."""
    target = target or V1
    summarize = summarize or summarize_log
    parser = argparse.ArgumentParser(prog=target.command, description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beats", type=int, default=10_000_000, help="beats to stream at least")
    parser.add_argument("--seed", type=int, default=1, help="master seed of the soak")
    parser.add_argument("--replay", type=int, metavar="SEED", help="run one configuration")
    parser.add_argument("--log", type=Path, default=default_log, help="JSON lines log")
    parser.add_argument("--chunk-beats", type=int, default=1_000_000,
                        help="beats per simulator process")
    parser.add_argument("--timeout", type=float, default=float(
        os.environ.get("ZIPSGD_SIM_TIMEOUT", 7200)), help="seconds per simulator process")
    parser.add_argument("--summary", type=Path, help="write the summary JSON here")
    parser.add_argument("--summarize", action="store_true",
                        help="print the figures of the last soak in --log and stop")
    parser.add_argument("--resume", action="store_true",
                        help="go on with the last soak in --log (same --seed and --beats, same "
                             "engine Verilog) from the configurations it has not finished")
    args = parser.parse_args(argv)
    if args.beats < 1 or args.chunk_beats < 1:
        parser.exit(2, f"soak: --beats and --chunk-beats must be at least 1, found "
                       f"{args.beats} and {args.chunk_beats}\n")
    try:
        if args.summarize:
            if not args.log.is_file():
                parser.exit(2, f"soak: expected a soak log at {args.log}, found none\n")
            print(json.dumps(summarize(args.log), indent=1))
            return 0
        if args.replay is not None:
            return replay(args.replay, args.log, args.timeout, target=target)
        summary = soak(args.beats, args.seed, args.log, args.chunk_beats, args.timeout,
                       target=target, resume=args.resume)
    except ConfigError as error:
        parser.exit(2, f"soak: {error}\n")
    if args.summary:
        tmp = args.summary.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        tmp.replace(args.summary)
    return 1 if summary["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
