"""The out-of-context build top (``zipsgd/hw/ooc.py``) and its build plan (no tools run)."""

from __future__ import annotations

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from zipsgd.hw.ooc import EngineOocTop
from zipsgd.hw.synth import BuildError, _retarget_clock_pin, build_plan
from zipsgd.spec.engine import EngineParams
from zipsgd.spec.errors import ConfigError


@pytest.mark.parametrize("board", ["ulx3s-85f", "orangecrab-85f"])
def test_ooc_plan_constrains_the_clock_pin_to_the_target(board):
    plan = build_plan(EngineParams(64, 64, 4, lanes=2), board=board, freq_mhz=133.0, ooc=True)
    lpf = plan.files["top.lpf"]
    clock_lines = [line for line in lpf.splitlines() if line.startswith("FREQUENCY")]
    assert len(clock_lines) == 1 and clock_lines[0].endswith(" 133000000.0 HZ;")
    rtlil = plan.files["top.il"]
    # The whole engine is there: the core's memories and the harness.
    assert "model_bank1" in rtlil and "stimulus" in rtlil


def test_retarget_needs_exactly_one_clock_pin():
    with pytest.raises(BuildError, match="one clock pin constraint"):
        _retarget_clock_pin("BLOCK ASYNCPATHS;\n", 100.0)


def test_ooc_top_checks_its_arguments():
    # The half-built components are elaboratables that are never used: that warning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(TypeError):
            EngineOocTop("W=64")
        with pytest.raises(ConfigError, match="freq_mhz"):
            EngineOocTop(EngineParams(64, 64, 4), freq_mhz=0.5)
        gc.collect()
