"""Stress plans for the engine bench: seeded idle patterns, case rotation over the scoreboard
families, and reset/abort points aimed mid-sample and mid-update.

Everything here is plain data (JSON-ready dicts) built from seeds, so a plan is replayed exactly
from its seed; the cocotb side (``zipsgd/sim/stress_bench.py``) turns a pattern spec into an object
with the ``idle()`` method of :class:`zipsgd.sim.engine_bench.IdlePattern` with
:func:`make_pattern`.

Pattern kinds (``spec["kind"]``):

``none``       never idle.
``cycle``      a fixed repeating list of booleans (True = idle cycle).
``runs``       ``on`` offered cycles, then ``off`` idle cycles, repeated.
``bernoulli``  each cycle idle with probability ``p`` (seeded).
``bursty``     alternating busy and idle runs of geometric length (means ``on`` and ``off``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path

import numpy as np

from zipsgd.hw.top import TOP_NAME, ZipsgdEngine
from zipsgd.sim import runner
from zipsgd.spec.engine import EngineParams, UpdateMode, sim_params
from zipsgd.spec.fixed import RoundingMode

__all__ = ["FIXED_PATTERNS", "FAMILIES", "ERROR_KINDS", "RESET_KINDS", "PRECISIONS",
           "make_pattern", "random_pattern", "patterns", "run_config", "stress_cases",
           "reset_points", "coverage_runs"]

#: The fixed patterns: no idle, every other cycle, long bursts and gaps, one beat then a long
#: idle, mostly idle, short random gaps.
FIXED_PATTERNS: dict[str, dict] = {
    "none": {"kind": "none"},
    "every_other": {"kind": "cycle", "cycle": [False, True]},
    "long_bursts": {"kind": "runs", "on": 48, "off": 40},
    "one_then_idle": {"kind": "runs", "on": 1, "off": 23},
    "mostly_idle": {"kind": "bernoulli", "p": 0.85, "seed": 1},
    "rare_gaps": {"kind": "bernoulli", "p": 0.05, "seed": 2},
}

#: Scoreboard families a stress case exercises: an epoch through the lean driver, an epoch
#: through cocotbext-axi's AxiStreamSource (a frame per sample, pause generator), and an error
#: followed by a recovery epoch.
FAMILIES = ("epoch", "frames", "errors")

#: The error cases of the ``errors`` family, taken in rotation.
ERROR_KINDS = ("tlast_early", "tlast_missing", "start_while_busy", "bad_config", "abort")

#: Where a reset (or abort) lands: between the beats of a sample, in the first sample of a
#: later batch (the fused model update), while the input is held for the update (EXACT batch
#: boundary), or after the last beat during the end-of-epoch drain and flush.
RESET_KINDS = ("mid_sample", "fused_update", "update_stall", "flush")


class Pattern:
    """A seeded idle pattern: ``idle()`` says whether the next offered cycle is idle."""

    def __init__(self, spec: dict):
        kind = spec.get("kind", "none")
        if kind not in ("none", "cycle", "runs", "bernoulli", "bursty"):
            raise ValueError(f"pattern kind must be none, cycle, runs, bernoulli or bursty, "
                             f"found {kind!r}")
        self.spec = dict(spec)
        self.rng = np.random.default_rng(spec.get("seed", 0))
        if kind == "runs":
            self.cycle = [False] * spec["on"] + [True] * spec["off"]
        elif kind == "cycle":
            self.cycle = [bool(v) for v in spec["cycle"]]
        else:
            self.cycle = None
        if self.cycle is not None and all(self.cycle):
            raise ValueError(f"pattern {spec} never offers a beat")
        self.kind = kind
        self.count = 0
        self._left = 0          # bursty: cycles left in the current run
        self._idle_run = True   # bursty: the current run is idle (starts with a busy run)

    def idle(self) -> bool:
        self.count += 1
        if self.cycle is not None:
            return self.cycle[(self.count - 1) % len(self.cycle)]
        if self.kind == "bernoulli":
            return bool(self.rng.random() < self.spec["p"])
        if self.kind == "bursty":
            while self._left == 0:
                self._idle_run = not self._idle_run
                mean = self.spec["off" if self._idle_run else "on"]
                self._left = int(self.rng.geometric(1.0 / mean))
            self._left -= 1
            return self._idle_run
        return False

    def pauses(self):
        """The pattern as a pause generator (cocotbext-axi ``set_pause_generator``)."""
        while True:
            yield self.idle()


def make_pattern(spec: dict | None) -> Pattern | None:
    """A :class:`Pattern` for a spec, ``None`` for no spec or kind ``none``."""
    if not spec or spec.get("kind", "none") == "none":
        return None
    return Pattern(spec)


def random_pattern(seed: int) -> dict:
    """A random pattern spec drawn from ``seed`` (kind and parameters)."""
    rng = np.random.default_rng([seed, 0x1D7E])
    kind = ("bernoulli", "bursty", "cycle", "runs")[int(rng.integers(4))]
    if kind == "bernoulli":
        return {"kind": kind, "p": round(float(rng.uniform(0.05, 0.9)), 3), "seed": seed}
    if kind == "bursty":
        return {"kind": kind, "on": int(rng.integers(1, 65)), "off": int(rng.integers(1, 41)),
                "seed": seed}
    if kind == "cycle":
        length = int(rng.integers(2, 13))
        cycle = rng.random(length) < 0.5
        cycle[int(rng.integers(length))] = False    # offer a beat at least once per cycle
        return {"kind": kind, "cycle": [bool(v) for v in cycle]}
    return {"kind": kind, "on": int(rng.integers(1, 33)), "off": int(rng.integers(1, 33))}


def patterns(n_random: int = 20, seed: int = 0) -> list[dict]:
    """The fixed patterns, then ``n_random`` random ones; each spec carries its ``name``."""
    out = [{"name": name, **spec} for name, spec in FIXED_PATTERNS.items()]
    for k in range(n_random):
        pattern_seed = seed * 1000 + k
        out.append({"name": f"random{pattern_seed}", **random_pattern(pattern_seed)})
    return out


PRECISIONS = [("double", b) for b in range(1, 9)] + [("single", 1), ("single", 4),
                                                     ("single", 8), ("raw32", 32)]
ENCODING_CODES = {"double": 0, "single": 1, "raw32": 2}


def run_config(encoding: str, bits: int, n_features: int, batch: int, *,
               rounding: RoundingMode = RoundingMode.STOCHASTIC,
               mode: UpdateMode = UpdateMode.EXACT, seed: int = 1, step: int = 1 << 16,
               **extra) -> dict:
    """``RunConfig`` fields as JSON-ready data."""
    return {"encoding": ENCODING_CODES[encoding], "bits": bits, "n_features": n_features,
            "batch_size": batch, "step": step, "seed": seed, "update_mode": int(mode),
            "rounding": int(rounding), **extra}


def stress_cases(params: EngineParams, pattern_specs: list[dict], seed: int = 0) -> list[dict]:
    """One small case per pattern; families, precisions, batch sizes and update modes rotate
    so that every family meets fixed and random patterns.  Random-pattern cases also pause the
    AXI-Lite channels (``axil_pattern``)."""
    rng = np.random.default_rng([seed, 0x5743])
    lanes = params.lanes
    cases = []
    for k, spec in enumerate(pattern_specs):
        family = FAMILIES[k % len(FAMILIES)]
        encoding, bits = PRECISIONS[k % len(PRECISIONS)]
        batch = (1, 4, 8, 16)[k % 4]
        if family == "errors":
            # The framing cases need samples of three beats or more.
            encoding, bits = "double", (2, 4, 8)[k % 3]
            n = 2 * lanes + int(rng.integers(0, lanes))
        else:
            n = int(rng.choice([1, lanes - 1, lanes + 1, int(rng.integers(2, 3 * lanes))]))
        samples = 2 * batch + int(rng.integers(1, 4)) if batch > 1 else int(rng.integers(5, 9))
        config = run_config(encoding, bits, n, batch,
                            rounding=list(RoundingMode)[k % 3],
                            mode=UpdateMode.DELAYED if k % 2 else UpdateMode.EXACT,
                            seed=100 + k, decay=(1 << 10) if k % 5 == 4 else 0)
        case = {"name": spec["name"], "family": family, "pattern": spec,
                "run": {"config": config, "samples": samples,
                        "epochs": 1 if family == "errors" else 2, "seed": 1000 + k,
                        "model_init": "random" if k % 2 else "zero",
                        "pattern": spec, "frames": family == "frames"}}
        if family == "errors":
            case["error"] = ERROR_KINDS[(k // len(FAMILIES)) % len(ERROR_KINDS)]
        if spec["name"].startswith("random"):
            case["axil_pattern"] = {"kind": "bernoulli", "p": 0.3, "seed": 7000 + k}
        cases.append(case)
    return cases


def reset_points(params: EngineParams, count: int = 24, seed: int = 0) -> list[dict]:
    """``count`` reset points (every fifth an abort through CTRL.ABORT instead of the reset),
    rotating over :data:`RESET_KINDS`; each carries its run (EXACT mode with batches of
    several samples for ``update_stall``), the beat to stop after and the extra cycles."""
    rng = np.random.default_rng([seed, 0x2E5E])
    lanes = params.lanes
    points = []
    for k in range(count):
        kind = RESET_KINDS[k % len(RESET_KINDS)]
        encoding, bits = PRECISIONS[int(rng.integers(len(PRECISIONS)))]
        # Two beats or more per sample, so that a reset can fall between them.
        n = int(rng.integers(lanes, 3 * lanes))
        batch = int(rng.choice([2, 4, 8]))
        mode = UpdateMode.EXACT if kind == "update_stall" or k % 2 else UpdateMode.DELAYED
        config = run_config(encoding, bits, n, batch, mode=mode,
                            rounding=list(RoundingMode)[int(rng.integers(3))], seed=500 + k)
        points.append({"index": k, "kind": kind, "action": "abort" if k % 5 == 4 else "reset",
                       "config": config, "samples": 3 * batch + 1, "seed": 3000 + k,
                       "pattern": random_pattern(9000 + k) if k % 3 else None,
                       "draw": int(rng.integers(1 << 30)),
                       "reset_cycles": int(rng.integers(1, 6))})
    return points


#: Every precision the engine accepts (single sampling at every b as well).
ALL_PRECISIONS = [("double", b) for b in range(1, 9)] + [("single", b) for b in range(1, 9)] + [
    ("raw32", 32)]


def coverage_runs(params: EngineParams) -> list[dict]:
    """Bit-exact runs for the coverage build: every precision with both update modes, every
    rounding mode, batch sizes 1 to B_max, feature counts around the lane count and up to
    N_max, narrow saturating formats, L2 decay and L1 threshold, a precision change."""
    lanes = params.lanes
    counts = (1, lanes - 1, lanes, lanes + 1, 3 * lanes + 5)
    batches = (1, 3, 16, params.max_batch)
    runs = []
    for k, ((encoding, bits), mode) in enumerate(itertools.product(ALL_PRECISIONS,
                                                                    UpdateMode)):
        batch = batches[k % len(batches)]
        runs.append({"config": run_config(encoding, bits, counts[k % len(counts)], batch,
                                          rounding=list(RoundingMode)[k % 3], mode=mode,
                                          seed=k + 1, decay=(1 << 12) if k % 3 == 1 else 0,
                                          threshold=(1 << 8) if k % 4 == 2 else 0),
                     "samples": 2 * batch + 1 if batch > 1 else 6, "epochs": 2, "seed": 40 + k,
                     "model_init": "random" if k % 2 else "zero",
                     "pattern": random_pattern(k) if k % 3 == 0 else None})
    runs += [
        {"config": run_config("double", 4, params.max_features, 2, seed=3), "samples": 3,
         "epochs": 1, "seed": 90},
        {"config": run_config("double", 4, 7, 4, model_width=8, model_frac=4, grad_width=6,
                              grad_frac=2, step=1 << 30, decay=1 << 20, threshold=3),
         "samples": 24, "epochs": 2, "seed": 91, "model_init": "random"},
        {"config": run_config("double", 2, lanes + 1, 16), "samples": 40, "epochs": 3,
         "seed": 92, "changes": [None, {"encoding": 2, "bits": 32}, {"encoding": 1, "bits": 6}]},
    ]
    return runs


# -- the figures ------------------------------------------------------------------------------

def measure(n_random: int = 20, seed: int = 0, resets: int = 24,
            params: EngineParams | None = None) -> dict:
    """Run the stress set (one simulation for the patterns, one for the resets) and return
    its figures; a mismatch raises :class:`zipsgd.sim.runner.SimulationFailed`."""
    params = params or sim_params(64)
    plans = {"stress_patterns": {"cases": stress_cases(params, patterns(n_random, seed), seed)},
             "resets_mid_stream": {"points": reset_points(params, resets, seed)}}
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        for testcase, plan in plans.items():
            report = Path(tmp) / f"{testcase}.json"
            result = runner.build_and_test(
                ZipsgdEngine(params), TOP_NAME, "zipsgd.sim.stress_bench", testcase=testcase,
                test_params={"params": params.__dict__, **plan},
                extra_env={"ZIPSGD_SIM_REPORT": str(report)})
            reports[testcase] = (json.loads(report.read_text()), result.seconds)
    cases, cases_s = reports["stress_patterns"]
    points, points_s = reports["resets_mid_stream"]
    families = {}
    for family in FAMILIES:
        rows = [r for r in cases if r["family"] == family]
        families[family] = {
            "cases": len(rows), "fixed": sum(not r["name"].startswith("random") for r in rows),
            "epochs": sum(r["epochs"] for r in rows), "beats": sum(r["beats"] for r in rows),
            "cycles_starved": sum(r["cycles_starved"] for r in rows),
            "cycles_update_stall": sum(r["cycles_update_stall"] for r in rows)}
    landed: dict[str, int] = {}
    for row in points:
        key = f"{row['action']} {row['observed']}"
        landed[key] = landed.get(key, 0) + 1
    return {"patterns": len(cases), "fixed": len(FIXED_PATTERNS), "random": n_random,
            "seed": seed, "families": families, "sim_s": round(cases_s + points_s, 1),
            "reset_points": len(points), "landed": dict(sorted(landed.items())),
            "aimed_as_planned": sum(r["observed"] == r["kind"] for r in points),
            "recovery_beats": sum(r["recovery_beats"] for r in points), "mismatches": 0}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m zipsgd.sim.stress",
                                     description="Run the stress set and print its figures.")
    parser.add_argument("--random", type=int, default=20, help="random patterns")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resets", type=int, default=24, help="reset and abort points")
    args = parser.parse_args()
    print(json.dumps(measure(args.random, args.seed, args.resets), indent=1))
