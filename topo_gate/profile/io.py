"""Profile files: bounded reading, the digest check, and atomic writes of the canonical YAML."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from topo_gate._inputs import InputError, RegularFile
from topo_gate.profile.digest import DIGEST_KEY, compute_digest
from topo_gate.profile.errors import ProfileDigestMismatch, ProfileInvalid, ProfileUnreadable
from topo_gate.profile.schema import Profile
from topo_gate.profile.semantics import check_semantics
from topo_gate.profile.validate import expect_plain_data

MAX_PROFILE_BYTES = 16 * 1024 * 1024


class ProfileFile:
    """An open profile file (``_inputs.RegularFile``: regular files only, an open that never blocks).

    ``identity`` lets a cache tell an unchanged file from a replaced one without a race between
    checking and reading.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        try:
            self._file = RegularFile(path, "a profile file")
        except InputError as error:
            raise ProfileUnreadable(str(error)) from None
        self.identity = self._file.identity

    def read_text(self) -> str:
        """The text, refusing more than 16 MiB (read no further) and non-UTF-8 bytes."""
        try:
            return self._file.read_text(MAX_PROFILE_BYTES)
        except InputError as error:
            raise ProfileUnreadable(str(error)) from None

    def read_head(self, size: int) -> bytes:
        """At most the first ``size`` bytes, undecoded (a profile set's index reads only these)."""
        try:
            return self._file.read_head(size)
        except InputError as error:
            raise ProfileUnreadable(str(error)) from None

    def __enter__(self) -> ProfileFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._file.__exit__(*exc_info)


def profile_from_text(text: str, *, verify_digest: bool = True) -> Profile:
    """Parse, check the schema, then the digest over the document's own content."""
    from topo_gate.profile.yaml_format import parse_yaml  # here: a caller that reads no profile skips PyYAML

    data = parse_yaml(text)
    profile = Profile.from_dict(data)
    # Unknown (newer-minor) keys are ignored, but the digest hashes them: they must be JSON data too.
    expect_plain_data(data, "")
    if verify_digest:
        _verify_digest(data)
    # After the digest: a tampered file is reported as tampered, whatever the edit says.
    check_semantics(profile)
    return profile


#: What a digest mismatch advises; ``validate`` names the file in it where the command it names would
#: not reseal that file (a set's member).
RESEAL_HINT = "re-seal a deliberate edit with `topo-gate validate --reseal`"


def _verify_digest(data: dict[str, Any]) -> None:
    recorded = data.get(DIGEST_KEY)
    if recorded is None:
        raise ProfileInvalid("missing (every profile is sealed with a digest of its content)", DIGEST_KEY)
    actual = compute_digest(data)
    if actual != recorded:
        raise ProfileDigestMismatch(
            f"the content hashes to {actual[:19]}..., not the recorded {recorded[:19]}...: "
            f"edited by hand or corrupted ({RESEAL_HINT})",
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
    from topo_gate.profile.yaml_format import to_yaml

    return to_yaml(profile.to_dict())


def dump_profile(profile: Profile, path: str | os.PathLike[str], *, mode: int | None = None) -> Path:
    """Seal ``profile`` with its digest and write it atomically (a reader never sees half a file);
    ``mode``: the file's permissions (default: what ``open()`` gives, ``write_atomic``).

    A profile the loader would refuse (``check_semantics``) is never written: ``ProfileInvalid``.
    """
    from topo_gate._atomic import write_atomic  # here: tempfile costs launchers 3 ms and they never write

    check_semantics(profile)

    return write_atomic(path, profile_to_yaml(profile.with_digest()), mode=mode)
