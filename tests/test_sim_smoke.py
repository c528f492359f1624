"""Toolchain smoke test: Amaranth -> Verilog -> Verilator -> cocotb (+ cocotbext-axi).

Fast by default (a few thousand beats); the 100k-beat throughput measurement is
``slow`` (run with ``pytest -m slow tests/test_sim_smoke.py -s``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from zipsgd.sim import runner

HERE = Path(__file__).resolve().parent
SMOKE = HERE / "sim_smoke"

sys.path.insert(0, str(SMOKE))
from design import AxiLiteRegs, AxisAdder  # noqa: E402

ADD = 0x1234_5678


def test_axis_adder_roundtrip():
    res = runner.build_and_test(
        AxisAdder(32, add=ADD), "axis_adder", "axis_tb",
        test_paths=[SMOKE], test_params={"add": ADD, "n_beats": 2000},
    )
    assert res.tests == 4 and res.failed == 0


def test_axil_regs():
    res = runner.build_and_test(AxiLiteRegs(4), "axil_regs", "axil_tb", test_paths=[SMOKE])
    assert res.tests >= 1


def test_failure_is_reported():
    """A failing cocotb test must raise SimulationFailed naming the test."""
    with pytest.raises(runner.SimulationFailed, match="axis_roundtrip_idle_backpressure"):
        runner.build_and_test(
            AxisAdder(32, add=ADD), "axis_adder", "axis_tb", test_paths=[SMOKE],
            testcase="axis_roundtrip_idle_backpressure", test_params={"add": ADD + 1},
        )


def test_name_clash_rejected():
    with pytest.raises(ValueError, match="same name"):
        runner.elaborate_verilog(AxisAdder(32), "m_axis_tlast")


def test_waves_and_coverage(tmp_path):
    res = runner.build_and_test(
        AxisAdder(32, add=ADD), "axis_adder", "axis_tb", coverage=True,
        test_paths=[SMOKE], testcase="axis_throughput_fused", waves="vcd",
        test_params={"add": ADD, "n_beats": 200}, test_dir=tmp_path / "run",
    )
    assert res.waves_file and res.waves_file.stat().st_size > 0
    cov = runner.coverage_summary(res.coverage_file)
    assert cov["line"][1] > 0 and cov["toggle"][1] > 0


@pytest.mark.slow
def test_axis_throughput(tmp_path):
    n = 100_000
    runner.build_and_test(
        AxisAdder(32, add=ADD), "axis_adder", "axis_tb", test_paths=[SMOKE],
        testcase=["axis_throughput_cocotbext", "axis_throughput_lean", "axis_throughput_fused"],
        test_params={"add": ADD, "n_beats": n, "report_dir": str(tmp_path)},
    )
    for f in sorted(tmp_path.glob("*.json")):
        r = json.loads(f.read_text())
        print(f"{f.stem}: {r['beats']} beats {r['wall']:.2f}s wall"
              f" {r['beats_per_s']:.0f} beats/s, {r['beats_per_cpu_s']:.0f} beats/CPU-s")
