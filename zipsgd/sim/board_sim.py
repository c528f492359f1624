"""Host side of the simulated board (``zipsgd train --backend board-sim``).

:func:`simulated_board` builds :class:`~zipsgd.hw.hostlink.LinkedEngine` (the board top minus
PLL and pins) with Verilator (cached by the hash of its Verilog, like every simulation build),
runs :mod:`zipsgd.sim.board_pump` in a background thread and yields the path of the
pseudo-terminal that stands for the board's serial port; the host driver opens it with
pyserial exactly as it opens ``/dev/ttyUSB0``.  Leaving the ``with`` block stops the
simulation.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..hw.hostlink import SIM_LINK, LinkedEngine, LinkParams
from ..spec.engine import EngineParams
from .runner import SimulationFailed, build, run

__all__ = ["simulated_board", "build_board", "pty_simulation", "background_simulation"]


_BUILT: dict = {}


def build_board(params: EngineParams, link_params: LinkParams = SIM_LINK, build_root=None):
    """Verilate the simulated board for ``params`` (cached); the runner's BuildResult.  The
    result is also kept for the life of the process, which saves elaborating the design again
    to find its cached build."""
    key = (params, link_params, None if build_root is None else str(build_root))
    if key not in _BUILT:
        _BUILT[key] = _build(params, link_params, build_root)
    return _BUILT[key]


def _build(params: EngineParams, link_params: LinkParams, build_root):
    return build(LinkedEngine(params, link_params), LinkedEngine.TOP_NAME, build_root=build_root)


@contextlib.contextmanager
def simulated_board(params: EngineParams, link_params: LinkParams = SIM_LINK, build_root=None,
                    start_timeout: float = 120.0, sim_timeout: float = 1800.0) -> Iterator[str]:
    """Run the simulated board; yields its serial device path.

    Raises
    ------
    zipsgd.sim.runner.SimulationFailed
        The build fails, the simulation does not come up or it fails.
    """
    built = build_board(params, link_params, build_root)
    with pty_simulation(built, link_params.divisor, None, start_timeout, sim_timeout) as path:
        yield path


@contextlib.contextmanager
def pty_simulation(built, divisor: int, pins: dict | None, start_timeout: float,
                   sim_timeout: float) -> Iterator[str]:
    """Run :mod:`zipsgd.sim.board_pump` on ``built`` (its UART at ``divisor`` cycles a bit, on
    the top level's ``pins``: the simulated board's if None) in a background thread; yields
    the pseudo-terminal's path, and stops the simulation when the block ends.

    Raises
    ------
    zipsgd.sim.runner.SimulationFailed
        The simulation does not come up within ``start_timeout`` s, or it fails.
    """
    params = {"divisor": divisor} | ({} if pins is None else {"pins": pins})
    with background_simulation(built, "zipsgd.sim.board_pump", "board_pump", params,
                               start_timeout, sim_timeout) as path:
        yield path


@contextlib.contextmanager
def background_simulation(built, module: str, testcase: str, params: dict,
                          start_timeout: float, sim_timeout: float) -> Iterator[str]:
    """Run cocotb's ``testcase`` of ``module`` on ``built`` in a background thread with
    ``params`` and two files' paths, ``ready`` and ``stop``: the test writes ``ready`` once the
    host may connect, and ends when ``stop`` exists.  Yields what the test wrote into
    ``ready`` (where the host connects), and stops the simulation when the block ends.

    Raises
    ------
    zipsgd.sim.runner.SimulationFailed
        The simulation does not come up within ``start_timeout`` s, or it fails.
    """
    with tempfile.TemporaryDirectory(prefix="zipsgd-board-") as folder:
        ready, stop = Path(folder) / "ready", Path(folder) / "stop"
        failure: list[BaseException] = []
        params = params | {"ready": str(ready), "stop": str(stop)}

        def simulate():
            try:
                run(built, module, testcase=testcase, test_params=params, timeout_s=sim_timeout)
            except BaseException as error:
                failure.append(error)

        worker = threading.Thread(target=simulate, daemon=True)
        worker.start()
        deadline = time.monotonic() + start_timeout
        while not ready.exists():
            if not worker.is_alive():
                raise failure[0] if failure else SimulationFailed("the simulation ended "
                                                                  "before it opened its port")
            if time.monotonic() > deadline:
                stop.touch()
                raise SimulationFailed(f"the simulation did not open its port within "
                                       f"{start_timeout:g} s")
            time.sleep(0.02)
        try:
            yield ready.read_text()
        finally:
            stop.touch()
            worker.join()
        if failure:
            raise failure[0]
