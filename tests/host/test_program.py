"""``zipsgd program``: openFPGALoader's command per board, and its failures as one line."""

from __future__ import annotations

import os
import stat

import pytest

from zipsgd.cli import main
from zipsgd.host.program import LOADER_BOARDS, loader_command, program_board
from zipsgd.spec.errors import ConfigError, LinkError


@pytest.fixture
def bitstream(tmp_path):
    path = tmp_path / "zipsgd_soc.bit"
    path.write_bytes(b"\xff" * 64)
    return path


@pytest.fixture
def loader(tmp_path, monkeypatch):
    """An ``openFPGALoader`` first on the PATH that records its arguments and exits with
    ``$LOADER_STATUS`` after printing ``$LOADER_SAYS`` on standard error."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "openFPGALoader"
    log = tmp_path / "args"
    script.write_text(f'#!/bin/sh\necho "$@" > {log}\necho "$LOADER_SAYS" >&2\n'
                      f'exit "${{LOADER_STATUS:-0}}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.parametrize("board", sorted(LOADER_BOARDS))
def test_each_board_has_its_loader_name(board, bitstream):
    command = loader_command(bitstream, board)
    assert command[1:] == ["-b", LOADER_BOARDS[board], str(bitstream)]
    assert loader_command(bitstream, board, flash=True)[1:4] == ["-b", LOADER_BOARDS[board],
                                                                 "-f"]


def test_bad_boards_and_files_are_named(bitstream, tmp_path):
    with pytest.raises(ConfigError, match="board must be one of"):
        loader_command(bitstream, "de10-nano")
    with pytest.raises(ConfigError, match=r"found '.*none\.bit' \(no such file\)"):
        loader_command(tmp_path / "none.bit", "ulx3s-85f")
    (tmp_path / "top.json").write_text("{}")
    with pytest.raises(ConfigError, match="expected a bitstream"):
        loader_command(tmp_path / "top.json", "ulx3s-85f")


def test_the_loader_runs_with_the_board_and_file(loader, bitstream, capsys):
    assert main(["program", str(bitstream), "--board", "ecpix5-85", "--flash"]) == 0
    assert loader.read_text().split() == ["-b", "ecpix5", "-f", str(bitstream)]
    assert "programmed the ecpix5-85" in capsys.readouterr().out


def test_a_loader_failure_is_one_line_with_its_last_words(loader, bitstream, monkeypatch,
                                                          capsys):
    monkeypatch.setenv("LOADER_STATUS", "1")
    monkeypatch.setenv("LOADER_SAYS", "JTAG init failed\nunable to open ftdi device: -3")
    with pytest.raises(LinkError, match="did not program the ulx3s-85f: unable to open ftdi"):
        program_board(bitstream, "ulx3s-85f")
    assert main(["program", str(bitstream)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unable to open ftdi device" in err[0]
