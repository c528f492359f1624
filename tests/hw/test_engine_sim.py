"""The generated engine, simulated by Verilator under cocotb, against the golden model.

Each test builds the Verilog of one ``EngineParams`` (cached by the hash of the Verilog) and runs
a list of training runs in one simulation; ``zipsgd/sim/engine_bench.py`` checks every epoch bit for
bit (model words, loss, counters).  The sweep covers every precision of one build, feature counts
around the lane count, batch sizes 1/16/64, both update modes, all rounding modes, idle cycles
on the input, back-to-back epochs and a precision change between epochs.
"""

from __future__ import annotations

import itertools
import json

import pytest

from zipsgd.hw.top import TOP_NAME, ZipsgdEngine
from zipsgd.sim import runner
from zipsgd.spec.engine import EngineParams, sim_params

ROUNDINGS = ("stochastic", "half-even", "truncate")


def _config(encoding, bits, n, batch, *, rounding="stochastic", mode="exact", seed=1,
            step=1 << 16, **extra):
    from zipsgd.spec.fixed import RoundingMode
    return {"encoding": encoding, "bits": bits, "n_features": n, "batch_size": batch,
            "step": step, "seed": seed, "update_mode": 0 if mode == "exact" else 1,
            "rounding": int(RoundingMode[rounding.upper().replace("-", "_")]), **extra}


def sweep_runs(params: EngineParams, feature_counts, batches, seeds=(1, 2)) -> list[dict]:
    """Runs covering every precision: double b=1..8, single, raw32; feature counts, batch sizes,
    rounding and update modes rotate through the runs; every other run has idle cycles."""
    precisions = [("double", b) for b in range(1, 9)] + [("single", 1), ("single", 4),
                                                         ("raw32", 32)]
    cycle = itertools.count()
    runs = []
    for (encoding, bits), seed in itertools.product(precisions, seeds):
        k = next(cycle)
        n = feature_counts[k % len(feature_counts)]
        batch = batches[k % len(batches)]
        samples = 2 * batch + 3 if batch > 1 else 7
        runs.append({
            "config": _config(encoding, bits, n, batch, rounding=ROUNDINGS[k % 3],
                              mode="delayed" if k % 2 else "exact", seed=seed + 10 * k,
                              decay=(1 << 10) if k % 4 == 3 else 0,
                              threshold=(1 << 6) if k % 5 == 4 else 0),
            "samples": samples, "epochs": 2, "seed": seed + k, "idle": 0.3 if k % 2 else 0.0,
            "model_init": "random" if k % 3 == 0 else "zero"})
    return runs


def special_runs(params: EngineParams) -> list[dict]:
    lanes = params.lanes
    return [
        # A precision change between epochs (double 2 -> raw32 -> single 6), same model.
        {"config": _config("double", 2, lanes + 1, 16), "samples": 40, "epochs": 3, "seed": 5,
         "changes": [None, {"encoding": 2, "bits": 32}, {"encoding": 1, "bits": 6}]},
        # Narrow formats that saturate the model and the scaled residual.
        {"config": _config("double", 4, 7, 4, model_width=8, model_frac=4, grad_width=6,
                           grad_frac=2, step=1 << 30), "samples": 24, "epochs": 2, "seed": 6},
        # A model format whose loss narrowing shifts right by 11 (both of the shift's stages;
        # the sweep's formats shift right by 8 and the one above left by 12).
        {"config": _config("single", 5, lanes + 3, 4, model_frac=27), "samples": 12,
         "epochs": 1, "seed": 8},
        # Back-to-back epochs with a fixed idle pattern and the delayed update.
        {"config": _config("single", 3, lanes - 1, 16, mode="delayed"), "samples": 50,
         "epochs": 3, "seed": 7, "idle_cycle": [False, False, True]},
    ]


def run_engine(params: EngineParams, runs: list[dict], tmp_path, axis_source=False, **kwargs):
    report = tmp_path / "report.json"
    runner.build_and_test(ZipsgdEngine(params), TOP_NAME, "zipsgd.sim.engine_bench",
                          testcase="engine_matches_golden",
                          test_params={"params": params.__dict__, "runs": runs,
                                       "axis_source": axis_source},
                          extra_env={"ZIPSGD_SIM_REPORT": str(report)}, **kwargs)
    return json.loads(report.read_text())


