"""cocotb stress tests of the engine: idle patterns on every scoreboard family, resets and
aborts mid-sample and mid-update, and the soak.  Plans come from ``zipsgd/sim/stress.py`` and
``zipsgd/sim/soak.py`` through ``test_params``; the scoreboard is ``zipsgd/sim/engine_bench.py``'s.

``test_params`` keys: ``params`` (EngineParams fields); ``cases`` (``stress_patterns``);
``points`` (``resets_mid_stream``); ``soak`` = ``{"seeds", "log"}`` (``soak_runs``).  Figures go
to the JSON file named by ``ZIPSGD_SIM_REPORT``.

The engine has no output stream (its results are registers read over AXI4-Lite), so
back-pressure here is the engine's own ``tready`` stalls under the input patterns plus pauses on
the AXI-Lite channels (``valid`` of AW/W/AR, ``ready`` of B/R) from cocotbext-axi's pause
generators.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from zipsgd.golden.engine import GoldenEngine
from zipsgd.host.quantize import epoch_rng, quantize_fields
from zipsgd.sim.engine_bench import (
    TB,
    check_epoch,
    make_data,
    payload_beats,
    train_runs,
)
from zipsgd.sim.runner import test_params
from zipsgd.sim.soak import logged_run, soak_run
from zipsgd.sim.stress import make_pattern
from zipsgd.spec import registers as regs
from zipsgd.spec.engine import EngineParams, RunConfig
from zipsgd.spec.stream import pack_beats_v1


def _write_report(report):
    out = os.environ.get("ZIPSGD_SIM_REPORT")
    if out:
        with open(out, "w") as file:
            json.dump(report, file)


def set_axil_pauses(tb: TB, spec: dict | None):
    """Pause every AXI-Lite channel with its own seeded pattern (``None``: no pauses)."""
    channels = (tb.axil.write_if.aw_channel, tb.axil.write_if.w_channel,
                tb.axil.write_if.b_channel, tb.axil.read_if.ar_channel,
                tb.axil.read_if.r_channel)
    for k, channel in enumerate(channels):
        pattern = make_pattern(dict(spec, seed=spec.get("seed", 0) * 8 + k)) if spec else None
        channel.set_pause_generator(pattern.pauses() if pattern else None)
        if pattern is None:
            channel.pause = False   # cocotbext-axi leaves the last pause value latched


def _epoch_data(params: EngineParams, config: RunConfig, samples: int, seed: int):
    labels, features, rng = make_data(config, samples, seed)
    layout = config.layout(params.bus_width)
    payload = pack_beats_v1(quantize_fields(labels, features, layout, epoch_rng(seed, 0)), layout)
    beats, lasts = payload_beats(payload, layout, config.n_features)
    return payload, layout, beats, lasts, rng


async def _expect_flag(tb: TB, flag: str | None, count_before: int, what: str):
    """``flag`` is set and counted once (or, for ``None``, nothing is); then clear it."""
    flags = await tb.read_reg("ERROR_FLAGS")
    count = (await tb.read_reg("ERROR_COUNT"))["error_count"]
    if flag is None:
        assert not any(flags.values()) and count == count_before, f"{what}: {flags} {count}"
        return
    assert flags[flag] == 1, f"{what}: {flag} not set ({flags})"
    assert count == count_before + 1, f"{what}: error count {count}, before {count_before}"
    await tb.command(clear_errors=1)
    assert not any((await tb.read_reg("ERROR_FLAGS")).values()), f"{what}: flags not cleared"


async def error_prelude(tb: TB, params: EngineParams, case: dict):
    """The ``errors`` family: one bad input under the case's idle pattern, its flag and count
    checked; the recovery epoch that follows is the case's run."""
    run, kind = case["run"], case["error"]
    config = RunConfig(**run["config"])
    samples = run["samples"]
    payload, layout, beats, lasts, _ = _epoch_data(params, config, samples, run["seed"] + 1)
    per_sample = layout.beats_per_sample(config.n_features)
    idle = make_pattern(case["pattern"])
    what = f"{case['name']} {kind}"
    before = (await tb.read_reg("ERROR_COUNT"))["error_count"]
    await tb.configure(config, samples, seed=True)
    if kind in ("tlast_early", "tlast_missing"):
        bad = list(lasts)
        if kind == "tlast_early":
            bad[1], accepted = 1, 2
        else:
            bad[per_sample - 1], accepted = 0, per_sample
        await tb.command(start=1)
        await tb.stream(beats, bad, idle)      # everything after the error is discarded
        status = await tb.status()
        assert status["busy"] == 0 and status["draining"] == 1, f"{what}: {status}"
        assert status["discarded_beats"] == len(beats) - accepted, f"{what}: {status}"
        await _expect_flag(tb, kind, before, what)
    elif kind == "bad_config":
        await tb.write_reg("BATCH_SIZE", batch_size=params.max_batch + 1)
        await tb.command(start=1)
        assert (await tb.read_reg("STATUS"))["busy"] == 0, f"{what}: started"
        await _expect_flag(tb, "bad_config", before, what)
    elif kind == "start_while_busy":
        golden = GoldenEngine(params, config)
        await tb.write_model(np.zeros(config.n_features, dtype=np.int64))
        expected = golden.run_epoch(payload)
        half = len(beats) // 2
        await tb.command(start=1)
        await tb.stream(beats[:half], lasts[:half], idle)
        await tb.command(start=1)
        await tb.stream(beats[half:], lasts[half:], idle)
        await tb.wait_done()
        status = await tb.status()
        words = await tb.read_model(config.n_features)
        status["error_flags"] = 0   # START_WHILE_BUSY was expected; checked below
        check_epoch(expected, golden.model, status, words, what)
        await _expect_flag(tb, "start_while_busy", before, what)
    elif kind == "abort":
        await tb.command(start=1)
        await tb.stream(beats[:len(beats) // 2], lasts[:len(beats) // 2], idle)
        await tb.command(abort=1)
        status = await tb.read_reg("STATUS")
        assert status["busy"] == 0 and status["draining"] == 0, f"{what}: {status}"
        await _expect_flag(tb, None, before, what)
    else:
        raise ValueError(f"unknown error case {kind!r}")


@cocotb.test()
async def stress_patterns(dut):
    """Every case: its family under its idle pattern (and AXI-Lite pauses), bit-exact."""
    p = test_params()
    params = EngineParams(**p["params"])
    cases = p["cases"]
    tb = TB(dut, params, axis_source=any(c["family"] == "frames" for c in cases))
    await tb.reset()
    report = []
    for case in cases:
        set_axil_pauses(tb, case.get("axil_pattern"))
        if case["family"] == "errors":
            await error_prelude(tb, params, case)
        epochs = await train_runs(tb, params, [case["run"]])
        report.append({"name": case["name"], "family": case["family"],
                       "error": case.get("error"), "epochs": len(epochs),
                       "beats": sum(e["beats"] for e in epochs),
                       "cycles_busy": sum(e["cycles_busy"] for e in epochs),
                       "cycles_starved": sum(e["cycles_starved"] for e in epochs),
                       "cycles_update_stall": sum(e["cycles_update_stall"] for e in epochs)})
    set_axil_pauses(tb, None)
    _write_report(report)


# -- resets -----------------------------------------------------------------------------------

def reset_words() -> dict[int, int]:
    """Every readable register that a reset defines (not the identity constants, not the model
    memory), with its reset word."""
    return {r.offset: sum(f.reset << f.lsb for f in r.fields) for r in regs.REGISTERS
            if r.group in ("control", "config", "counters", "model") and r.access != "wo"
            and r.name != "MODEL_DATA"}


async def drive(tb: TB, beats, lasts, idle, target: int, hold: int) -> dict:
    """Stream until ``target`` beats were accepted (idle cycles from ``idle``), then offer the
    next beats without idle cycles for ``hold`` more cycles; leaves ``tvalid`` as it is and
    returns the beats accepted and the handshake state."""
    dut = tb.dut
    tdata, tlast, tvalid, tready = (dut.s_axis_tdata, dut.s_axis_tlast, dut.s_axis_tvalid,
                                    dut.s_axis_tready)
    i = extra = 0
    offered = False
    tvalid.value = 0
    while i < target or extra < hold:
        if not offered:
            if i < len(beats) and not (i < target and idle is not None and idle.idle()):
                tdata.value, tlast.value, tvalid.value = beats[i], lasts[i], 1
                offered = True
            else:
                tvalid.value = 0
        await tb.edge
        if i >= target:
            extra += 1
        if offered and tready.value:
            i += 1
            offered = False
    return {"accepted": i, "valid": int(offered), "ready": int(tready.value)}


def classify(state: dict, n_beats: int, per_sample: int, batch: int) -> str:
    """Where a stream stopped: ``flush`` (every beat in), ``update_stall`` (a batch's first
    beat offered and held), ``fused_update`` (inside a later batch's first sample),
    ``mid_sample``, or ``between_samples``."""
    accepted = state["accepted"]
    sample, within = divmod(accepted, per_sample)
    if accepted == n_beats:
        return "flush"
    if within == 0:
        held = state["valid"] and not state["ready"]
        return "update_stall" if held and sample % batch == 0 else "between_samples"
    if sample % batch == 0 and sample >= batch:
        return "fused_update"
    return "mid_sample"


def aim(point: dict, n_beats: int, per_sample: int, batch: int, tail: int) -> tuple[int, int]:
    """The beat to stop after and the cycles to hold for a reset point of ``point["kind"]``."""
    rng = np.random.default_rng(point["draw"])
    batches = -(-(n_beats // per_sample) // batch)
    kind = point["kind"]
    if kind == "flush":
        return n_beats, int(rng.integers(0, max(1, tail - 4)))
    if kind == "update_stall":
        return int(rng.integers(1, batches)) * batch * per_sample, int(rng.integers(1, 9))
    within = int(rng.integers(1, per_sample))
    if kind == "fused_update":
        return int(rng.integers(1, batches)) * batch * per_sample + within, 0
    # A sample that does not open a batch (a full batch, so that it exists).
    sample = int(rng.integers(0, n_beats // per_sample // batch)) * batch + int(
        rng.integers(1, batch))
    return sample * per_sample + within, 0


async def scored_epoch(tb: TB, params: EngineParams, config: RunConfig, samples: int, payload,
                       init, pattern: dict | None, where: str) -> tuple[dict, int]:
    """Configure (seed reloaded), write ``init`` and read it back, run one epoch of
    ``payload`` under ``pattern`` and compare it with the golden model; returns the status and
    the streaming cycles."""
    golden = GoldenEngine(params, config)
    golden.set_model(init)
    expected = golden.run_epoch(payload)
    await tb.configure(config, samples, seed=True)
    await tb.write_model(init)
    back = await tb.read_model(config.n_features)
    assert np.array_equal(back, init), f"{where}: the model reads back differently"
    status, cycles, _ = await tb.run_epoch(payload, config.layout(params.bus_width),
                                           config.n_features, make_pattern(pattern))
    check_epoch(expected, golden.model, status, await tb.read_model(config.n_features), where)
    return status, cycles


async def reset_point(tb: TB, params: EngineParams, point: dict) -> dict:
    """Stop the stream at the point, reset (or abort), check that nothing stale remains, then a
    full epoch from a re-written model, bit-exact with the golden model."""
    dut = tb.dut
    config = RunConfig(**point["config"])
    samples, seed = point["samples"], point["seed"]
    payload, layout, beats, lasts, rng = _epoch_data(params, config, samples, seed)
    per_sample = layout.beats_per_sample(config.n_features)
    span = 1 << (config.model_width - 2)
    what = f"reset point {point['index']} ({point['kind']}, {point['action']})"
    tail = 0
    if point["kind"] == "flush":
        # A full epoch first: its busy cycles after the last beat aim the reset at the flush.
        status, cycles = await scored_epoch(tb, params, config, samples, payload,
                                            rng.integers(-span, span, config.n_features),
                                            point["pattern"], what + " (aiming epoch)")
        tail = status["cycles_busy"] - cycles
    target, hold = aim(point, len(beats), per_sample, config.batch_size, tail)
    await tb.configure(config, samples, seed=True)
    await tb.write_model(rng.integers(-span, span, config.n_features))
    await tb.command(start=1)
    stall_pattern = None if point["kind"] == "update_stall" else make_pattern(point["pattern"])
    state = await drive(tb, beats, lasts, stall_pattern, target, hold)
    observed = classify(state, len(beats), per_sample, config.batch_size)
    if point["action"] == "reset":
        dut.rst.value = 1     # with the beat still offered, if one was
        await ClockCycles(dut.clk, point["reset_cycles"])
        await tb.reset()
        identity = {regs.register(name).offset: value
                    for name, value in regs.identity_values(params).items()}
        for offset, word in {**identity, **reset_words()}.items():
            got = await tb.read(offset)
            assert got == word, (f"{what}: {regs.register_at(offset).name} reads {got:#x} "
                                 f"after reset, expected {word:#x}")
    else:
        dut.s_axis_tvalid.value = 0
        await tb.command(abort=1)
        status = await tb.status()
        assert status["busy"] == 0 and status["draining"] == 0, f"{what}: {status}"
        assert status["error_flags"] == 0, f"{what}: error flags {status['error_flags']:#x}"
    # The recovery epoch: a fresh model written and read back, then a full epoch.
    status, _ = await scored_epoch(tb, params, config, samples, payload,
                                   rng.integers(-span, span, config.n_features),
                                   point["pattern"], what + " (recovery epoch)")
    return {"index": point["index"], "kind": point["kind"], "action": point["action"],
            "observed": observed, "accepted": state["accepted"], "beats": len(beats),
            "hold": hold, "tail": tail, "recovery_beats": status["beats"]}


@cocotb.test()
async def resets_mid_stream(dut):
    """Every reset point of ``test_params()["points"]``; the report says where each landed."""
    p = test_params()
    params = EngineParams(**p["params"])
    tb = TB(dut, params)
    await tb.reset()
    report = [await reset_point(tb, params, point) for point in p["points"]]
    _write_report(report)


# -- soak -------------------------------------------------------------------------------------

@cocotb.test()
async def soak_runs(dut):
    """The soak configurations of the given seeds (``zipsgd/sim/soak.py``), each logged as it ends;
    a mismatch is logged with its seed before the test fails."""
    p = test_params()
    params = EngineParams(**p["params"])
    soak = p["soak"]
    tb = TB(dut, params, axis_source=True)
    await tb.reset()
    with open(soak["log"], "a") as log:
        for seed in soak["seeds"]:
            run = soak_run(seed, params)
            entry = {"seed": seed, "config": run["config"], "samples": run["samples"],
                     "epochs": run["epochs"], "pattern": run.get("pattern"),
                     "frames": run.get("frames", False)}
            await logged_run(log, entry, train_runs(tb, params, [run]))
