"""Atomic file writes: a reader never sees a partial profile, evidence or capture file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temp file in the same folder and an atomic rename.

    The temp file lives beside the target so the rename never crosses a filesystem; it is fsynced
    before the rename so a crash leaves either the old file or the new one, never a torn one.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        # mkstemp creates 0600; a profile is meant to be committed and read by a launcher running as
        # another user, so give it the mode an ordinary open() would have (0666 minus the umask).
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target


def _current_umask() -> int:
    # os.umask is the only way to read it; setting it back at once keeps the process's umask unchanged.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
