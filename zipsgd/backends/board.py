"""``board`` and ``board-sim``: the engine behind the UART host link (``docs/HOSTLINK.md``),
on a board's serial port or on the board top simulated by Verilator behind a pseudo-terminal.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..host.backend import EngineBackend, EpochJob
from ..host.board import board_sim_params, open_serial, run_board_job
from ..sim.board_sim import simulated_board
from ..spec.engine import EngineParams
from ..spec.errors import ConfigError

__all__ = ["BoardBackend", "BoardSimBackend"]


class BoardBackend(EngineBackend):
    """A board programmed with ``zipsgd synth``'s bitstream, on ``settings.port`` at
    ``settings.baud``."""

    name = "board"

    def check(self, settings) -> None:
        if not settings.port:
            raise ConfigError("the board backend needs the serial port (--port), found none")

    def run_epochs(self, settings, params: EngineParams, jobs: list[EpochJob],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        with open_serial(settings.port, settings.baud) as board:
            return run_board_job(board, params, jobs, initial_model, progress)


class BoardSimBackend(EngineBackend):
    """The board top (bridge and engine) simulated by Verilator, its UART on a
    pseudo-terminal that the same driver opens with pyserial."""

    name = "board-sim"

    def run_epochs(self, settings, params: EngineParams, jobs: list[EpochJob],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        with simulated_board(board_sim_params(params, jobs)) as path, \
                open_serial(path, settings.baud, timeout=10.0, quiet=0.3) as board:
            return run_board_job(board, params, jobs, initial_model, progress)
