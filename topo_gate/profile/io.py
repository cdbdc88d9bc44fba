"""Profile files: bounded reading, the digest check, and atomic writes of the canonical YAML."""

from __future__ import annotations

import os
import stat

from topo_gate.profile.digest import DIGEST_KEY, compute_digest
from topo_gate.profile.errors import ProfileDigestMismatch, ProfileInvalid, ProfileUnreadable
from topo_gate.profile.schema import Profile
from topo_gate.profile.validate import expect_plain_data
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a launcher ~2 ms
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

MAX_PROFILE_BYTES = 16 * 1024 * 1024


class ProfileFile:
    """An open profile file, identified by ``fstat`` of the open handle.

    Only regular files are accepted, and the open never blocks: a FIFO or device path fails at once
    instead of hanging a launcher. ``identity`` lets a cache tell an unchanged file from a replaced one
    without a race between checking and reading.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            raise ProfileUnreadable("no such file") from None
        except OSError as error:
            raise ProfileUnreadable(f"cannot open: {error.strerror or error}") from None
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            kind = "a directory" if stat.S_ISDIR(status.st_mode) else "not a regular file"
            raise ProfileUnreadable(f"is {kind}, not a profile file")
        self._handle = os.fdopen(fd, "rb")
        self.identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)

    def read_text(self) -> str:
        """The text, refusing more than 16 MiB (read no further) and non-UTF-8 bytes."""
        try:
            payload = self._handle.read(MAX_PROFILE_BYTES + 1)
        except OSError as error:
            raise ProfileUnreadable(f"cannot read: {error.strerror or error}") from None
        if len(payload) > MAX_PROFILE_BYTES:
            raise ProfileUnreadable(f"larger than {MAX_PROFILE_BYTES // (1024 * 1024)} MiB; not a profile")
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ProfileUnreadable(f"not UTF-8 text (byte {error.start}: {error.reason})") from None

    def read_head(self, size: int) -> bytes:
        """At most the first ``size`` bytes, undecoded (a profile set's index reads only these)."""
        try:
            return self._handle.read(size)
        except OSError as error:
            raise ProfileUnreadable(f"cannot read: {error.strerror or error}") from None

    def __enter__(self) -> ProfileFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._handle.close()


def profile_from_text(text: str, *, verify_digest: bool = True) -> Profile:
    """Parse, check the schema, then the digest over the document's own content."""
    data = parse_yaml(text)
    profile = Profile.from_dict(data)
    # Unknown (newer-minor) keys are ignored, but the digest hashes them: they must be JSON data too.
    expect_plain_data(data, "")
    if verify_digest:
        _verify_digest(data)
    return profile


def _verify_digest(data: dict[str, Any]) -> None:
    recorded = data.get(DIGEST_KEY)
    if recorded is None:
        raise ProfileInvalid("missing (every profile is sealed with a digest of its content)", DIGEST_KEY)
    actual = compute_digest(data)
    if actual != recorded:
        raise ProfileDigestMismatch(
            f"the content hashes to {actual[:19]}..., not the recorded {recorded[:19]}...: "
            "edited by hand or corrupted (re-seal a deliberate edit with `topo-gate validate --reseal`)",
            DIGEST_KEY,
        )


def load_profile(path: str | os.PathLike[str], *, verify_digest: bool = True) -> Profile:
    """The strict loader: a valid, untampered ``Profile``, or a ``ProfileError`` saying what and where.

    ``ProfileUnreadable`` (missing, directory, > 16 MiB, not UTF-8, YAML syntax), ``ProfileInvalid``
    (message starts with the field path), ``ProfileSchemaTooNew``, ``ProfileDigestMismatch``.
    """
    with ProfileFile(path) as profile_file:
        text = profile_file.read_text()
    return profile_from_text(text, verify_digest=verify_digest)


def profile_to_yaml(profile: Profile) -> str:
    """The canonical YAML text of ``profile`` (fields in schema order), as written by ``dump_profile``."""
    return to_yaml(profile.to_dict())


def dump_profile(profile: Profile, path: str | os.PathLike[str]) -> Path:
    """Seal ``profile`` with its digest and write it atomically (a reader never sees half a file)."""
    from topo_gate._atomic import write_atomic  # here: tempfile costs launchers 3 ms and they never write

    return write_atomic(path, profile_to_yaml(profile.with_digest()))
