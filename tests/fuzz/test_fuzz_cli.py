"""The ``zipsgd`` command line under hostile use: every run in its own process, as a user runs it.

Subcommands are driven with generated arguments (numbers at and beyond every limit, malformed
pairs, odd output paths) and generated input files (CSV, ``.npy``, LIBSVM, ``.zsgd`` made by
``zipsgd quantize`` and then damaged, FIFOs), plus signals mid-write, racing writers, an input
changed under a running training, and a standard output whose reader has gone.

Every run is ``python -m zipsgd.cli ...`` in a fresh folder, standard input closed, with a time
bound, and must keep the CLI's contract (``zipsgd/cli.py``).  Each broken invariant is a failure
*class*, named at the start of the assertion message (and as the exception's type):

``HANG``                    no exit within the bound (the process group is then killed)
``TRACEBACK[Error]``        a Python traceback on standard error
``SIGNAL[SIGxxx]``          the process died of a signal (SIGBUS, SIGSEGV...)
``EXIT_STATUS[n]``          an exit status other than 0 or 2
``NOT_ONE_LINE``            status 2 without exactly one ``zipsgd...`` line on standard error
``REPLACED_WITHOUT_FORCE``  a file that existed before the run was changed or removed, no --force
``CHANGED_NON_OUTPUT``      with --force, a file other than the named outputs was changed
``TEMP_LEFT``               a temporary file left behind (hidden, or named ``*tmp*``)
``LEFT_BEHIND_ON_ERROR``    a refused run (status 2) created files or folders
``ACCEPTED_INVALID``        status 0 for an argument outside its documented range
``REFUSED_VALID_OUTPUT``    status 2 for a plain, writable output path
``LATE_REJECTION``          an output path refused only after the work ran (output on stdout)
``NAN_EXIT_0``              a training that reports a NaN or infinite loss and exits 0
``MISSING_OUTPUT``          status 0 but a promised output is missing or unreadable
``IGNORED_OPTION``          ``train`` on a ``.zsgd`` silently overriding --bits/--encoding/...
``BROKEN_PIPE_NOISE``       a closed standard output reported on standard error
``PARTIAL_OUTPUT``          a stopped run left an incomplete output in place
``RACE``/``MODE``/``CHANGED_INPUT_ACCEPTED``  the special tests below

A generated example is *hostile* (any value, broken inputs) two times in three, else *plain*
(valid values, readable inputs), so that the work behind the checks is reached as well.

Two runs of the same tests (``fuzz_support``): ``make test`` runs a short derandomized set (no
shrinking, a few examples per target, about a minute on one core); ``make fuzz``
(``HYPOTHESIS_PROFILE=fuzz``) runs random examples, ``ZIPSGD_FUZZ_CLI_EXAMPLES`` per target
(default 300: each example is a process start), and ``--hypothesis-show-statistics`` prints the
counts: ``case: ...`` (what was run), ``exit: ...`` and ``failure: CLASS`` events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import os
import re
import resource
import shlex
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from zipsgd.host.zsgd_file import FIXED_BYTES, HEADER_FIELDS, StreamFile
from zipsgd.spec.errors import ZipsgdError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_support import LONG_RUN, cli_fuzz_settings

#: How the CLI is started: the module, so that the interpreter running the tests runs it.
CLI = [sys.executable, "-m", "zipsgd.cli"]
#: Seconds after which a run counts as a hang.
TIMEOUT = 60.0
#: The bound for runs that must finish at once (a FIFO nobody writes).
SHORT_TIMEOUT = 15.0
#: Sources for signals and races: quantizing this takes about a second, most of it writing.
BIG_SOURCE = "synthetic:64:20000"
BIG_EPOCHS = "8"


# ---------------------------------------------------------------------------------------------
# Failure classes


class CliFailure(AssertionError):
    """A run broke the CLI's contract; the subclass's name is the failure class (so Hypothesis
    tells the classes apart, and shrinks and reports each on its own)."""


@functools.cache
def failure_type(name: str) -> type[CliFailure]:
    return type(re.sub(r"\W", "_", name), (CliFailure,), {"__module__": __name__})


def record(text: str) -> None:
    """A statistics event when running under Hypothesis (no-op in a plain test)."""
    with contextlib.suppress(Exception):
        event(text)


# ---------------------------------------------------------------------------------------------
# Running the CLI


@dataclasses.dataclass
class Result:
    argv: list[str]
    status: int | None  # negative: killed by that signal
    stdout: str
    stderr: str
    seconds: float
    hung: bool


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["MPLBACKEND"] = "Agg"
    env.pop("PYTHONWARNINGS", None)
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def start_cli(argv, cwd, *, stdout=subprocess.PIPE, preexec_fn=None) -> subprocess.Popen:
    """``zipsgd argv`` started in ``cwd``, in its own session (so a hang is killed whole)."""
    return subprocess.Popen(CLI + list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.PIPE, start_new_session=True, env=_env(),
                            preexec_fn=preexec_fn)


def finish(proc: subprocess.Popen, argv, started: float, timeout: float = TIMEOUT) -> Result:
    """Wait for ``proc`` (killing its process group after ``timeout``); its Result."""
    hung = False
    try:
        try:
            out, err = proc.communicate(timeout=max(0.1, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            hung = True
            _kill_group(proc)
            out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
    return Result(list(argv), proc.returncode, (out or b"").decode("utf-8", "replace"),
                  (err or b"").decode("utf-8", "replace"), time.monotonic() - started, hung)


def run_cli(argv, cwd, *, timeout: float = TIMEOUT, stdout=subprocess.PIPE,
            preexec_fn=None) -> Result:
    started = time.monotonic()
    proc = start_cli(argv, cwd, stdout=stdout, preexec_fn=preexec_fn)
    return finish(proc, argv, started, timeout)


def shell_word(arg: str) -> str:
    """``arg`` as a bash word (``$'...'`` for control characters and undecodable bytes)."""
    raw = os.fsencode(arg)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        return shlex.quote(arg)
    body = "".join(chr(b) if 32 <= b < 127 and b not in b"'\\" else f"\\x{b:02x}"
                   for b in raw)
    return f"$'{body}'"


def command_line(argv) -> str:
    return " ".join(["zipsgd", *(shell_word(a) for a in argv)])


# ---------------------------------------------------------------------------------------------
# Cases: a command line plus the files it finds


class Fifo:
    """Setup marker: a FIFO (nobody ever writes it)."""

    def __repr__(self):
        return "FIFO"


class Folder:
    def __repr__(self):
        return "FOLDER"


@dataclasses.dataclass(frozen=True)
class Symlink:
    target: str


@dataclasses.dataclass(frozen=True)
class Zsgd:
    """Setup marker: a ``.zsgd`` file made by ``zipsgd quantize <source>``, then edited: header
    fields set (``fields``, the header CRC recomputed so that the checks behind it are
    reached), then damaged (bytes flipped, cut, appended: what no CRC vouches for)."""

    source: str = "synthetic:3:12"
    truncate: float | None = None             # keep this fraction of the bytes
    flips: tuple[tuple[float, int], ...] = ()  # (position as a fraction, xor mask)
    append: bytes = b""
    fields: tuple[tuple[str, int], ...] = ()  # (header field, value), CRC recomputed

    @property
    def damaged(self) -> bool:
        """Bytes changed behind a CRC's back (then the file must be refused)."""
        return self.materialize() != self._edited()

    def field(self, name: str, data: bytes | None = None) -> int:
        offset, code = _FIELD_AT[name]
        return struct.unpack_from(code, self._edited() if data is None else data, offset)[0]

    @property
    def epoch_range_wraps(self) -> bool:
        return self.field("epoch_first") + self.field("epoch_count") > 1 << 32

    @property
    def contradicting_fields(self) -> list[str]:
        """Header fields edited to values that contradict the rest of the file (the reader
        must refuse them: the CRCs are right, the checks behind them are not)."""
        original = quantized(self.source)
        changed = [n for n in _MUST_MATCH if self.field(n) != self.field(n, original)]
        return changed + (["flags (set bits)"] if self.field("flags") else [])

    def _edited(self) -> bytes:
        data = bytearray(quantized(self.source))
        if not self.fields:
            return bytes(data)
        for name, value in self.fields:
            offset, code = _FIELD_AT[name]
            struct.pack_into(code, data, offset, value & ((1 << 8 * struct.calcsize(code)) - 1))
        n_features = struct.unpack_from("<I", data, _FIELD_AT["n_features"][0])[0]
        end = FIXED_BYTES + 16 * (n_features + 1)
        if end + 4 <= len(data):
            struct.pack_into("<I", data, end, zlib.crc32(bytes(data[:end])))
        return bytes(data)

    def materialize(self) -> bytes:
        data = bytearray(self._edited())
        for where, mask in self.flips:
            data[min(len(data) - 1, int(where * len(data)))] ^= mask
        if self.truncate is not None:
            data = data[:int(self.truncate * len(data))]
        return bytes(data) + self.append


