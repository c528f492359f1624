"""Engine v2's core under Verilator and cocotb against the golden model of engine v2, every
epoch bit for bit (model words and status counts): every precision, lane plans (one feature
per update cycle, several, bypass, samples shorter than a group), batch sizes 1..64, both
update modes, every rounding mode, decay and threshold, per-feature level tables, idle cycles,
back-to-back epochs."""

from __future__ import annotations

import pytest

from zipsgd.sim.core2_sim import (
    SWEEP_FEATURES,
    codebook_runs,
    padded_runs,
    run_core2,
    sweep_runs,
)
from zipsgd.spec.engine2 import EngineParams2


# W = 128 builds for 15-20 minutes on two cores: `slow` (W = 64 covers the same plans and the
# engine's bus; the 128-bit gearbox has its own unit tests).
@pytest.mark.parametrize("bus_width", [pytest.param(w, marks=pytest.mark.slow) if w > 64 else w
                                       for w in sorted(SWEEP_FEATURES)])
def test_core2_sweep(bus_width, tmp_path, sim_options):
    params = EngineParams2(bus_width, 4096, 512)
    runs = sweep_runs(params)
    report = run_core2(params, runs, tmp_path, **sim_options)
    assert len(report) == sum(r["epochs"] for r in runs)


def test_core2_codebooks(tmp_path, sim_options):
    params = EngineParams2(64, 4096, 512)
    report = run_core2(params, codebook_runs(), tmp_path, **sim_options)
    assert len(report) == sum(r["epochs"] for r in codebook_runs())


def test_core2_padded_samples(tmp_path, sim_options):
    """Samples of more than 512 fields that share no factor with the lanes, padded on the wire:
    the padding features' forward operands are 0, so the model is the unpadded one's."""
    params = EngineParams2(64, 4096, 512)
    report = run_core2(params, padded_runs(), tmp_path, **sim_options)
    assert len(report) == sum(r["epochs"] for r in padded_runs())