@pytest.mark.parametrize("bus_width", [64, 128])
def test_engine_sweep(bus_width, tmp_path, sim_options):
    params = sim_params(bus_width)
    lanes = params.lanes
    runs = sweep_runs(params, feature_counts=(1, lanes - 1, lanes + 1, 300),
                      batches=(1, 16, 64)) + special_runs(params)
    report = run_engine(params, runs, tmp_path, **sim_options)
    assert len(report) == sum(r["epochs"] for r in runs)


@pytest.mark.parametrize(("bus_width", "lanes", "feature_counts"), [
    (64, 4, (1, 3, 5, 20, 21, 300)),
    # Fewer lanes than raw32 words (4 per beat): raw32 beats are sliced too.
    (128, 2, (1, 3, 5, 42, 43, 200)),
])
def test_engine_sweep_sliced(bus_width, lanes, feature_counts, tmp_path, sim_options):
    """Fewer lanes than fields per beat (W = 64, L = 4: beats of up to 32 fields are issued as
    up to 8 slices; W = 128, L = 2: up to 32 slices); feature counts around the lane count and
    the slice and beat sizes."""
    params = sim_params(bus_width, lanes)
    runs = sweep_runs(params, feature_counts=feature_counts, batches=(1, 16, 64)) \
        + special_runs(params)
    report = run_engine(params, runs, tmp_path, **sim_options)
    assert len(report) == sum(r["epochs"] for r in runs)


def test_engine_errors_and_recovery_sliced(sim_options):
    """The error cases with beats of several slices: an error never leaves a half-issued beat."""
    params = sim_params(64, lanes=4)
    runner.build_and_test(ZipsgdEngine(params), TOP_NAME, "zipsgd.sim.engine_bench",
                          testcase="framing_and_config_errors",
                          test_params={"params": params.__dict__}, **sim_options)


def test_engine_with_cocotbext_source(tmp_path, sim_options):
    """The same scoreboard with cocotbext-axi's AxiStreamSource (a frame per sample) and its
    pause generator: fixed and random idle patterns."""
    params = sim_params(64)
    runs = [{"config": _config("double", 3, 50, 16, seed=4), "samples": 40, "epochs": 2,
             "seed": 21, "idle": 0.5},
            {"config": _config("raw32", 32, 9, 4, mode="delayed", seed=5), "samples": 13,
             "epochs": 2, "seed": 22, "idle_cycle": [True, False]},
            {"config": _config("single", 8, 33, 1, seed=6), "samples": 9, "epochs": 1,
             "seed": 23}]
    report = run_engine(params, runs, tmp_path, axis_source=True, **sim_options)
    assert len(report) == 5


def test_engine_errors_and_recovery(sim_options):
    """Framing errors, refused settings, start while busy, model port while busy."""
    params = sim_params(64)
    runner.build_and_test(ZipsgdEngine(params), TOP_NAME, "zipsgd.sim.engine_bench",
                          testcase="framing_and_config_errors",
                          test_params={"params": params.__dict__}, **sim_options)


@pytest.mark.slow
@pytest.mark.parametrize("bus_width", [256, 512])
def test_engine_sweep_wide_buses(bus_width, tmp_path, sim_options):
    params = sim_params(bus_width)
    lanes = params.lanes
    runs = sweep_runs(params, feature_counts=(1, lanes - 1, lanes + 1, 700),
                      batches=(1, 16, 64), seeds=(1,)) + special_runs(params)
    report = run_engine(params, runs, tmp_path, **sim_options)
    assert len(report) == sum(r["epochs"] for r in runs)


@pytest.mark.slow
def test_engine_at_max_features(tmp_path, sim_options):
    """The default build (N_max = 32768): samples of exactly N_max features."""
    params = EngineParams(bus_width=64)
    runs = [{"config": _config(encoding, bits, params.max_features, 4, seed=3),
             "samples": 9, "epochs": 2, "seed": 11}
            for encoding, bits in (("double", 8), ("double", 1), ("raw32", 32))]
    report = run_engine(params, runs, tmp_path, **sim_options)
    assert len(report) == 6
