"""Engine v2 as an IP under Verilator and cocotb: settings, level tables and model words through
the AXI4-Lite registers, epochs as AXI4-Stream packets, every epoch bit for bit against the
golden model; the error flags, the refusals while busy and the drain after a framing error."""

from __future__ import annotations

from zipsgd.sim.engine2_sim import engine2_runs, run_engine2
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
