"""Engine v2 as an IP under Verilator and cocotb: settings, level tables and model words through
the AXI4-Lite registers, epochs as AXI4-Stream packets, every epoch bit for bit against the
golden model; the error flags, the refusals while busy and the drain after a framing error;
memory runs (the engine's AXI4 master reading epochs from a memory with DRAM-like latency) and
read errors."""

from __future__ import annotations

from zipsgd.sim.engine2_sim import engine2_runs, memory_runs, run_engine2
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
