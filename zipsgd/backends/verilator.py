"""``verilator``: the generated engine simulated by Verilator, its bus ports driven directly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..host.backend import EngineBackend, EpochJob
from ..sim.engine_sim import run_training_job
from ..spec.engine import EngineParams

__all__ = ["VerilatorBackend"]


class VerilatorBackend(EngineBackend):
    """The engine for the run's ``EngineParams`` built with Verilator (cached by the hash of
    its Verilog) and driven through its AXI4-Stream and AXI4-Lite ports by cocotb."""

    name = "verilator"

    def run_epochs(self, settings, params: EngineParams, jobs: list[EpochJob],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        return run_training_job(params, jobs, initial_model, progress)
