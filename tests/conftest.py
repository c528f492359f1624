"""Shared pytest configuration (project-specific fixtures go in later)."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Hypothesis profiles: "ci" (selected automatically when CI is set) has no per-example
# deadline, because timings on the shared 2-core CI machine under xdist are noisy, and
# prints the reproduction blob of a failure. Select explicitly with HYPOTHESIS_PROFILE=...
settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev")
# "fuzz" (`make fuzz`): the long run of tests/fuzz (random examples, 5000 per target).
settings.register_profile("fuzz", deadline=None, print_blob=True, max_examples=5000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser):
    parser.addoption("--waves", action="store_true", default=False,
                     help="simulation tests dump waveforms (FST when Verilator can write it, "
                          "else VCD) into their run folder, which is kept")


@pytest.fixture
def sim_options(request) -> dict:
    """Keyword arguments for zipsgd.sim.runner.build_and_test from the command line."""
    if request.config.getoption("--waves"):
        from zipsgd.sim.toolchain import fst_supported
        return {"waves": "fst" if fst_supported() else "vcd", "keep": True}
    return {}
