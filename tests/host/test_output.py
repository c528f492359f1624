"""Publishing outputs (:mod:`zipsgd.host.output`): never a replacement without ``force``,
OS errors as one-line ``OutputError``s, the umask's permissions, no temporary left behind."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zipsgd.host.output import (
    TEMP_SUFFIX,
    atomic_folder,
    atomic_output,
    check_output,
    check_output_folder,
)
from zipsgd.spec.errors import OutputError, OutputExistsError


def _temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIX)]


def test_a_file_created_during_the_write_is_not_replaced(tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(OutputExistsError, match="created while this output was written"):
        with atomic_output(target) as file:
            file.write(b"mine")
            target.write_bytes(b"theirs")  # another process publishes first
    assert target.read_bytes() == b"theirs" and not _temporaries(tmp_path)


def test_force_replaces_and_publishes_whole(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(OutputExistsError, match="exists; pass --force"):
        atomic_output(target).__enter__()
    with atomic_output(target, force=True) as file:
        file.write(b"new")
        assert target.read_bytes() == b"old"  # nothing visible until the end
    assert target.read_bytes() == b"new" and not _temporaries(tmp_path)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_permissions_follow_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        for force in (False, True):
            with atomic_output(tmp_path / "out.bin", force=force) as file:
                file.write(b"x")
            assert (tmp_path / "out.bin").stat().st_mode & 0o777 == 0o666 & ~umask
    finally:
        os.umask(previous)


def test_os_errors_are_output_errors_naming_the_path(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "folder").mkdir()
    cases = {tmp_path / "missing" / "out.bin": "output folder does not exist",
             tmp_path / "file" / "out.bin": "expected a folder, found a file",
             tmp_path / "folder": "expected a file name, found a folder",
             tmp_path / ("x" * 300): "file name too long"}
    for path, reason in cases.items():
        with pytest.raises(OutputError, match=reason) as caught:
            check_output(path)
        assert "\n" not in str(caught.value)
    with pytest.raises(OutputError, match="expected a folder, found a file"):
        check_output_folder(tmp_path / "file", create=True)
    assert check_output_folder(tmp_path / "new" / "deeper", create=True).is_dir()


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    """``ulimit -f``: the write fails with EFBIG (Python ignores SIGXFSZ)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    result = subprocess.run([sys.executable, "-m", "zipsgd.cli", "quantize", "synthetic:32:400",
                             "-o", "out.zsgd"], cwd=tmp_path, capture_output=True, text=True,
                            preexec_fn=limit, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "out.zsgd: cannot write: file too large" in \
        result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _signal_mid_write(tmp_path, signum, samples):
    """Signal a quantize once its temporary exists; ``None`` if the write ended first (a busy
    machine can hold this process past the whole write), else (status, stderr)."""
    # (A pytest-xdist worker ignores SIGINT, and a child inherits that: restore the default,
    # as a shell's foreground command has it.)
    child = subprocess.Popen([sys.executable, "-m", "zipsgd.cli", "quantize",
                              f"synthetic:64:{samples}", "-o", "out.zsgd"], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not _temporaries(tmp_path):  # the second pass has begun writing
            assert child.poll() is None and time.monotonic() < deadline, "no temporary file"
            time.sleep(0.02)
        if child.poll() is not None:
            status = None
        else:
            child.send_signal(signum)
            status = child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    err = child.stderr.read()
    child.stderr.close()
    return None if status is None else (status, err)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_mid_write_removes_the_temporary(tmp_path, signum):
    for attempt in range(3):
        outcome = _signal_mid_write(tmp_path, signum, 400000 << attempt)
        if outcome is not None:
            break
        (tmp_path / "out.zsgd").unlink()
    assert outcome is not None, "every write ended before its signal could be sent"
    status, err = outcome
    left = sorted(p.name for p in tmp_path.iterdir())
    assert (status, err.count("\n"), "Traceback" in err, left) == (128 + signum, 1, False, []), \
        err  # 128 + 2 = 130 for SIGINT, as for any interrupt


def test_a_folder_is_removed_on_an_interrupt_and_kept_on_a_listed_error(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        with atomic_folder(target, keep_on=(LookupError,)) as work:
            (work / "a").write_text("x")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyError):
        with atomic_folder(target, keep_on=(LookupError,)) as work:
            (work / "log").write_text("why it failed")
            raise KeyError("tool")
    assert not target.exists() and (work / "log").read_text() == "why it failed"


def test_a_folder_replaces_a_file_never(tmp_path):
    target = tmp_path / "out"
    target.write_text("keep me")
    for force in (False, True):
        with pytest.raises(OutputError, match="expected a folder, found a file"):
            with atomic_folder(target, force):
                pass
    assert target.read_text() == "keep me"