#: Header fields whose change (CRC recomputed) makes the file contradict itself: sizes, counts,
#: the version, the label format, the level flag.  (Not bits, bus width, encoding or scaling:
#: another value can describe the same bytes; nor the seed or a non-wrapping epoch_first.)
_MUST_MATCH = ("version", "header_bytes", "label_format", "n_features", "n_samples",
               "epoch_count", "beats_per_epoch", "payload_bytes", "payload_crc32", "levels")
#: Header field -> (offset, struct code) in the fixed part of a .zsgd header.
_FIELD_AT: dict[str, tuple[int, str]] = {}
_offset = 0
for _name, _code, _ in HEADER_FIELDS:
    _FIELD_AT[_name] = (_offset, "<" + _code)
    _offset += struct.calcsize("<" + _code)


FIFO, FOLDER = Fifo(), Folder()


@dataclasses.dataclass
class Case:
    kind: str                                   # statistics label, e.g. "train/golden"
    argv: list[str]
    files: dict = dataclasses.field(default_factory=dict)  # relative path -> setup
    outputs: tuple[str, ...] = ()               # relative paths (files or folders) it may write
    expect_files: tuple[str, ...] = ()          # must exist after status 0
    invalid: tuple[str, ...] = ()               # why status 0 would be wrong
    output_problem: bool = False                # the refusal is about an output path
    valid_output: bool = False                  # the output path is plain and writable
    force: bool = False
    fsize_limit: int | None = None              # RLIMIT_FSIZE of the run (a full disk)
    timeout: float = TIMEOUT

    def __repr__(self):
        files = ", ".join(f"{shell_word(k)}={_show(v)}" for k, v in self.files.items())
        extra = f" (file size limit {self.fsize_limit} bytes)" if self.fsize_limit else ""
        return f"Case<{self.kind}: {command_line(self.argv)}{extra}; files: {files or '-'}>"


def _show(value) -> str:
    if isinstance(value, bytes):
        text = repr(value[:160]) + ("..." if len(value) > 160 else "")
        return f"{text} ({len(value)} bytes)"
    return repr(value)


@functools.cache
def quantized(source: str) -> bytes:
    """The bytes ``zipsgd quantize <source>`` writes (made once per source; ``source`` may
    carry options after a space)."""
    with tempfile.TemporaryDirectory() as folder:
        result = run_cli(["quantize", *source.split(), "-o", "made.zsgd"], folder)
        assert result.status == 0, (source, result.stderr)
        return (Path(folder) / "made.zsgd").read_bytes()


def materialize(case: Case, root: Path) -> None:
    for name, value in case.files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, Fifo):
            os.mkfifo(path)
        elif isinstance(value, Folder):
            path.mkdir(exist_ok=True)
        elif isinstance(value, Symlink):
            os.symlink(value.target, path)
        elif isinstance(value, Zsgd):
            path.write_bytes(value.materialize())
        else:
            path.write_bytes(value if isinstance(value, bytes) else value.encode())


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: a regular file's digest, a link's target, or its kind
    (special files are never opened; relative to directory descriptors, so paths longer than
    PATH_MAX are no problem)."""
    entries: dict[str, object] = {}
    for folder, dirs, files, dirfd in os.fwalk(root):
        for name in dirs + files:
            rel = os.path.relpath(os.path.join(folder, name), root)
            info = os.lstat(name, dir_fd=dirfd)
            if stat.S_ISLNK(info.st_mode):
                entries[rel] = ("link", os.readlink(name, dir_fd=dirfd))
            elif stat.S_ISREG(info.st_mode):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dirfd)
                with os.fdopen(fd, "rb") as file:
                    entries[rel] = hashlib.sha256(file.read()).hexdigest()
            elif stat.S_ISDIR(info.st_mode):
                entries[rel] = "dir"
            else:
                entries[rel] = "special"
    return entries


def looks_temporary(rel: str) -> bool:
    name = os.path.basename(rel)
    return name.startswith((".", "tmp")) or bool(re.search(r"tmp$|[.\-_]tmp\b|\.temp$", name))


def _under(rel: str, outputs) -> bool:
    rel = os.path.normpath(rel)
    return any(rel == os.path.normpath(o) or rel.startswith(os.path.normpath(o) + os.sep)
               for o in outputs)


_TRACEBACK_LAST = re.compile(r"^(\w[\w.]*(?:Error|Exception|Interrupt|Exit|Warning)?)(?::|$)")


def traceback_class(stderr: str) -> str:
    """The exception type a traceback on ``stderr`` ends with."""
    after = stderr[stderr.rfind("Traceback"):].splitlines()
    for line in reversed(after):
        match = _TRACEBACK_LAST.match(line.strip())
        if match and not line.startswith(" "):
            return match.group(1).rsplit(".", 1)[-1]
    return "unknown"


_NONFINITE = re.compile(r"(?<![\w.])[-+]?(nan|inf|infinity)(?![\w])", re.IGNORECASE)


@dataclasses.dataclass
class Shell:
    """A command line shown with shell text around it (``umask 022; zipsgd ... | head``)."""

    argv: list[str]
    before: str = ""
    after: str = ""

    def __str__(self):
        return " ".join(p for p in (self.before, command_line(self.argv), self.after) if p)


def describe(case_or_argv, result: Result) -> str:
    if isinstance(case_or_argv, Case):
        shown = command_line(case_or_argv.argv)
    elif isinstance(case_or_argv, Shell):
        shown = str(case_or_argv)
    else:
        shown = command_line(case_or_argv)
    lines = [f"  command: {shown}"]
    if isinstance(case_or_argv, Case):
        if case_or_argv.files:
            lines.append("  files: " + ", ".join(f"{shell_word(k)}={_show(v)}"
                                                 for k, v in case_or_argv.files.items()))
        if case_or_argv.fsize_limit:
            lines.append(f"  ulimit -f: {case_or_argv.fsize_limit} bytes")
    status = "hung (killed)" if result.hung else result.status
    lines.append(f"  exit: {status} after {result.seconds:.1f} s")
    err = result.stderr.rstrip("\n").splitlines()
    if err:
        lines.append(f"  stderr ({len(err)} lines): {err[0][:300]!r}")
        if len(err) > 1:
            lines.append(f"  stderr last line: {err[-1][:300]!r}")
    out = result.stdout.strip().splitlines()
    if out:
        lines.append(f"  stdout ({len(out)} lines): {out[0][:200]!r}")
    return "\n".join(lines)


def problems(case: Case, result: Result, before: dict, after: dict) -> list[tuple[str, str]]:
    """Every invariant ``result`` breaks: (class, detail), worst first."""
    found: list[tuple[str, str]] = []
    status = result.status
    if result.hung:
        found.append(("HANG", f"no exit within {case.timeout:g} s"))
    if "Traceback" in result.stderr:
        found.append((f"TRACEBACK[{traceback_class(result.stderr)}]", "a traceback on stderr"))
    if not result.hung and status is not None and status < 0:
        found.append((f"SIGNAL[{signal.Signals(-status).name}]", "the process died of a signal"))
    elif not result.hung and status not in (0, 2):
        found.append((f"EXIT_STATUS[{status}]", "exit status is neither 0 nor 2"))
    if status == 2:
        lines = result.stderr.split("\n")
        if len(lines) != 2 or lines[1] != "" or not lines[0].startswith("zipsgd"):
            found.append(("NOT_ONE_LINE", "status 2 needs exactly one 'zipsgd...' line on "
                                          "stderr"))
    for rel, digest in before.items():
        if after.get(rel) != digest:
            if not case.force:
                found.append(("REPLACED_WITHOUT_FORCE", f"{rel!r} changed or vanished"))
            elif not _under(rel, case.outputs):
                found.append(("CHANGED_NON_OUTPUT", f"{rel!r} is no output of this run"))
    created = [rel for rel in after if rel not in before]
    temporaries = [rel for rel in created if looks_temporary(rel)]
    if temporaries and not result.hung:  # a hang is ended by SIGKILL: no clean-up possible
        found.append(("TEMP_LEFT", f"left behind: {temporaries}"))
    if case.fsize_limit:  # a full disk is found while writing: a folder made by then may stay
        created = [rel for rel in created if after[rel] != "dir"]
    if status == 2 and created and not temporaries:
        found.append(("LEFT_BEHIND_ON_ERROR", f"a refused run created {created}"))
    if status == 0 and case.invalid:
        found.append(("ACCEPTED_INVALID", "; ".join(case.invalid)))
    if status == 2 and case.valid_output and not case.invalid:
        found.append(("REFUSED_VALID_OUTPUT", "a plain output path was refused"))
    if status == 2 and case.output_problem and result.stdout.strip():
        found.append(("LATE_REJECTION", "the output path was refused after the work ran"))
    if status == 0 and case.kind.startswith("train"):
        table = result.stdout.split("optimum loss")[0]
        if _NONFINITE.search(table):
            found.append(("NAN_EXIT_0", "a non-finite loss, and status 0"))
    if status == 0 and case.kind.startswith("train") and not result.stderr.strip():
        ignored = ignored_by_zsgd(case)
        if ignored:
            found.append(("IGNORED_OPTION", f"the .zsgd file's own settings win over {ignored}, "
                                            "silently (say so, or refuse)"))
    if status == 0:
        for rel in case.expect_files:
            path = Path(rel)
            if not path.is_file():
                found.append(("MISSING_OUTPUT", f"{rel!r} was not written"))
            elif rel.endswith(".zsgd"):
                try:
                    StreamFile(path)
                except ZipsgdError as error:
                    found.append(("MISSING_OUTPUT", f"{rel!r} is unreadable: {error}"))
            elif rel.endswith(".json"):
                text = path.read_text()
                if re.search(r"\b(NaN|Infinity)\b", text):
                    found.append(("NAN_EXIT_0", f"{rel!r} holds NaN/Infinity"))
                try:
                    json.loads(text)
                except ValueError as error:
                    found.append(("MISSING_OUTPUT", f"{rel!r} is no JSON: {error}"))
    return found


def ignored_by_zsgd(case: Case) -> list[str]:
    """The options of a ``train`` on a ``.zsgd`` (in the current folder) that its file
    overrides: a layout other than the file's, or ``--loss lssvm``."""
    source = case.argv[1] if len(case.argv) > 1 else ""
    if not source.endswith(".zsgd") or not isinstance(case.files.get(source), Zsgd):
        return []
    try:
        layout = StreamFile(source).header.layout
    except (ZipsgdError, OSError):
        return []
    given = dict(a.split("=", 1) for a in case.argv if a.startswith("--") and "=" in a)
    file_has = {"--encoding": layout.encoding.name.lower(), "--bits": str(layout.bits),
                "--bus-width": str(layout.bus_width)}
    ignored = [f"{k}={v}" for k, v in given.items() if k in file_has and v != file_has[k]]
    if given.get("--loss") == "lssvm":
        ignored.append("--loss=lssvm")
    return ignored


