"""The one writer of output files: atomic (a reader never sees a partial profile, evidence or capture
file) and guarded (it replaces only a regular file, and says in one line why it could not write)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

_WHY = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for this system's limits",
    errno.ENOTDIR: "a component of the path is not a folder",
}


class OutputRefused(Exception):
    """An output that was not written; the message is one line naming the path and why."""


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """``path`` if writing there would create a file or replace a regular one; else ``OutputRefused``.

    An output never replaces a device, FIFO, socket or folder: ``--out /dev/null`` run as root would
    otherwise swap the system's null device for a regular file.
    """
    target = Path(path)
    try:
        status = os.stat(target)
    except FileNotFoundError:
        parent = target.parent
        if not parent.is_dir():
            raise OutputRefused(f"{target}: cannot write: folder {parent} does not exist") from None
        return target
    except OSError as error:
        raise OutputRefused(f"{target}: cannot write: {_why(error)}") from None
    if not stat.S_ISREG(status.st_mode):
        kind = "a folder" if stat.S_ISDIR(status.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise OutputRefused(f"{target}: refusing to write: it is {kind}")
    return target


#: A command's file and what it is to the command: ("--out", path), ("EVIDENCE", path); None: not given.
Labelled = tuple[str, "str | os.PathLike[str] | None"]


def refuse_clobbering(outputs: Iterable[Labelled], inputs: Iterable[Labelled] = ()) -> None:
    """The guard every command that writes calls before it writes: ``OutputRefused`` (exit 8), naming
    both paths, when an output is the same file as an input (``decide E --out E`` would replace the
    evidence -- raw samples of hours of GPU time -- with a profile) or as another output (``probe --out
    X --evidence X``: the profile would replace the evidence it was just derived from).

    Files are compared as the file system sees them, not by name: ``os.stat``'s device and inode
    (a hard link, a symlink, ``./a/../E`` are all the same file), and for an output that does not
    exist yet, the folder it would be created in (by inode: a symlinked folder included) and its name.
    """
    known: dict[tuple[int, int, str], tuple[str, str, bool]] = {}
    for label, path in inputs:
        identity = None if path is None else _identity(path)
        if path is not None and identity is not None:
            known.setdefault(identity, (label, os.fspath(path), True))
    for label, path in outputs:
        identity = None if path is None else _identity(path)
        if path is None or identity is None:
            continue
        shown_path = os.fspath(path)
        if identity in known:
            other_label, other, is_input = known[identity]
            if is_input:
                raise OutputRefused(
                    f"{shown_path} ({label}) is the input {other} ({other_label}): writing it would destroy "
                    f"that input; choose another {label}"
                )
            raise OutputRefused(
                f"{shown_path} ({label}) and {other} ({other_label}) are the same file: one output would "
                "replace the other; give them different paths"
            )
        known[identity] = (label, shown_path, False)


def _identity(path: str | os.PathLike[str]) -> tuple[int, int, str] | None:
    """(device, inode, "") of an existing file; (device, inode, name) of the folder a new one would be
    created in; None when neither can be read (the write itself then says why)."""
    try:
        status = os.stat(path)
        return status.st_dev, status.st_ino, ""
    except FileNotFoundError:
        pass
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    target = Path(path)
    try:
        folder = os.stat(target.parent)
    except (OSError, ValueError):
        return None
    return folder.st_dev, folder.st_ino, target.name


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through a temp file in the same folder and an atomic rename.

    The file gets ``mode`` (a file rewritten in place keeps its own: ``validate --reseal``), by default
    the mode an ordinary ``open()`` gives (0666 minus the umask), whatever a replaced file had.

    The temp file lives beside the target so the rename never crosses a filesystem; it is fsynced
    before the rename so a crash leaves either the old file or the new one, never a torn one.
    ``OutputRefused`` (one line) when ``path`` is not a regular file or a new path, or the write fails
    (read-only folder, missing folder, full disk); nothing is left behind then.
    """
    target = check_output_path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as error:
        raise OutputRefused(f"{target}: cannot write: {_why(error)}") from None
    try:
        # mkstemp creates 0600; a profile is meant to be committed and read by a launcher running as
        # another user, so give it the mode an ordinary open() would have (0666 minus the umask).
        os.fchmod(fd, 0o666 & ~_current_umask() if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as error:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(error, OSError):
            raise OutputRefused(f"{target}: cannot write: {_why(error)}") from None
        raise
    return target


def _why(error: OSError) -> str:
    return _WHY.get(error.errno or 0) or error.strerror or str(error)


def _current_umask() -> int:
    # os.umask is the only way to read it; setting it back at once keeps the process's umask unchanged.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def exclusive_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the right to write ``path``: ``OutputRefused`` at once if another process holds it.

    Two probes writing the same ``--out`` would otherwise each replace the other's profile. The lock
    is an ``flock`` on ``.<name>.lock`` beside ``path``, removed on release; the inode check after
    locking catches a lock file removed (and so released) between our open and our lock.
    """
    import fcntl  # here: POSIX only, and only writers of long-running outputs need it

    target = check_output_path(path)
    lock_path = target.parent / f".{target.name}.lock"
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as error:
            raise OutputRefused(f"{target}: cannot write: {_why(error)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputRefused(
                f"{target}: another topo-gate process is writing it (lock {lock_path}); "
                "wait for it to finish or choose another --out"
            ) from None
        try:
            same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield target
    finally:
        try:
            os.unlink(lock_path)
        except FileNotFoundError:
            pass
        os.close(fd)


def new_unique_path(folder: Path, prefix: str, suffix: str) -> Path:
    """A path in ``folder`` that did not exist and now does (an empty file reserved for the caller):
    ``<prefix><UTC time to the microsecond>-<pid><suffix>``, created exclusively, so two processes
    never pick the same name even within one second."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    for attempt in range(100):
        extra = f"-{attempt}" if attempt else ""
        candidate = folder / f"{prefix}{stamp}-{os.getpid()}{extra}{suffix}"
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        except OSError as error:
            raise OutputRefused(f"{candidate}: cannot write: {_why(error)}") from None
        return candidate
    raise OutputRefused(f"{folder}: cannot find a free name for {prefix}...{suffix}")
