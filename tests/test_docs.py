"""``make docs`` regenerates every generated document (the Makefile's GENERATED_DOCS)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _makefile_pairs() -> set[tuple[str, str]]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^GENERATED_DOCS :=((?:.*\\\n)*.*)$", text, re.MULTILINE)
    assert match, "the Makefile has no GENERATED_DOCS"
    return {tuple(pair.split(":")) for pair in match.group(1).replace("\\\n", " ").split()}


def _documents_that_say_generated() -> set[tuple[str, str]]:
    found = set()
    for path in sorted((REPO / "docs").rglob("*.md")):
        head = path.read_text(encoding="utf-8")[:600]
        module = re.search(r"Generated (?:from `[^`]+` )?by `python -m ([\w.]+)", head)
        if module:
            found.add((module.group(1), str(path.relative_to(REPO))))
    return found


def test_make_docs_covers_every_generated_document():
    generated = _documents_that_say_generated()
    assert len(generated) >= 3
    assert generated == _makefile_pairs()


def test_every_generated_document_is_current():
    for module, path in sorted(_makefile_pairs()):
        out = subprocess.run([sys.executable, "-m", module], check=True, capture_output=True,
                             text=True, cwd=REPO).stdout
        assert out == (REPO / path).read_text(encoding="utf-8"), f"{path} is stale: make docs"