def raise_problems(what, result: Result, found) -> None:
    if not found:
        record("passed")
        return
    for name, _ in found:
        record(f"failure: {name}")
    head, detail = found[0]
    others = "".join(f"\n  also [{n}] {d}" for n, d in found[1:])
    raise failure_type(head)(f"[{head}] {detail}\n{describe(what, result)}{others}")


def execute(case: Case) -> Result:
    """Run ``case`` in a fresh folder and check every invariant."""
    record(f"case: {case.kind}")
    with tempfile.TemporaryDirectory(prefix="zipsgd-cli-fuzz-") as folder:
        root = Path(folder)
        materialize(case, root)
        before = snapshot(root)
        limit = case.fsize_limit
        if any(isinstance(v, Fifo) for v in case.files.values()):
            case = dataclasses.replace(case, timeout=min(case.timeout, SHORT_TIMEOUT))
        preexec = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))) \
            if limit else None
        result = run_cli(case.argv, root, timeout=case.timeout, preexec_fn=preexec)
        after = snapshot(root)
        record("exit: hang" if result.hung else f"exit: {result.status}")
        with contextlib.chdir(root):
            found = problems(case, result, before, after)
    raise_problems(case, result, found)
    return result


# ---------------------------------------------------------------------------------------------
# Generated values.  Each example first draws whether it is *hostile*: a hostile example takes
# any value (invalid ones, broken files, limits), a plain one only valid values and readable
# inputs, so that the work behind the checks (training, writing outputs) is reached too.  Values
# are (text, why it is invalid or None), passed in the "--name=value" form (so "-1" stays a
# value).


@dataclasses.dataclass(frozen=True)
class Pool:
    pairs: tuple  # (text, why it is invalid or None)

    def __call__(self, hostile: bool) -> st.SearchStrategy:
        good = [p for p in self.pairs if p[1] is None]
        return st.sampled_from(self.pairs if hostile or not good else good)


def values(*pairs) -> Pool:
    return Pool(tuple(pairs))


def choice(valid: list, wrong: list, hostile: bool) -> st.SearchStrategy:
    """An element of ``valid``, or (hostile) of ``valid + wrong``."""
    return st.sampled_from(valid + wrong if hostile else valid)


def hostility() -> st.SearchStrategy:
    """Whether an example is hostile (the simplest example is not)."""
    return st.integers(0, 2).map(lambda n: n > 0)


def ok(*texts):
    return [(t, None) for t in texts]


def bad(why, *texts):
    return [(t, why) for t in texts]


BITS = values(*ok("1", "2", "4", "8"), *bad("bits must be 1..8", "-1", "0", "9", "16", "32",
                                             "33", "255", "256", "4294967296",
                                             "18446744073709551616"),
              *bad("not an integer", "1.5", "x", ""))
BUS = values(*ok("64", "128", "256", "512"),
             *bad("bus width must be 64/128/256/512", "0", "-64", "32", "63", "65", "96", "1024",
                  "4096", "2147483648", "18446744073709551680"), *bad("not an integer", "1e3"))
TRAIN_EPOCHS = values(*ok("1", "2", "3"), *bad("epochs must be >= 1", "0", "-1",
                                               "-2147483648"), *bad("not an integer", "1.0"))
BATCH = values(*ok("1", "2", "3", "16", "64"),
               *[(t, None) for t in ("65", "1024", "1025", "65536", "2147483648",
                                     "9223372036854775808", "18446744073709551616")],
               *bad("batch size must be >= 1", "0", "-1"))
STEP = values(*ok("0.5", "1", "1e-3", "1e-320", "5e-324", "4", "1e30", "1e154", "1e200", "1e308",
                  "1.7976931348623157e308"),
              *bad("step size must be a finite number > 0", "0", "-0.0", "-1", "1e309", "inf",
                   "-inf", "nan", "NaN"),
              *bad("not a number", "x", "0x1p3"))
REG = values(*ok("0", "0.0", "-0.0", "1e-3", "0.1", "1", "1e154", "1e308"),
             *bad("l1/l2 must be a finite number >= 0", "-1", "-1e-300", "1e309", "inf", "nan"))
MODEL_FORMAT = values(*ok("32,24", "2,1", "32,31", "16,8", "24,16", "8,7", "16,16", "4,30"),
                      *bad("model format needs 2 <= WL <= 32, 1 <= FL <= 31", "32,-1", "64,70",
                           "33,16", "1,0", "0,0", "32,32", "24,0", "-1,-1", "2147483648,1",
                           "16,4294967296"),
                      *bad("not WL,FL", "a,b", "16", "16,8,1", ",", "16;8"))
GRAD_FORMAT = values(  # the oracle is format_problem (the range depends on the model format)
    *ok("32,24", "32,16", "24,20", "32,56"),
    *bad("?", "2,1", "16,8", "32,57", "8,-8", "32,-1", "64,70", "33,16", "1,0", "a,b", "16",
         "32,63", "32,64", "32,0"))
LANES = values((None, None), *ok("2", "4", "16", "32"),
               *bad("lanes must be a power of two from 2 to W/2", "-2", "0", "1", "3", "6",
                    "1024", "4294967296"))
SEEDS = values(*ok("0", "1", "12345", "18446744073709551615"),
               *[(t, None) for t in ("-1", "18446744073709551616", "-9223372036854775809")])
QUANT_EPOCHS = values(*ok("1", "2", "3"), *bad("epochs must be 1..65536", "0", "-1", "65537",
                                               "4294967296", "18446744073709551616"))
EPOCH_FIRST = values(*ok("0", "1", "7"), ("4294967295", "?"), ("4294967294", "?"),
                     *bad("epoch_first must fit u32", "-1", "4294967296", "18446744073709551616"))
LABEL_COLUMN = values(*ok("0", "-1"), *bad("?", "1", "-2", "2", "3", "100", "-100",
                                           "9223372036854775808"))

#: Cells of generated CSV/LIBSVM files: numbers at the float limits, and broken ones.
GOOD_CELLS = ["0", "1", "-1", "0.5", "-2.25", "3e-7", "1e200", "-1e200", "1.3e154", "1.5e154",
              "1e308", "-1.7976931348623157e308", "5e-324", "1e-320", "12345678901234567890"]
