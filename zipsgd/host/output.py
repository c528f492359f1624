"""Publishing outputs: written to a temporary file beside the target, published atomically,
and never put in place of an existing file without ``force`` -- even when another process
creates the target while the output is being written.

Every problem raises :class:`~zipsgd.spec.errors.OutputError` (a missing or unwritable folder,
a full disk, a name too long, a folder in the target's place) or its subclass
:class:`~zipsgd.spec.errors.OutputExistsError`, with one line naming the path and the reason.

Temporary files are named ``.<target>.<pid>.zipsgd-tmp``; one whose process no longer runs is
left over from a run that was killed (SIGKILL), and the next output to the same folder removes
it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import threading
from pathlib import Path

from ..spec.errors import OutputError, OutputExistsError

__all__ = ["atomic_folder", "atomic_output", "check_output", "check_output_folder",
           "TEMP_SUFFIX", "stale_temporaries"]

TEMP_SUFFIX = ".zipsgd-tmp"
_UMASK_LOCK = threading.Lock()
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


def _reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


def _umask() -> int:
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def check_output_folder(folder, *, create: bool = False) -> Path:
    """Check that ``folder`` is (or, with ``create``, can become) a writable folder; returns it.

    Raises
    ------
    OutputError
        If it is a file, does not exist (and ``create`` is false), cannot be made, or is not
        writable.
    """
    folder = Path(folder) if str(folder) else Path(".")
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder}: expected a folder, found a file")
    if not folder.exists():
        if not create:
            raise OutputError(f"{folder}: output folder does not exist")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(f"{folder}: cannot make the output folder: {_reason(error)}") \
                from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{folder}: output folder is not writable")
    return folder


def check_output(path, force: bool = False) -> Path:
    """Check, before any work, that ``path`` can be published: its folder exists and is
    writable, its name fits, it is not a folder, and it does not exist unless ``force``.

    Raises
    ------
    OutputError, OutputExistsError
    """
    path = Path(path)
    folder = check_output_folder(path.parent)
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(path.name)) + len(f"..{os.getpid()}{TEMP_SUFFIX}") > limit:
        raise OutputError(f"{path}: file name too long (at most "
                          f"{limit - len(f'..{os.getpid()}{TEMP_SUFFIX}')} bytes here)")
    if path.is_dir():
        raise OutputError(f"{path}: expected a file name, found a folder")
    if path.exists() and not force:
        raise OutputExistsError(f"{path} exists; pass --force to overwrite it")
    return path


def stale_temporaries(folder) -> list[Path]:
    """Temporary files in ``folder`` whose writing process no longer runs."""
    stale = []
    for entry in Path(folder).glob(f".*{TEMP_SUFFIX}"):
        pid = entry.name[: -len(TEMP_SUFFIX)].rsplit(".", 1)[-1]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            stale.append(entry)
        except PermissionError:
            pass  # another user's process is running
    return stale


def _renameat2(source: Path, path: Path, flags: int) -> None:
    """Linux's ``renameat2(source, path, flags)``; EEXIST raises FileExistsError."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        raise OSError(errno.ENOSYS, "this C library has no renameat2", str(path))
    at_cwd = -100
    if libc.renameat2(at_cwd, os.fsencode(source), at_cwd, os.fsencode(path), flags) != 0:
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise FileExistsError(code, os.strerror(code), str(path))
        raise OSError(code, os.strerror(code), str(path))


def _rename_noreplace(source: Path, path: Path) -> None:
    """Rename ``source`` (a file or a folder) to ``path`` unless ``path`` exists
    (FileExistsError), atomically."""
    _renameat2(source, path, _RENAME_NOREPLACE)


