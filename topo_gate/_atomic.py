"""The one writer of output files: atomic (a reader never sees a partial profile, evidence or capture
file) and guarded (it replaces only a regular file, and says in one line why it could not write)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
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


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temp file in the same folder and an atomic rename.

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
        os.fchmod(fd, 0o666 & ~_current_umask())
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
