"""Profile sets: a directory of profiles, one per node class, and the choice of the one for this node.

A fleet serves nodes of a few shapes from one directory (a deployment repo's folder, a Kubernetes
ConfigMap mounted at ``/profiles``). The member used is the one whose ``node.fingerprint`` equals
this node's; no member or more than one is a fallback to NCCL with the reason, never a guess.

Cheap to ask per call: members are the directory's ``*.yaml`` / ``*.yml`` files (names starting
with ``.`` are skipped: a ConfigMap mount keeps its internals in ``..data``). An answer is kept
while the directory's own ``stat`` (device, inode, mtime, ctime) and the chosen member's are
unchanged, so a repeated call costs two ``stat`` calls. Adding, removing, renaming or atomically
replacing a member changes the directory's mtime (``dump_profile`` and Kubernetes' ConfigMap
updates replace files that way); an in-place rewrite of a member other than the chosen one is seen
when the directory next changes. Re-indexing lists the directory and reads each member's
fingerprint once per (device, inode, size, mtime, ctime): its ``node.fingerprint`` field as the
YAML parser reads it (its events up to that field; within the reader's size cap), so the index and
``validate DIR`` read the same field. That index is only a pointer: the chosen member is then loaded and verified in full
(schema, digest) like a single profile file, and its verified fingerprint must be the one asked for.

Standard library and PyYAML only, like the reader (DESIGN.md principle 6).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from topo_gate.profile.errors import ProfileError
from topo_gate.profile.given_fingerprint import given_text
from topo_gate.profile.io import ProfileFile

MEMBER_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class SetChoice:
    """The member chosen for a fingerprint (``path``), or None and ``reason`` saying why not."""

    path: str | None
    reason: str


def is_profile_set(path: object) -> bool:
    """True when ``path`` names a directory (a profile set); False for anything else, never raises."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)  # type: ignore[arg-type]
    except (OSError, TypeError, ValueError):
        return False


def member_names(directory: str) -> list[str]:
    """The set's member file names, sorted. Raises ``OSError`` when the directory cannot be listed."""
    with os.scandir(directory) as entries:
        return sorted(
            entry.name
            for entry in entries
            if entry.name.endswith(MEMBER_SUFFIXES) and not entry.name.startswith(".")
        )


def choose_member(directory: str | os.PathLike[str], fingerprint: str | None) -> SetChoice:
    """The one member of the set at ``directory`` made for the node ``fingerprint`` (None or blank:
    unknown; blanks around it are dropped, ``given_fingerprint``).
    Never raises: every problem is a ``SetChoice`` without a path, and its ``reason`` says what."""
    try:
        return _INDEX.choose(os.fsdecode(directory), given_text(fingerprint))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # noqa: BLE001 -- a launcher must never crash on our account
        return SetChoice(None, f"profile set {directory}: cannot index it ({type(error).__name__}: {error})")


class _SetIndex:
    """Member fingerprints by path, each valid while the member's ``stat`` identity is unchanged."""

    def __init__(self) -> None:
        self._members: dict[str, tuple[tuple[int, ...], str | None]] = {}
        self._answers: dict[tuple[str, str], tuple[tuple[int, ...], tuple[int, ...] | None, SetChoice]] = {}

    def choose(self, directory: str, fingerprint: str | None) -> SetChoice:
        if fingerprint is None:
            return self._index(directory, fingerprint)
        try:
            folder = _identity(os.stat(directory))
        except OSError as error:
            return SetChoice(None, f"profile set {directory}: cannot list it: {error.strerror or error}")
        kept = self._answers.get((directory, fingerprint))
        if kept is not None and kept[0] == folder and kept[1] == _path_identity(kept[2].path):
            return kept[2]
        choice = self._index(directory, fingerprint)
        self._answers[(directory, fingerprint)] = (folder, _path_identity(choice.path), choice)
        return choice

    def _index(self, directory: str, fingerprint: str | None) -> SetChoice:
        if fingerprint is None:
            return SetChoice(
                None,
                f"profile set {directory}: this node's fingerprint is needed to choose a member "
                "(`topo-gate exec` reads it from the node; else pass --node-fingerprint, fingerprint= or "
                "TOPO_GATE_NODE_FINGERPRINT)",
            )
        try:
            names = member_names(directory)
        except OSError as error:
            return SetChoice(None, f"profile set {directory}: cannot list it: {error.strerror or error}")
        matches, unknown = [], []
        for name in names:
            member = self.fingerprint_of(os.path.join(directory, name))
            if member is None:
                unknown.append(name)
            elif member == fingerprint:
                matches.append(name)
        if len(matches) == 1:
            return SetChoice(os.path.join(directory, matches[0]), f"profile set {directory}: {matches[0]}")
        if matches:
            return SetChoice(
                None,
                f"profile set {directory}: {len(matches)} profiles are for this node "
                f"({', '.join(matches)}): ambiguous (`topo-gate validate {directory}` lists the set)",
            )
        unusable = f"; unusable members: {', '.join(unknown)}" if unknown else ""
        return SetChoice(
            None,
            f"profile set {directory}: none of its {len(names)} profiles is for this node "
            f"(fingerprint {fingerprint[:19]}...){unusable}",
        )

    def fingerprint_of(self, path: str) -> str | None:
        """The member's recorded fingerprint, or None when it cannot be read or is not a profile."""
        identity = _path_identity(path)
        if identity is None:
            return None
        cached = self._members.get(path)
        if cached is not None and cached[0] == identity:
            return cached[1]
        found = _read_fingerprint(path)
        self._members[path] = (identity, found)
        return found


def _identity(status: os.stat_result) -> tuple[int, ...]:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def _path_identity(path: str | None) -> tuple[int, ...] | None:
    if path is None:
        return None
    try:
        return _identity(os.stat(path))
    except OSError:
        return None


def _read_fingerprint(path: str) -> str | None:
    """The member's ``node.fingerprint`` field as the YAML parser reads it (within the reader's size
    cap), never text that only looks like it: a hand-written ``created`` holding ``node:\n
    fingerprint: <this node>`` made this node's lookups "ambiguous" while ``validate DIR``, which
    parses, said OK (``fingerprint_field``)."""
    from topo_gate.profile.fingerprint_field import fingerprint_field

    try:
        with ProfileFile(path) as member:
            text = member.read_text()
    except ProfileError:
        return None
    return fingerprint_field(text)


_INDEX = _SetIndex()
