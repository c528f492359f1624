"""``verilator``: the generated engine simulated by Verilator, its bus ports driven directly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..host.backend import Engine2Backend, EngineBackend, EpochJob, EpochJob2
from ..sim.engine2_sim import run_training_job2
from ..sim.engine_sim import run_training_job
from ..spec.engine import EngineParams
from ..spec.engine2 import EngineParams2

__all__ = ["VerilatorBackend", "Verilator2Backend"]


class VerilatorBackend(EngineBackend):
    """The engine for the run's ``EngineParams`` built with Verilator (cached by the hash of
    its Verilog) and driven through its AXI4-Stream and AXI4-Lite ports by cocotb."""

    name = "verilator"

    def run_epochs(self, settings, params: EngineParams, jobs: list[EpochJob],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        return run_training_job(params, jobs, initial_model, progress)


class Verilator2Backend(Engine2Backend):
    """Engine v2 for the run's ``EngineParams2`` built with Verilator (cached by the hash of its
    Verilog) and driven through its AXI4-Stream and AXI4-Lite ports by cocotb: settings, level
    tables and model words through the registers of ``docs/REGISTERS2.md``."""

    name = "verilator2"

    def run_epochs(self, settings, params: EngineParams2, jobs: list[EpochJob2],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        return run_training_job2(params, jobs, initial_model, progress)