BAD_CELLS = ["nan", "inf", "-inf", "", "abc", "1e309", "0x10", " ", "\u00e9", "1,5"]
CELLS = st.one_of(st.sampled_from(GOOD_CELLS), st.sampled_from(GOOD_CELLS),
                  st.sampled_from(GOOD_CELLS), st.sampled_from(BAD_CELLS),
                  st.floats(allow_nan=False, allow_infinity=False).map(repr))


@st.composite
def csv_file(draw) -> bytes:
    cols = draw(st.integers(1, 4))
    rows = draw(st.lists(st.lists(CELLS, min_size=cols, max_size=cols), min_size=1, max_size=6))
    text = "\n".join(",".join(row) for row in rows)
    if draw(st.booleans()):
        text = ",".join(f"c{i}" for i in range(cols)) + "\n" + text
    return (text + draw(st.sampled_from(["\n", "", "\n\n", "\r\n"]))).encode()


@st.composite
def npy_file(draw) -> bytes:
    kind = draw(st.sampled_from(["float64", "float64", "float32", "int64", "bool", "uint8",
                                 "timedelta64[s]", "datetime64[s]", "complex128", "object",
                                 "U3"]))
    shape = draw(st.sampled_from([(3, 2), (5, 3), (1, 2), (2, 1), (4, 4), (0, 3), (3, 0), (3,),
                                  (2, 2, 2), ()]))
    cells = draw(st.lists(st.sampled_from(GOOD_CELLS[:14] + ["nan", "inf"]),
                          min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    numbers = np.array([float(c) for c in cells], dtype=np.float64).reshape(shape)
    with np.errstate(all="ignore"):
        if kind == "object":
            array = numbers.astype(object)
        elif kind == "U3":
            array = numbers.astype("U3")
        elif kind.startswith(("timedelta", "datetime", "int", "uint")):
            array = np.nan_to_num(numbers, posinf=7, neginf=-7).clip(-1e6, 1e6).astype(kind)
        else:
            array = numbers.astype(kind)
    if draw(st.booleans()):
        array = np.asfortranarray(array)
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    data = buffer.getvalue()
    if draw(st.integers(0, 5)) == 0:  # damaged
        data = data[:draw(st.integers(0, len(data)))]
    return data


@st.composite
def libsvm_file(draw) -> bytes:
    index = st.sampled_from(["0", "1", "2", "3", "5", "16777216", "2147483648", "-1", "x"])
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        pairs = draw(st.lists(st.tuples(index, CELLS), max_size=4))
        label = draw(CELLS)
        lines.append(" ".join([label] + [f"{i}:{v}" for i, v in pairs]))
    return ("\n".join(lines) + "\n").encode()


SMALL_SYNTHETIC = st.builds(lambda d, n, s: f"synthetic:{d}:{n}:{s}", st.integers(1, 6),
                            st.integers(8, 30), st.sampled_from(["0", "1", "7"]))
SYNTHETIC = st.one_of(
    SMALL_SYNTHETIC,
    st.sampled_from(["synthetic:0:10", "synthetic:3:0", "synthetic:-1:5", "synthetic:x",
                     "synthetic:3:10:18446744073709551616", "synthetic:16777216:1",
                     "synthetic:40000:2", "synthetic:2:1", "synthetic:", "synthetic:3:10:0:1",
                     "sklearn:diabetes", "sklearn:nope", "nosuch:thing", "no_such_file.csv"]))


@st.composite
def plain_csv(draw) -> bytes:
    """A readable CSV file: a varying label and 1..3 features, moderate numbers."""
    cols = draw(st.integers(2, 4))
    rows = draw(st.lists(st.lists(st.floats(-1e3, 1e3, allow_subnormal=False), min_size=cols,
                                  max_size=cols), min_size=4, max_size=12))
    rows[0][0], rows[1][0] = 1.0, -1.0
    return "".join(",".join(repr(v) for v in row) + "\n" for row in rows).encode()


@st.composite
def data_source(draw, allow_zsgd: bool = True, hostile: bool = True) -> tuple[str, dict]:
    """(source argument, files): a synthetic spec or a generated file (plain: a readable one)."""
    if not hostile:
        kind = draw(st.sampled_from(["synthetic", "csv"] + (["zsgd"] if allow_zsgd else [])))
        if kind == "synthetic":
            return draw(SMALL_SYNTHETIC), {}
        if kind == "csv":
            return "data.csv", {"data.csv": draw(plain_csv())}
        return "in.zsgd", {"in.zsgd": Zsgd(draw(st.sampled_from(ZSGD_SOURCES)))}
    choices = ["synthetic", "csv", "npy", "libsvm"] + (["zsgd"] if allow_zsgd else [])
    if LONG_RUN:
        choices.append("fifo")
    kind = draw(st.sampled_from(choices))
    if kind == "synthetic":
        return draw(SYNTHETIC), {}
    if kind == "csv":
        name = draw(st.sampled_from(["data.csv", "csv:data.txt", "my data \u00e9.csv"]))
        return name, {name.removeprefix("csv:"): draw(csv_file())}
    if kind == "npy":
        return "data.npy", {"data.npy": draw(npy_file())}
    if kind == "libsvm":
        name = draw(st.sampled_from(["data.svm", "data", "libsvm:data.dat"]))
        return name, {name.removeprefix("libsvm:"): draw(libsvm_file())}
    if kind == "fifo":  # a FIFO as a .zsgd file is pinned in SPECIAL_CASES
        name = draw(st.sampled_from(["data.csv", "data.npy", "data.svm", "data.npz"]))
        return name, {name: FIFO}
    return "in.zsgd", {"in.zsgd": draw(zsgd_file())}


ZSGD_SOURCES = ["synthetic:3:12", "synthetic:1:2", "synthetic:6:20:3 --epochs=2"]


@st.composite
def zsgd_file(draw) -> Zsgd:
    source = draw(st.sampled_from(ZSGD_SOURCES))
    damage = draw(st.sampled_from(["none", "truncate", "flip", "append", "mixed"]))
    fractions = st.floats(0, 0.999)
    truncate = draw(fractions) if damage in ("truncate", "mixed") else None
    flips = tuple(draw(st.lists(st.tuples(fractions, st.integers(1, 255)), min_size=1,
                                max_size=3))) if damage in ("flip", "mixed") else ()
    append = draw(st.binary(min_size=1, max_size=64)) if damage == "append" else b""
    fields = ()
    if draw(st.integers(0, 2)) == 0:
        names = [n for n, _, _ in HEADER_FIELDS if n != "magic"]
        extreme = st.sampled_from([0, 1, 2, 7, 64, 0xFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFE, 2**31,
                                   2**40, 2**64 - 1])
        fields = tuple(draw(st.lists(st.tuples(st.sampled_from(names),
                                               st.one_of(extreme, st.integers(0, 2**64 - 1))),
                                     min_size=1, max_size=2)))
    if draw(st.integers(0, 7)) == 7:  # the epoch range wraps u32 (the writer refuses that)
        fields += (("epoch_first", 0xFFFFFFFF),) if "--epochs=2" in source \
            else (("epoch_first", 0xFFFFFFFF), ("epoch_count", 2))
    return Zsgd(source, truncate, flips, append, fields)


def option(name: str, value: str | None) -> list[str]:
    return [] if value is None else [f"{name}={value}"]


def format_problem(model: str, grad: str) -> list[str]:
    """Why ``--model-format model --grad-format grad`` is invalid (RunConfig's documented
    ranges), or nothing."""
    try:
        mw, mf = (int(p) for p in model.split(","))
        gw, gf = (int(p) for p in grad.split(","))
    except ValueError:
        return ["a format is not WL,FL"]
    why = []
    if not (2 <= mw <= 32 and 1 <= mf <= 31):
        why.append("model format needs 2 <= WL <= 32, 1 <= FL <= 31")
    elif not (2 <= gw <= 32 and max(0, mf - 8) <= gf <= mf + 32):
        why.append("grad format needs 2 <= WL <= 32, FL_m - 8 <= FL <= FL_m + 32")
    return why


# ---------------------------------------------------------------------------------------------
# quantize


@st.composite
def quantize_case(draw) -> Case:
    hostile = draw(hostility())
    source, files = draw(data_source(allow_zsgd=False, hostile=hostile))
    invalid = []
    if hostile and draw(st.integers(0, 9)) == 9:
        source, files = "in.zsgd", {"in.zsgd": Zsgd()}
        invalid.append("a .zsgd file is no data source")
    encoding = draw(choice([None, "double", "single", "raw32"], ["Double", "float"], hostile))
    if encoding == "float":
        invalid.append("no encoding 'float'")
    if encoding == "raw32" and not hostile:
        bits, bits_bad = None, None  # raw32 takes no --bits
    else:
        bits, bits_bad = draw(BITS(hostile)) if draw(st.booleans()) else (None, None)
    bus, bus_bad = draw(BUS(hostile)) if draw(st.booleans()) else (None, None)
    epochs, epochs_bad = draw(QUANT_EPOCHS(hostile)) if draw(st.booleans()) else (None, None)
    first, first_bad = draw(EPOCH_FIRST(hostile)) if draw(st.integers(0, 3)) == 3 \
        else (None, None)
    seed, _ = draw(SEEDS(hostile)) if draw(st.integers(0, 2)) == 2 else (None, None)
    label = draw(LABEL_COLUMN(hostile))[0] if draw(st.integers(0, 2)) == 2 else None
    invalid += [why for why in (bus_bad, epochs_bad) if why]
    if bits_bad and encoding not in ("raw32",):
        invalid.append(bits_bad)
    if first_bad == "?":
        if int(first) + int(epochs if epochs and not epochs_bad else 1) > 1 << 32:
            invalid.append("epoch_first + epochs must fit u32")
    elif first_bad:
        invalid.append(first_bad)
    argv = ["quantize", source, "-o", "out.zsgd", *option("--encoding", encoding),
            *option("--bits", bits), *option("--bus-width", bus), *option("--epochs", epochs),
            *option("--epoch-first", first), *option("--seed", seed),
            *option("--label-column", label)]
    argv += draw(choice([[], ["--intercept"], ["--scaling=minmax"]], [["--scaling=std"]],
                        hostile))
    return Case("quantize", argv, files, outputs=("out.zsgd",), expect_files=("out.zsgd",),
                invalid=tuple(invalid))


@cli_fuzz_settings(5)
@given(quantize_case())
def test_quantize_arguments(case):
    execute(case)


# ---------------------------------------------------------------------------------------------
# train (float and golden backends only, a few epochs)


@st.composite
def train_case(draw) -> Case:
    hostile = draw(hostility())
    source, files = draw(data_source(hostile=hostile))
    backend = draw(st.sampled_from(["float", "golden"])) \
        if hostile or not source.endswith(".zsgd") else "golden"  # float needs the raw data
    picks = {}
    invalid = []
    layout_options = ("--bits", "--bus-width")
    for name, pool in (("--bits", BITS), ("--bus-width", BUS), ("--epochs", TRAIN_EPOCHS),
                       ("--batch-size", BATCH), ("--step-size", STEP), ("--l2", REG),
                       ("--l1", REG), ("--lanes", LANES), ("--seed", SEEDS)):
        if not hostile and name in layout_options and source.endswith(".zsgd"):
            continue  # the file has its own layout
        if draw(st.integers(0, 2)) == 2:
            value, why = draw(pool(hostile))
            picks[name] = value
            if why:
                invalid.append(f"{name} {value!r}: {why}")
    encoding = draw(choice([None, "double", "single", "raw32"], [], hostile)) \
        if hostile or not source.endswith(".zsgd") else None
    if encoding == "raw32":  # raw32 has no interval-index bits: say so or refuse, either is fine
        invalid = [w for w in invalid if not w.startswith("--bits")]
        if not hostile:
            picks.pop("--bits", None)
    model = draw(MODEL_FORMAT(hostile))[0] if draw(st.integers(0, 2)) == 2 else None
    grad = draw(GRAD_FORMAT(hostile))[0] if draw(st.integers(0, 2)) == 2 else None
    invalid += format_problem(model or "32,24", grad or "32,24")
    argv = ["train", source, f"--backend={backend}", *option("--encoding", encoding)]
    if "--epochs" not in picks:
        picks["--epochs"] = draw(st.sampled_from(["1", "2"]))
    for name, value in picks.items():
        argv += option(name, value)
    argv += option("--model-format", model) + option("--grad-format", grad)
    losses = [None, "squared"] + (["lssvm"] if hostile else [])
    argv += option("--loss", draw(choice(losses, ["hinge"], hostile)))
    argv += option("--update-mode", draw(choice([None, "exact", "delayed"], ["eager"], hostile)))
    argv += option("--rounding", draw(choice([None, "truncate", "half-even", "stochastic"],
                                             ["up"], hostile)))
    if hostile or not source.endswith(".zsgd"):
        argv += draw(choice([[], ["--intercept"], ["--scaling=minmax"], ["--label-column=-1"]],
                            [["--label-column=5"]], hostile))
    outputs, expect = (), ()
    if draw(st.integers(0, 2)) == 2:
        argv += ["--report", "report.json"]
        outputs, expect = ("report.json",), ("report.json",)
    return Case(f"train/{backend}", argv, files, outputs=outputs, expect_files=expect,
                invalid=tuple(invalid))


@cli_fuzz_settings(7)
@given(train_case())
def test_train_arguments(case):
    execute(case)


# ---------------------------------------------------------------------------------------------
# inspect (and train) on .zsgd files made by quantize, then damaged


@st.composite
def zsgd_case(draw) -> Case:
    stream = draw(zsgd_file()) if draw(hostility()) else Zsgd(draw(st.sampled_from(ZSGD_SOURCES)))
    command = draw(st.sampled_from([["inspect", "f.zsgd"], ["inspect", "--json", "f.zsgd"],
                                    ["train", "f.zsgd", "--backend=golden", "--epochs=1"],
                                    ["train", "f.zsgd", "--backend=float", "--epochs=2"]]))
    invalid = ("a damaged .zsgd file was accepted",) if stream.damaged else ()
    if stream.epoch_range_wraps:
        invalid += ("a header whose epoch range wraps u32 was accepted",)
    if stream.contradicting_fields:
        invalid += (f"header fields {stream.contradicting_fields} contradict the file",)
    kind = "inspect" if command[0] == "inspect" else "train/zsgd"
    return Case(kind, command, {"f.zsgd": stream}, invalid=invalid)


@cli_fuzz_settings(4)
@given(zsgd_case())
def test_damaged_zsgd(case):
    # Appended bytes or a flip in a CRC-covered byte changes what the CRCs vouch for: refused.
    execute(case)


# ---------------------------------------------------------------------------------------------
# Output paths: every subcommand's outputs, at odd places


@dataclasses.dataclass(frozen=True)
class Slot:
    """One output argument of one subcommand."""

    name: str
    argv: tuple[str, ...]  # "{}" is replaced by the path
    folder: bool           # the output is a folder (it holds `produces`)
    produces: str          # the (first) file it writes


SLOTS = [
    Slot("quantize -o", ("quantize", "synthetic:8:200", "-o", "{}"), False, "out.zsgd"),
    Slot("train --report", ("train", "synthetic:3:10", "--backend=float", "--epochs=2",
                            "--report", "{}"), False, "report.json"),
    Slot("train --plot", ("train", "synthetic:3:10", "--backend=float", "--epochs=2", "--plot",
                          "{}"), False, "plot.png"),
    Slot("perf --json", ("perf", "synthetic:4:20", "--json", "{}"), False, "perf.json"),
    Slot("study convergence --out", ("study", "convergence", "--datasets", "synthetic:3:20",
                                     "--bits", "1", "--epochs", "1", "--out", "{}"), True,
         "convergence.json"),
]

#: Output path kinds -> what the run must do: "ok", "refuse" or "either".
OUTPUT_KINDS = ["plain", "exists", "missing-folder", "dir", "file-as-folder", "long-300",
                "long-250", "long-path", "spaces-unicode", "newline", "undecodable", "proc-self",
                "proc-missing", "empty", "dot", "dangling-symlink", "full-disk"]


def output_case(slot: Slot, kind: str, force: bool) -> Case:
    ext = os.path.splitext(slot.produces)[1]
    files: dict = {}
    expect, limit = "either", None
    base = "outdir" if slot.folder else slot.produces
    path = base
    if kind == "plain":
        expect = "ok"
    elif kind == "exists":
        if slot.folder:
            files = {f"{base}/{slot.produces}": b"sentinel: must survive\n"}
        else:
            files = {base: b"sentinel: must survive\n"}
        expect = "ok" if force else "refuse"
    elif kind == "missing-folder":
        path = f"no/such/folder/{base}"
        expect = "either" if slot.folder else "refuse"
    elif kind == "dir":
        files = {base: FOLDER}
        expect = "ok" if slot.folder else "refuse"
    elif kind == "file-as-folder":
        files = {"afile": b"a file, not a folder\n"}
        path = "afile" if slot.folder else f"afile/{base}"
        expect = "refuse"
    elif kind == "long-300":
        path = "L" * (300 - len(ext)) + ext
        expect = "refuse"
    elif kind == "long-250":
        path = "L" * (250 - len(ext)) + ext
    elif kind == "long-path":
        path = "/".join(["d" * 200] * 25) + "/" + base
        expect = "refuse"
    elif kind == "spaces-unicode":
        path = f"my out \u2603 \u00e9t\u00e9{ext}"
        expect = "ok"
    elif kind == "newline":
        path = f"a\nb{ext}"
        files = {path: b"sentinel\n"} if not force else {}
        expect = "refuse" if not force else "either"
    elif kind == "undecodable":
        path = f"\udcff\udcfe{ext}"
    elif kind == "proc-self":
        path = f"/proc/self/{base}"
        expect = "refuse"
    elif kind == "proc-missing":
        path = f"/proc/zipsgd-fuzz/{base}"
        expect = "refuse"
    elif kind == "empty":  # for an optional output, "" may well mean "none"
        path = ""
        expect = "refuse" if slot.name == "quantize -o" else "either"
    elif kind == "dot":
        path = "."
        expect = "either" if slot.folder else "refuse"
    elif kind == "dangling-symlink":
        files = {base: Symlink("nowhere/at/all")}
    elif kind == "full-disk":
        limit = 512
        expect = "refuse"
    argv = [path if a == "{}" else a for a in slot.argv] + (["--force"] if force else [])
    if slot.folder:
        produced = (f"{path}/{slot.produces}",) if kind in ("plain", "dir", "spaces-unicode") \
            else ()
    else:
        produced = (path,) if kind in ("plain", "spaces-unicode") or (kind == "exists" and force) \
            else ()
    outputs = (path,) if path and not path.startswith("/") else ()
    return Case(f"output/{slot.name}/{kind}", argv, files, outputs=outputs,
                expect_files=produced,
                invalid=(f"output path kind {kind!r} must be refused",)
                if expect == "refuse" else (),
                output_problem=expect == "refuse" and kind != "full-disk",
                valid_output=expect == "ok", force=force,
                fsize_limit=limit)


@cli_fuzz_settings(7)
@given(st.sampled_from(SLOTS), st.sampled_from(OUTPUT_KINDS), st.booleans())
def test_output_paths(slot, kind, force):
    execute(output_case(slot, kind, force))


# ---------------------------------------------------------------------------------------------
# perf and study: tiny runs


BIT_LISTS = values(*ok(("1",), ("1", "8"), ("2",), ("4", "4")),
                   *bad("bits must be 1..8", ("0",), ("9",), ("-1",), ("32",), ("1", "0")))


@st.composite
def perf_case(draw) -> Case:
    hostile = draw(hostility())
    source, files = draw(data_source(allow_zsgd=False, hostile=hostile))
    invalid = []
    platform = draw(choice([None, "pynq-z1", "harp-v1"], ["nope", ""], hostile))
    if platform in ("nope", ""):
        invalid.append("unknown platform")
    bits, why = draw(BIT_LISTS(hostile))
    if why:
        invalid.append(why)
    epochs, why = draw(values((None, None), *ok("1", "3", "1000000"),
                              *bad("epochs must be >= 1", "0", "-1"))(hostile))
    if why:
        invalid.append(why)
    batch, why = draw(values((None, None), *ok("1", "16", "1024", "9223372036854775808"),
                             *bad("batch size must be >= 1", "0", "-1"))(hostile))
    if why:
        invalid.append(why)
    argv = ["perf", source, *option("--platform", platform), "--bits", *bits,
            *option("--batch-size", batch),
            *option("--update-mode", draw(st.sampled_from([None, "exact", "delayed"])))]
    target = draw(st.integers(0, 3)) == 3
    if target:
        step, why = draw(STEP(hostile))
        if why:
            invalid.append(why)
        repeats = draw(choice(["1"], ["0", "-1"], hostile))
        if repeats != "1":
            invalid.append("cpu repeats must be >= 1")
        argv += ["--target", f"--step-size={step}", f"--cpu-repeats={repeats}",
                 f"--epochs={epochs if epochs in ('1', '0', '-1') else 1}"]
    else:
        argv += option("--epochs", epochs)
    outputs = ()
    if draw(st.booleans()):
        argv += ["--json", "perf.json"]
        outputs = ("perf.json",)
    return Case("perf/target" if target else "perf", argv, files, outputs=outputs,
                expect_files=outputs, invalid=tuple(invalid))


@st.composite
def study_case(draw) -> Case:
    hostile = draw(hostility())
    which = draw(st.sampled_from(["convergence", "performance"]))
    source, files = draw(data_source(allow_zsgd=False, hostile=hostile))
    datasets = draw(st.sampled_from([["synthetic:3:20"], [source], ["synthetic:3:20", source]]))
    if datasets == ["synthetic:3:20"]:
        files = {}
    invalid = []
    bits, why = draw(BIT_LISTS(hostile))
    if why:
        invalid.append(why)
    epochs, why = draw(values(*ok("1", "2"), *bad("epochs must be >= 1", "0", "-1"))(hostile))
    if why:
        invalid.append(why)
    argv = ["study", which, "--datasets", *datasets, "--bits", *bits, f"--epochs={epochs}",
            "--out", "results"]
    if which == "performance":
        platforms = draw(choice([["pynq-z1"], ["pynq-z1", "harp-v1"]], [["nope"]], hostile))
        if platforms == ["nope"]:
            invalid.append("unknown platform")
        argv += ["--platforms", *platforms]
    return Case(f"study/{which}", argv, files, outputs=("results",),
                expect_files=(f"results/{which}.json",), invalid=tuple(invalid))


@cli_fuzz_settings(5)
@given(st.one_of(perf_case(), study_case()))
def test_perf_and_study_arguments(case):
    execute(case)


# ---------------------------------------------------------------------------------------------
# export-verilog: only the small build (a few seconds), and parameters it refuses at once

EXPORT_SMALL = ["--bus-width=64", "--max-features=64", "--max-batch=4", "--lanes=2"]


@st.composite
def export_case(draw) -> Case:
    argv = list(EXPORT_SMALL)
    invalid = []
    if draw(st.booleans()):  # one parameter out of range: refused before any build
        position = draw(st.integers(0, 3))
        value = draw(st.sampled_from([["0", "-64", "63", "96"], ["0", "-1", "2097153"],
                                      ["0", "-1", "65537"], ["0", "1", "3", "64"]][position]))
        name = argv[position].split("=")[0]
        argv[position] = f"{name}={value}"
        invalid.append(f"{name} {value} is out of range")
    files: dict = {}
    force = False
    if draw(st.booleans()):
        files = {"ev/zipsgd_engine.v": b"// sentinel: must survive\n"}
        force = draw(st.booleans())
        if not force:
            invalid.append("the folder's files exist and --force is absent")
    argv = ["export-verilog", "-o", "ev", *argv] + (["--force"] if force else [])
    return Case("export-verilog", argv, files, outputs=("ev",), force=force,
                expect_files=() if invalid else ("ev/zipsgd_engine.v",), invalid=tuple(invalid))


@pytest.mark.skipif(not LONG_RUN, reason="a build takes seconds: long run only (the pinned "
                                          "case 'export-verilog existing files' runs always)")
@cli_fuzz_settings(1, long_examples=40)
@given(export_case())
def test_export_verilog_arguments(case):
    execute(case)


# ---------------------------------------------------------------------------------------------
# Special files: a FIFO nobody writes (must not hang), devices and folders as inputs

SPECIAL_CASES = [
    ("inspect FIFO .zsgd", ["inspect", "f.zsgd"], {"f.zsgd": FIFO}),
    ("train FIFO .zsgd", ["train", "f.zsgd", "--backend=golden", "--epochs=1"],
     {"f.zsgd": FIFO}),
    ("quantize FIFO .csv", ["quantize", "f.csv", "-o", "out.zsgd"], {"f.csv": FIFO}),
    ("quantize csv:FIFO", ["quantize", "csv:f.dat", "-o", "out.zsgd"], {"f.dat": FIFO}),
    ("inspect /dev/zero as .zsgd", ["inspect", "zero.zsgd"], {"zero.zsgd": Symlink("/dev/zero")}),
    ("inspect folder .zsgd", ["inspect", "d.zsgd"], {"d.zsgd": FOLDER}),
]
if LONG_RUN:  # the loaders refuse these already: cheap regressions, in the long run only
    SPECIAL_CASES += [
        ("quantize FIFO .npy", ["quantize", "f.npy", "-o", "out.zsgd"], {"f.npy": FIFO}),
        ("quantize FIFO .svm", ["quantize", "f.svm", "-o", "out.zsgd"], {"f.svm": FIFO}),
        ("train FIFO .csv", ["train", "f.csv", "--backend=float", "--epochs=1"],
         {"f.csv": FIFO}),
        ("perf FIFO .npz", ["perf", "f.npz"], {"f.npz": FIFO}),
        ("quantize folder .csv", ["quantize", "d.csv", "-o", "out.zsgd"], {"d.csv": FOLDER}),
    ]


@pytest.mark.parametrize("name, argv, files", SPECIAL_CASES, ids=[c[0] for c in SPECIAL_CASES])
def test_special_input_files(name, argv, files):
    execute(Case(f"special/{name}", argv, files, outputs=("out.zsgd",),
                 invalid=("a special file or folder is no input",), timeout=SHORT_TIMEOUT))


# ---------------------------------------------------------------------------------------------
# Signals mid-write, racing writers, a target created during the run


def new_entries(folder: Path, before: set[str]) -> list[str]:
    return sorted(set(os.listdir(folder)) - before)


def wait_for_temporary(proc: subprocess.Popen, folder: Path, before: set[str],
                       bound: float = 30.0) -> bool:
    """Wait until a new entry (the output's temporary file) appears in ``folder``; False if
    the process ended first."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if new_entries(folder, before):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.002)
    return False


def check_complete_or_absent(target: Path, result: Result, what) -> None:
    if target.exists():
        try:
            StreamFile(target)
        except ZipsgdError as error:
            raise failure_type("PARTIAL_OUTPUT")(
                f"[PARTIAL_OUTPUT] {target.name} is not a complete file: {error}\n"
                f"{describe(what, result)}") from None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=lambda s: signal.Signals(s).name)
def test_signal_mid_write_leaves_nothing(tmp_path, signum):
    argv = ["quantize", BIG_SOURCE, "--epochs", BIG_EPOCHS, "-o", "out.zsgd"]
    before = set(os.listdir(tmp_path))
    started = time.monotonic()
    proc = start_cli(argv, tmp_path)
    try:
        mid_write = wait_for_temporary(proc, tmp_path, before)
        time.sleep(0.05)
        if proc.poll() is None:
            os.kill(proc.pid, signum)
    finally:
        result = finish(proc, argv, started)
    record("signal: mid-write" if mid_write else "signal: after the run")
    found = []
    if result.hung:
        found.append(("HANG", "no exit after the signal"))
    if "Traceback" in result.stderr:
        found.append((f"TRACEBACK[{traceback_class(result.stderr)}]", "a traceback on stderr"))
    allowed = {0, 2, 128 + signum, -signum} | ({130} if signum == signal.SIGINT else set())
    if not result.hung and result.status not in allowed:
        found.append((f"EXIT_STATUS[{result.status}]", f"expected one of {sorted(allowed)}"))
    left = [n for n in new_entries(tmp_path, before) if n != "out.zsgd"]
    if left:
        found.append(("TEMP_LEFT", f"left behind after {signal.Signals(signum).name}: {left}"))
    if (tmp_path / "out.zsgd").exists() and result.status != 0:
        found.append(("PARTIAL_OUTPUT", "out.zsgd exists although the run was stopped"))
    name = signal.Signals(signum).name
    what = Shell(argv, after=f"& (wait for its temporary file); kill -{name[3:]} $!")
    raise_problems(what, result, [(n, f"{d} ({name}, "
                                      f"{'mid-write' if mid_write else 'not seen mid-write'})")
                                  for n, d in found])
    check_complete_or_absent(tmp_path / "out.zsgd", result, what)


def test_racing_writers_one_wins(tmp_path):
    """Two quantize runs onto one new path: one publishes, the other refuses; the file is the
    winner's, complete."""
    argvs = [["quantize", BIG_SOURCE, "--epochs", "4", "--seed", str(seed), "-o", "same.zsgd"]
             for seed in (1, 2)]
    started = time.monotonic()
    procs = [start_cli(a, tmp_path) for a in argvs]
    results = [finish(p, a, started) for p, a in zip(procs, argvs, strict=True)]
    target = tmp_path / "same.zsgd"
    statuses = [r.status for r in results]
    found = []
    for result in results:
        if "Traceback" in result.stderr:
            found.append((f"TRACEBACK[{traceback_class(result.stderr)}]", "a traceback"))
    if sorted(statuses) != [0, 2]:
        found.append(("RACE", f"exit statuses {statuses}: expected one 0 (the winner) and one "
                              "2 (refused: the file exists)"))
    loser = results[statuses.index(2)] if 2 in statuses else None
    if loser is not None and (loser.stderr.count("\n") != 1
                              or not loser.stderr.endswith("\n")):
        found.append(("NOT_ONE_LINE", f"the loser's stderr: {loser.stderr!r}"))
    left = [n for n in os.listdir(tmp_path) if n != "same.zsgd"]
    if left:
        found.append(("TEMP_LEFT", f"left behind: {left}"))
    if 0 in statuses:
        winner_seed = int(argvs[statuses.index(0)][5])
        check = run_cli(["inspect", "--json", "same.zsgd"], tmp_path)
        if check.status != 0:
            found.append(("RACE", f"the published file is unreadable: {check.stderr.strip()}"))
        elif json.loads(check.stdout)["seed"] != winner_seed or statuses.count(0) > 1:
            found.append(("RACE", f"the file holds seed {json.loads(check.stdout)['seed']}, "
                                  f"the runs exited {statuses}: a success was overwritten"))
    what = Shell(argvs[0], after=f"& {command_line(argvs[1])}")
    shown = Result(what, f"{statuses[0]} and {statuses[1]}", results[0].stdout + results[1].stdout,
                   results[0].stderr + results[1].stderr,
                   max(r.seconds for r in results), any(r.hung for r in results))
    raise_problems(what, shown, found)
    check_complete_or_absent(target, shown, what)


def test_target_created_during_run_is_kept(tmp_path):
    """A file that appears at the output path while the output is written is not replaced."""
    argv = ["quantize", BIG_SOURCE, "--epochs", BIG_EPOCHS, "-o", "out.zsgd"]
    before = set(os.listdir(tmp_path))
    started = time.monotonic()
    proc = start_cli(argv, tmp_path)
    sentinel = b"created by someone else during the run\n"
    try:
        mid_write = wait_for_temporary(proc, tmp_path, before)
        if mid_write:
            with open(tmp_path / "out.zsgd", "xb") as file:
                file.write(sentinel)
    finally:
        result = finish(proc, argv, started)
    if not mid_write:
        pytest.fail(f"the run ended before its temporary file was seen\n{describe(argv, result)}")
    found = []
    if "Traceback" in result.stderr:
        found.append((f"TRACEBACK[{traceback_class(result.stderr)}]", "a traceback"))
    if (tmp_path / "out.zsgd").read_bytes() != sentinel:
        found.append(("REPLACED_WITHOUT_FORCE", "out.zsgd, created during the run, was "
                                                "replaced"))
    if result.status != 2 or result.stderr.count("\n") != 1:
        found.append((f"EXIT_STATUS[{result.status}]" if result.status != 2
                      else "NOT_ONE_LINE", "expected status 2 and one line: the output exists"))
    left = [n for n in new_entries(tmp_path, before) if n != "out.zsgd"]
    if left:
        found.append(("TEMP_LEFT", f"left behind: {left}"))
    raise_problems(argv, result, found)


# ---------------------------------------------------------------------------------------------
# An input changed under a running training: trained on what was verified, or one clear error


@functools.cache
def _reference_training(epochs: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "big.zsgd").write_bytes(quantized(BIG_SOURCE))
        result = run_cli(["train", "big.zsgd", "--backend=golden", f"--epochs={epochs}"], folder)
        assert result.status == 0, result.stderr
        return result.stdout


@pytest.mark.parametrize("change", ["truncate", "overwrite"] if LONG_RUN else ["truncate"])
def test_zsgd_changed_during_training(tmp_path, change):
    epochs = "25"
    data = quantized(BIG_SOURCE)
    (tmp_path / "big.zsgd").write_bytes(data)
    argv = ["train", "big.zsgd", "--backend=golden", f"--epochs={epochs}"]
    started = time.monotonic()
    proc = start_cli(argv, tmp_path)
    try:
        time.sleep(1.0)  # started, file verified and opened
        running = proc.poll() is None
        with open(tmp_path / "big.zsgd", "r+b") as file:  # in place, as another program would
            if change == "truncate":
                file.truncate(len(data) // 3)
            else:
                file.seek(len(data) // 3)
                file.write(bytes(b ^ 0x5A for b in data[len(data) // 3:]))
    finally:
        result = finish(proc, argv, started)
    record(f"changed input: {'while running' if running else 'after the run'}")
    found = []
    if "Traceback" in result.stderr:
        found.append((f"TRACEBACK[{traceback_class(result.stderr)}]", "a traceback"))
    if result.status is not None and result.status < 0:
        found.append((f"SIGNAL[{signal.Signals(-result.status).name}]",
                      f"died when the input was {change}d"))
    elif result.status not in (0, 2):
        found.append((f"EXIT_STATUS[{result.status}]", "neither 0 nor 2"))
    if result.status == 2 and result.stderr.count("\n") != 1:
        found.append(("NOT_ONE_LINE", "status 2 needs one line"))
    if result.status == 0 and result.stdout != _reference_training(epochs):
        found.append(("CHANGED_INPUT_ACCEPTED", f"the input was {change}d during the run, "
                                                "training used the changed data and exited 0"))
    raise_problems(Shell(argv, after=f"& sleep 1; {change} big.zsgd in place"), result, found)


# ---------------------------------------------------------------------------------------------
# Standard output whose reader has gone (`zipsgd ... | head -0`)

PIPE_CASES = [
    ["inspect", "f.zsgd"],
    ["inspect", "--json", "f.zsgd"],
    ["--help"],
    ["perf", "synthetic:4:20"],
    ["quantize", "synthetic:3:10", "-o", "out.zsgd"],
]
if LONG_RUN:
    PIPE_CASES += [["--version"], ["train", "--help"],
                   ["train", "synthetic:3:10", "--backend=float", "--epochs=3"]]


@pytest.mark.parametrize("argv", PIPE_CASES, ids=[" ".join(a) for a in PIPE_CASES])
def test_closed_stdout(tmp_path, argv):
    (tmp_path / "f.zsgd").write_bytes(quantized("synthetic:3:12"))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = run_cli(argv, tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    record(f"case: closed stdout {argv[0]}")
    found = problems(Case("closed-stdout", argv), result, {}, {})
    if re.search(r"BrokenPipe|Exception ignored", result.stderr):
        found.append(("BROKEN_PIPE_NOISE", "a closed stdout reported on stderr"))
    raise_problems(Shell(argv, after="| head -c0  # stdout closed at once"), result, found)


# ---------------------------------------------------------------------------------------------
# Output permissions: what the umask gives, also with --force


MODE_CASES = [
    (["quantize", "synthetic:3:10", "-o", "out.zsgd"], "out.zsgd"),
    (["train", "synthetic:3:10", "--backend=float", "--epochs=1", "--report", "r.json"],
     "r.json"),
]
if LONG_RUN:
    MODE_CASES.append((["perf", "synthetic:4:20", "--json", "p.json"], "p.json"))


@pytest.mark.parametrize("argv, output", MODE_CASES, ids=[c[1] for c in MODE_CASES])
def test_output_mode_follows_umask(tmp_path, argv, output):
    """umask 022: a new output is 0644, and --force keeps an existing 0644 file 0644."""
    def umask():
        os.umask(0o022)

    found = []
    result = run_cli(argv, tmp_path, preexec_fn=umask)
    found += problems(Case("mode", argv), result, {}, {})
    if result.status == 0:
        mode = stat.S_IMODE((tmp_path / output).stat().st_mode)
        if mode != 0o644:
            found.append(("MODE", f"{output} created with mode {mode:#o}, umask 022 gives "
                                  "0o644"))
        os.chmod(tmp_path / output, 0o644)
        again = run_cli([*argv, "--force"], tmp_path, preexec_fn=umask)
        mode = stat.S_IMODE((tmp_path / output).stat().st_mode)
        if again.status == 0 and mode != 0o644:
            found.append(("MODE", f"--force turned {output}'s mode 0o644 into {mode:#o}"))
    raise_problems(Shell(argv, before="umask 022;"), result, found)


# ---------------------------------------------------------------------------------------------
# Pinned cases: one per limit the issue names, run in every suite run (the generated tests
# above may or may not draw them)


def _known(name, argv, files=None, **fields):
    return pytest.param(Case(f"known/{name}", argv, files or {}, **fields), id=name)


KNOWN_CASES = [
    _known("train step-size 1e308", ["train", "synthetic:3:10", "--backend=golden", "--epochs=1",
                                     "--step-size=1e308"]),
    _known("train l1 1e308", ["train", "synthetic:3:10", "--backend=golden", "--epochs=1",
                              "--l1=1e308"]),
    _known("train model-format 32,-1", ["train", "synthetic:3:10", "--backend=golden",
                                        "--epochs=1", "--model-format=32,-1"],
           invalid=("model FL -1 is outside 1..31",)),
    _known("train model-format 64,70", ["train", "synthetic:3:10", "--backend=float",
                                        "--epochs=1", "--model-format=64,70"],
           invalid=("model WL 64 is outside 2..32",)),
    _known("train grad-format a,b", ["train", "synthetic:3:10", "--epochs=1",
                                     "--grad-format=a,b"], invalid=("not WL,FL",)),
    _known("train float NaN loss", ["train", "synthetic:3:10", "--backend=float", "--epochs=2",
                                    "--step-size=1e300", "--report", "report.json"],
           outputs=("report.json",), expect_files=("report.json",)),
    _known("train label 1.5e154", ["train", "big.csv", "--backend=golden", "--epochs=1"],
           {"big.csv": b"1.5e154,1\n-1.4e154,0.5\n1e154,-1\n"}),
    _known("train float label 1e200", ["train", "data.csv", "--backend=float", "--epochs=1"],
           {"data.csv": b"1e200,1\n-1e200,2\n3,0.5\n"}),
    _known("train report=plot", ["train", "synthetic:3:10", "--backend=float", "--epochs=1",
                                 "--report", "x.out", "--plot", "x.out", "--force"],
           outputs=("x.out",), invalid=("--report and --plot name one file",),
           output_problem=True, force=True),
    _known("train report into a missing folder", ["train", "synthetic:3:10", "--backend=float",
                                                  "--epochs=1", "--report", "no/r.json"],
           invalid=("the report's folder does not exist",), output_problem=True),
    _known("perf target step-size 1e308", ["perf", "synthetic:3:20", "--target", "--bits", "1",
                                           "--epochs=1", "--cpu-repeats=1",
                                           "--step-size=1e308"]),
    _known("study convergence epochs 0", ["study", "convergence", "--datasets", "synthetic:3:20",
                                          "--bits", "1", "--epochs=0", "--out", "results"],
           outputs=("results",), invalid=("epochs must be >= 1",)),
    _known("study bad dataset", ["study", "convergence", "--datasets", "nosuch.csv", "--bits",
                                 "1", "--epochs=1", "--out", "results"], outputs=("results",),
           invalid=("no such data set",)),
    _known("quantize epoch range wraps u32", ["quantize", "synthetic:3:10", "-o", "out.zsgd",
                                              "--epoch-first=4294967295", "--epochs=2"],
           outputs=("out.zsgd",), invalid=("epoch_first + epochs must fit u32",)),
    _known("inspect header epoch range wraps u32", ["inspect", "f.zsgd"],
           {"f.zsgd": Zsgd("synthetic:6:20:3 --epochs=2", fields=(("epoch_first", 0xFFFFFFFF),))},
           invalid=("epochs 4294967295 and 4294967296: the range wraps u32",)),
    _known("inspect intercept flag contradicting the scales", ["inspect", "f.zsgd"],
           {"f.zsgd": Zsgd(fields=(("flags", 1),))},
           invalid=("the intercept flag is set, the last scale entry is no intercept's",)),
    _known("quantize timedelta64 npy", ["quantize", "t.npy", "-o", "out.zsgd"],
           {"t.npy": b""}, outputs=("out.zsgd",), invalid=("timedelta64 is no number",)),
    _known("quantize -o a folder --force", ["quantize", "synthetic:3:10", "-o", "adir",
                                            "--force"], {"adir": FOLDER}, outputs=("adir",),
           invalid=("a folder is no output file",), output_problem=True, force=True),
    _known("quantize -o a 300-character name", ["quantize", "synthetic:3:10", "-o",
                                                "L" * 295 + ".zsgd"],
           invalid=("the name is too long",), output_problem=True),
    _known("quantize full disk", ["quantize", "synthetic:8:200", "-o", "out.zsgd"],
           outputs=("out.zsgd",), invalid=("the disk is full",), fsize_limit=512),
    _known("perf --json unwritable filesystem", ["perf", "synthetic:4:20", "--json",
                                                 "/proc/self/p.json"],
           invalid=("/proc/self is not writable",), output_problem=True),
    _known("export-verilog existing files", ["export-verilog", "-o", "ev", *EXPORT_SMALL],
           {"ev/zipsgd_engine.v": b"// sentinel: must survive\n"}, outputs=("ev",),
           invalid=("the folder's files exist and --force is absent",)),
]


@pytest.mark.parametrize("case", KNOWN_CASES)
def test_known_case(case):
    if case.files.get("t.npy") == b"":
        buffer = io.BytesIO()
        np.save(buffer, np.arange(6, dtype="timedelta64[s]").reshape(3, 2))
        case = dataclasses.replace(case, files={"t.npy": buffer.getvalue()})
    execute(case)