def _publish_noreplace(tmp: Path, path: Path) -> None:
    """Move ``tmp`` to ``path`` unless ``path`` exists (FileExistsError), atomically."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        _rename_noreplace(tmp, path)
        return
    os.unlink(tmp)


def _check_folder_target(path: Path, force: bool) -> None:
    """Check that the folder ``path`` can be published (its parent is made if missing)."""
    check_output_folder(path.parent, create=True)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: expected a folder, found a file")
    if path.exists() and not force:
        raise OutputExistsError(f"{path} exists; pass --force to replace it")


class atomic_folder:
    """Context manager: a new temporary folder beside ``path`` (its path is the value),
    published as ``path`` whole on success.

    Without ``force`` an existing ``path`` is never replaced, also when it appears while the
    folder is being filled; with ``force`` the old folder is replaced whole, and removed once
    the new one is in place.  On an exception the temporary folder is removed and ``path`` is
    left as it was -- except for an exception of a type in ``keep_on`` (a failed build, whose
    logs are to be read), after which the temporary folder stays where it is (``self.tmp``).
    A folder that cannot be published stays there too, and the error names it.

    Raises
    ------
    OutputError, OutputExistsError
    """

    def __init__(self, path, force: bool = False, keep_on: tuple = ()):
        self.path = Path(path)
        self.force = force
        self.keep_on = keep_on

    def __enter__(self) -> Path:
        _check_folder_target(self.path, self.force)
        self.tmp = self.path.parent / f".{self.path.name}.{os.getpid()}{TEMP_SUFFIX}"
        if self.tmp.exists():
            shutil.rmtree(self.tmp)  # this process's own, from an earlier failed build
        try:
            self.tmp.mkdir()
        except OSError as error:
            raise OutputError(f"{self.path}: cannot write: {_reason(error)}") from None
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            if not issubclass(exc_type, self.keep_on):
                shutil.rmtree(self.tmp, ignore_errors=True)
            return False
        try:
            try:
                _rename_noreplace(self.tmp, self.path)
            except FileExistsError:
                if not self.force:
                    raise
                # (Swapped in one step, so ``path`` is never missing; the old one is then removed.)
                _renameat2(self.tmp, self.path, _RENAME_EXCHANGE)
        except FileExistsError:
            raise OutputExistsError(f"{self.path} was created while this output was written "
                                    f"(kept in {self.tmp}); pass --force to replace it") from None
        except OSError as error:
            raise OutputError(f"{self.path}: cannot publish: {_reason(error)} (kept in "
                              f"{self.tmp})") from None
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False


class atomic_output:
    """Context manager: a temporary file next to ``path``, published onto it on success.

    Without ``force`` an existing ``path`` is never replaced, also when it appears while the
    output is being written.  On an exception (an interrupt too) the temporary file is removed
    and ``path`` is left as it was.  The file gets the permissions the umask gives.

    Raises
    ------
    OutputError, OutputExistsError
    """

    def __init__(self, path, force: bool = False, mode: str = "wb"):
        self.path = Path(path)
        self.force = force
        self.mode = mode

    def __enter__(self):
        check_output(self.path, self.force)
        folder = self.path.parent if str(self.path.parent) else Path(".")
        for stale in stale_temporaries(folder):
            with contextlib.suppress(OSError):
                stale.unlink()
        self.tmp = folder / f".{self.path.name}.{os.getpid()}{TEMP_SUFFIX}"
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~_umask())
        except OSError as error:
            raise OutputError(f"{self.path}: cannot write: {_reason(error)}") from None
        self.file = os.fdopen(fd, self.mode)
        return self.file

    def __exit__(self, exc_type, exc, tb):
        try:
            try:
                if exc_type is None:
                    self.file.flush()
                    os.fsync(self.file.fileno())
            finally:
                self.file.close()
            if exc_type is None:
                if self.force:
                    os.replace(self.tmp, self.path)
                else:
                    _publish_noreplace(self.tmp, self.path)
        except FileExistsError:
            raise OutputExistsError(f"{self.path} was created while this output was written; "
                                    "pass --force to overwrite it") from None
        except OSError as error:
            raise OutputError(f"{self.path}: cannot write: {_reason(error)}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
        if isinstance(exc, OSError) and exc.filename in (None, str(self.tmp)):
            raise OutputError(f"{self.path}: cannot write: {_reason(exc)}") from None
        return False
