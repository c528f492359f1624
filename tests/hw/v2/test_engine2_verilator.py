"""Engine v2 as an IP under Verilator and cocotb: settings, level tables and model words through
the AXI4-Lite registers, epochs as AXI4-Stream packets, every epoch bit for bit against the
golden model; the error flags, the refusals while busy and the drain after a framing error;
memory runs (the engine's AXI4 master reading epochs from a memory with DRAM-like latency) and
read errors."""

from __future__ import annotations

import collections

from zipsgd.sim.engine2_sim import (
    engine2_runs,
    memory_runs,
    reset_points,
    run_engine2,
    stress_runs2,
)
from zipsgd.spec.engine2 import EngineParams2

PARAMS = EngineParams2(64, 4096, 512)


def test_engine2_through_registers(tmp_path, sim_options):
    report = run_engine2(PARAMS, engine2_runs(), tmp_path, **sim_options)
    assert len(report) == sum(r["epochs"] for r in engine2_runs())
    # Cycles busy per beat: the engine keeps up with the stream (idle source cycles aside).
    assert all(r["cycles_busy"] >= r["beats"] for r in report)


def test_engine2_errors(tmp_path, sim_options):
    run_engine2(PARAMS, engine2_runs()[1:2], tmp_path, testcase="engine2_errors",
                **sim_options)


def test_engine2_memory_runs(tmp_path, sim_options):
    report = run_engine2(PARAMS, memory_runs(), tmp_path, testcase="engine2_memory_runs",
                         **sim_options)
    assert [r["epochs"] for r in report] == [r["epochs"] for r in memory_runs()]
    # The run's cycles per beat: the epochs follow each other with the memory's latency hidden
    # (a start and the pipeline's drain per epoch aside).
    assert all(r["cycles"] >= r["beats"] * r["epochs"] for r in report)


def test_engine2_memory_errors(tmp_path, sim_options):
    run_engine2(PARAMS, memory_runs()[:1], tmp_path, testcase="engine2_memory_errors",
                **sim_options)


def test_engine2_resets_mid_stream(tmp_path, sim_options):
    """16 resets, each of an epoch of every run of ``engine2_runs``: in its stream, in its
    updates after the last beat, after its end; every register then reads its reset value
    and the epoch again is bit-exact in as many cycles as before."""
    report = run_engine2(PARAMS, engine2_runs(), tmp_path, testcase="engine2_resets",
                         points=reset_points(), **sim_options)
    assert len(report) == len(reset_points())
    landed = collections.Counter(r["landed"] for r in report)
    assert landed["stream"] >= 6 and landed["update"] >= 4 and landed["idle"] >= 4, landed


def test_engine2_stress_patterns(tmp_path, sim_options):
    """An epoch under each of 26 idle patterns of the input (6 fixed, 20 random), every other
    one with the AXI4-Lite channels paused too: every epoch bit-exact."""
    runs = stress_runs2()
    report = run_engine2(PARAMS, runs, tmp_path, **sim_options)
    assert len(report) == len(runs) == 26
    # The patterns hold the input back: one beat in 24 (case 3) stretches the 377-beat epoch
    # of n = 300 five times beyond its runs under the random patterns; the input idle 85 % of
    # the cycles (case 4) lengthens the epoch that case 0 streams without a gap.
    busy = [r["cycles_busy"] for r in report]
    assert busy[3] > 5 * min(busy[7::4]) and busy[4] > busy[0]
