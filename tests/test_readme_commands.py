"""The README's commands against the real parser: the board path's commands parse as written,
and every option the "Command line" synopsis names exists on its command."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from zipsgd.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _commands(section: str) -> list[str]:
    """The ``zipsgd`` commands of a section's sh blocks, continuation lines joined and
    comments dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("zipsgd "):
                commands.append(line)
    return commands


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    """The parser of the command ``words`` names (``study convergence``: two levels)."""
    for word in words:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or word not in actions[0].choices:
            break
        parser = actions[0].choices[word]
    return parser


@pytest.mark.parametrize("command", _commands(_section("Running on a board")))
def test_the_board_paths_commands_parse(command):
    build_parser().parse_args(shlex.split(command)[1:])


@pytest.mark.parametrize("synopsis", _commands(_section("Command line")))
def test_every_option_of_the_synopsis_exists(synopsis):
    words = synopsis.split()[1:3]
    parser = _subparser(build_parser(), words)
    known = {option for action in parser._actions for option in action.option_strings}
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", synopsis))
    assert named <= known, f"{' '.join(words)}: {sorted(named - known)} not options"
