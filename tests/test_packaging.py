"""Packaging checks: one import root (`zipsgd`), folders mapped as declared in pyproject.toml."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUBPACKAGES = ["zipsgd.host", "zipsgd.golden", "zipsgd.hw", "zipsgd.sim"]
# Source folders that would be generic top-level names if they leaked into site-packages.
GENERIC_NAMES = ["host", "golden", "hw", "sim", "spec", "tests", "benchmarks"]


def _setuptools_config() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def _source_dir(package: str, package_dir: dict[str, str]) -> Path:
    """Folder of `package` by the longest mapped prefix (as setuptools resolves it)."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in package_dir:
            return REPO.joinpath(package_dir[prefix], *parts[n:])
    return REPO.joinpath(*parts)


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
    """In a clean interpreter away from the repo, only `zipsgd` is importable."""
    code = (
        "import importlib.util as u\n"
        f"import {', '.join(SUBPACKAGES)}\n"
        f"leaked = [n for n in {GENERIC_NAMES!r} if u.find_spec(n) is not None]\n"
        "assert not leaked, leaked\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=tmp_path, env=env, check=True)


def test_every_source_folder_is_a_listed_package() -> None:
    """A folder with Python files under a packaged root must be in pyproject `packages`."""
    cfg = _setuptools_config()
    package_dir: dict[str, str] = cfg["package-dir"]
    packages: list[str] = cfg["packages"]

    for package in packages:
        assert _source_dir(package, package_dir).is_dir(), f"{package}: no source folder"

    missing = []
    for root_pkg, folder in package_dir.items():
        for d in [REPO / folder, *(REPO / folder).rglob("*")]:
            if not d.is_dir() or d.name == "__pycache__" or d.name.startswith("."):
                continue
            if not any(d.glob("*.py")):
                continue
            rel = d.relative_to(REPO / folder).parts
            name = ".".join([root_pkg, *rel])
            if name not in packages:
                missing.append(f"{name} ({d.relative_to(REPO)})")
    assert not missing, "add these to [tool.setuptools] packages in pyproject.toml: " + ", ".join(
        missing
    )
