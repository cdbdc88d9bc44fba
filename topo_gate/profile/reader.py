"""The launcher reader: ``gate()`` answers "which all-reduce backend here?" and never raises.

Fail closed. A backend other than NCCL is returned only when the profile is present, parses, passes
the schema and digest checks, belongs to this node (fingerprint), and has a rule for this TP size,
pattern, GPU-group class and message size. Every other case -- including a bug in this module -- is
NCCL with a ``reason`` a person can act on. Admission (may this profile decide here?) is settled
before preference (which rule wins at this size?), and preference is only ever what was measured.

``admit()`` is the admission alone, for a caller that asks about several patterns and sizes of one
TP group (the launcher planners): the profile is read and verified once, and each
``Admission.decide()`` answers as ``gate()`` would from the admitted profile.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from topo_gate._units import speedup_ci_text
from topo_gate.profile.digest import compute_digest
from topo_gate.profile.drift import software_drift
from topo_gate.profile.errors import ProfileError
from topo_gate.profile.given_fingerprint import (
    FINGERPRINT_ENV as FINGERPRINT_ENV,
)  # re-exported: callers read it here
from topo_gate.profile.given_fingerprint import difference, env_fingerprint, given_text
from topo_gate.profile.io import ProfileFile, profile_from_text
from topo_gate.profile.profile_set import choose_member, is_profile_set
from topo_gate.profile.schema import NCCL, PATTERNS, PLAIN_PATTERN, Profile, Rule
from topo_gate.profile.semantics import check_semantics

ProfileSource = str | os.PathLike[str] | Profile

_UNVERIFIED = (
    "node not verified against the profile's fingerprint (use `topo-gate exec`, pass fingerprint= or "
    f"set {FINGERPRINT_ENV}; a caller planning for the profile's node class passes "
    "trust_unverified_node=True)"
)
#: Every plan from a synthetic profile carries this note, and every command that plans prints it on
#: stderr: its numbers come from a latency model, so a plan from it is a showcase, not advice.
SYNTHETIC_PROFILE = "SYNTHETIC profile: made-up numbers, not measured on any node; do not deploy this plan"


@dataclass(frozen=True)
class Decision:
    """The reader's answer for one (TP size, pattern, GPU group, message size).

    ``backend`` is ``"nccl"`` on every fallback. ``rules`` is the whole measured ladder for the
    group's class (empty on fallback), so a launcher can turn it into a size threshold;
    the chosen rule covers sizes in ``(min_bytes, max_bytes]`` (``max_bytes=None``: unbounded).
    """

    backend: str
    max_bytes: int | None
    reason: str
    warnings: tuple[str, ...] = ()
    min_bytes: int = 0
    rules: tuple[Rule, ...] = ()
    tp: int | None = None
    pattern: str | None = None
    group_class: str | None = None
    profile_path: str | None = None
    source: str = "fallback"  # "profile": a measured rule decided; "fallback": NCCL because of a problem

    @property
    def fallback(self) -> bool:
        """True when this is NCCL because the profile could not decide, not because NCCL won."""
        return self.source == "fallback"


@dataclass(frozen=True)
class Admission:
    """A profile read once for one TP group: admitted to decide on this node, or why not.

    ``profile`` is the loaded profile, its digest and semantics checked, that belongs to this node;
    None when it is refused, and then ``reason`` says why, in the words of ``gate()`` (empty when
    admitted). ``warnings`` are what admitting it noted (a node trusted unverified, software drift).
    ``group_class`` is the class of the TP group in the profile; ``profile_path`` the file admitted
    (a set's member). ``given_path`` is the path as the caller gave it (a set's directory; None for a
    ``Profile``), which a refusal names, as ``gate()``'s does.
    """

    tp: int | None
    reason: str
    warnings: tuple[str, ...] = ()
    profile: Profile | None = None
    group_class: str | None = None
    profile_path: str | None = None
    given_path: str | None = None

    def decide(self, pattern: str = PLAIN_PATTERN, nbytes: int | None = None) -> Decision:
        """``gate()``'s answer for ``pattern`` at ``nbytes`` on this TP group, from the admitted profile
        with nothing read or verified again; a refused admission answers its reason. Never raises."""
        try:
            nbytes, pattern = _checked_request(nbytes, pattern)
            return _decision(self, nbytes, pattern)
        except _Fallback as stop:
            return _nccl(str(stop), self.warnings, self.tp, pattern, self.given_path)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as error:  # noqa: BLE001 -- the launcher must never crash on our account
            return _nccl(_failed(error), self.warnings, self.tp, pattern, self.given_path)


class _Fallback(Exception):
    """Internal: stop and answer NCCL with this reason."""


#: No node has more GPUs than this (the largest NVLink domains have hundreds): a TP size above it is a
#: caller's mistake, answered NCCL before anything of its size is allocated.
MAX_TP = 1 << 16


def _int_text(value: int) -> str:
    # str() of an integer with thousands of digits raises ValueError; its size is what matters.
    return str(value) if value.bit_length() <= 64 else f"of {value.bit_length()} bits"


def gate(
    profile: ProfileSource,
    *,
    tp: int,
    nbytes: int | None = None,
    pattern: str = PLAIN_PATTERN,
    gpus: Sequence[int] | None = None,
    strict: bool = False,
    fingerprint: str | None = None,
    trust_unverified_node: bool = False,
) -> Decision:
    """Which all-reduce backend to use; NCCL unless the profile measured something faster here.

    ``profile``: a path, a ``Profile``, or a directory of profiles (a set: the one member whose
    fingerprint is this node's decides; none or several is NCCL). ``nbytes=None`` asks for the smallest messages (decode).
    ``gpus=None`` means the launcher's default group ``[0, ..., tp-1]``. ``fingerprint`` is this
    node's (default: env ``TOPO_GATE_NODE_FINGERPRINT``, set by ``topo-gate exec``); it must equal
    the profile's. Without one the node is not verified and the answer is NCCL, reason "node not
    verified ...", unless ``trust_unverified_node=True`` (for a caller that plans for the profile's
    node class rather than for this node): then the profile decides, with a warning, except under
    ``strict=True``. Software drift (driver, NCCL, torch, FlashInfer) is a warning, NCCL under
    ``strict``. Never raises.
    """
    path: str | None = None
    warnings: list[str] = []
    try:
        path = None if isinstance(profile, Profile) else _path_text(profile)
        # Every argument first, each in bounded time and memory: nothing is read for a call that can
        # only be answered NCCL, and no TP size or GPU list is materialised before it is plausible.
        checked_tp = _checked_tp(tp)
        nbytes, pattern = _checked_request(nbytes, pattern)
        admission = _admit(
            profile, path, checked_tp, gpus, strict, fingerprint, trust_unverified_node, warnings
        )
        return _decision(admission, nbytes, pattern)
    except _Fallback as stop:
        return _nccl(str(stop), warnings, tp, pattern, path)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as error:  # noqa: BLE001 -- the launcher must never crash on our account
        return _nccl(_failed(error), warnings, tp, pattern, path)


def admit(
    profile: ProfileSource,
    *,
    tp: int,
    gpus: Sequence[int] | None = None,
    strict: bool = False,
    fingerprint: str | None = None,
    trust_unverified_node: bool = False,
) -> Admission:
    """``profile`` read once for the TP group ``gpus`` of size ``tp``: loaded (a path, a ``Profile``,
    or a set's member for this node), its digest and semantics checked, its node checked against
    this one, and the group's class found in it; ``Admission.decide()`` then answers per pattern and
    size. The arguments mean what they mean to ``gate()``, and a refusal's reason is its. Never raises.
    """
    path: str | None = None
    warnings: list[str] = []
    try:
        path = None if isinstance(profile, Profile) else _path_text(profile)
        return _admit(
            profile, path, _checked_tp(tp), gpus, strict, fingerprint, trust_unverified_node, warnings
        )
    except _Fallback as stop:
        reason = str(stop)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as error:  # noqa: BLE001 -- the launcher must never crash on our account
        reason = _failed(error)
    return Admission(tp if isinstance(tp, int) else None, reason, tuple(warnings), given_path=path)


def _admit(
    source: ProfileSource,
    path: str | None,
    tp: int,
    gpus: Sequence[int] | None,
    strict: bool,
    fingerprint: str | None,
    trust_unverified_node: bool,
    warnings: list[str],
) -> Admission:
    """The admitted profile for ``tp`` on ``gpus``, or ``_Fallback``; ``warnings`` takes what
    admitting it notes as it goes (a later refusal still carries them)."""
    group = list(range(tp)) if gpus is None else _checked_gpus(gpus, tp)
    given = path
    if path is not None and "\x00" in path:
        raise _Fallback(f"the profile path {path!r} holds a NUL character: no file has that name")
    if path is not None and is_profile_set(path):
        path = _set_member(path, fingerprint)
    profile = _admitted_profile(source, path)
    if profile.node.provenance.get("synthetic") is True:
        warnings.append(SYNTHETIC_PROFILE)
    _check_node(profile, strict, fingerprint, trust_unverified_node, warnings)
    group_class = _group_class(profile, tp, group)
    return Admission(tp, "", tuple(warnings), profile, group_class, path, given)


def _decision(admission: Admission, nbytes: int | None, pattern: str) -> Decision:
    """The admitted profile's rule for ``pattern`` at ``nbytes``, or ``_Fallback``."""
    profile, tp, group_class = admission.profile, admission.tp, admission.group_class
    if profile is None or tp is None or group_class is None:  # refused: the three come together
        raise _Fallback(admission.reason)
    entry = profile.find(tp, pattern, group_class)
    if entry is None:
        raise _Fallback(
            f"the profile has no decision for TP {tp}, {pattern}, group class {group_class} (not measured)"
        )
    min_bytes, rule = entry.rule_for(nbytes)
    return Decision(
        backend=rule.backend,
        max_bytes=rule.max_bytes,
        min_bytes=min_bytes,
        reason=rule.reason or _rule_words(rule),
        warnings=admission.warnings,
        rules=entry.rules,
        tp=tp,
        pattern=pattern,
        group_class=group_class,
        profile_path=admission.profile_path,
        source="profile",
    )


def _checked_tp(tp: object) -> int:
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise _Fallback(f"tp must be a positive integer, got {tp!r}")
    if tp > MAX_TP:
        raise _Fallback(f"tp {_int_text(tp)} is larger than any node has GPUs (at most {MAX_TP} are read)")
    return tp


def _checked_request(nbytes: object, pattern: object) -> tuple[int | None, str]:
    if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0):
        raise _Fallback(f"nbytes must be None or an integer >= 0, got {nbytes!r}")
    if not isinstance(pattern, str) or pattern not in PATTERNS:
        raise _Fallback(f"unknown pattern {pattern!r} (known: {', '.join(PATTERNS)})")
    return nbytes, pattern


def _checked_gpus(gpus: Sequence[int], tp: int) -> list[int]:
    if isinstance(gpus, (str, bytes)) or not isinstance(gpus, Iterable):
        raise _Fallback(f"gpus must be a list of GPU indices, got {gpus!r}")
    group = list(itertools.islice(gpus, tp + 1))  # one more than a TP group has: too long, and no more
    indices_ok = all(isinstance(gpu, int) and not isinstance(gpu, bool) and gpu >= 0 for gpu in group)
    if not indices_ok or len(group) != tp or len(set(group)) != tp:
        shown = group if len(group) <= tp else f"more than {tp}"
        raise _Fallback(f"gpus must list {tp} distinct GPU indices for TP {tp}, got {shown}")
    return group


def _admitted_profile(source: ProfileSource, path: str | None) -> Profile:
    if path is None:
        assert isinstance(source, Profile)
        data = source.to_dict()
        if source.digest != compute_digest(data):
            raise _Fallback(
                "profile object: digest: missing or does not match its content "
                "(seal it with Profile.with_digest(), or pass the file's path)"
            )
        try:
            # Built again from its own content: the parts a Profile holds as plain data
            # (``node.hardware``) can change after it was built, and a sealed object is checked as
            # strictly as the file it could have been (a GPU list of 7 broke the planners).
            admitted = Profile.from_dict(data)
            check_semantics(admitted)
        except ProfileError as error:
            raise _Fallback(f"profile object unusable: {error}") from None
        return admitted
    try:
        return _CACHE.load(path)
    except ProfileError as error:
        raise _Fallback(f"profile {path} unusable: {error}") from None


def _set_member(directory: str, fingerprint: str | None) -> str:
    """The set's one member for this node (``Decision.profile_path`` names it); loading verifies it
    in full and ``_check_node`` its fingerprint again, so the set's index is only ever a pointer."""
    chosen = choose_member(directory, _given(fingerprint))
    if chosen.path is None:
        raise _Fallback(chosen.reason)
    return chosen.path


def _check_node(
    profile: Profile, strict: bool, fingerprint: str | None, trusted: bool, warnings: list[str]
) -> None:
    here = _given(fingerprint)
    if here is None:
        if not trusted:
            raise _Fallback(_UNVERIFIED)
        warnings.append(_UNVERIFIED)
        if strict:
            raise _Fallback(f"strict: {_UNVERIFIED}")
    elif here != profile.node.fingerprint:
        raise _Fallback(
            f"this node (fingerprint {here[:19]}...) is not the kind the profile was measured on "
            f"({profile.node.fingerprint[:19]}...): {difference(here, profile.node.fingerprint)}"
        )
    drift = software_drift(profile.node.software)
    if drift:
        message = "software changed since the profile was measured: " + ", ".join(drift)
        warnings.append(message)
        if strict:
            raise _Fallback(f"strict: {message}")


def _given(fingerprint: str | None) -> str | None:
    """The caller's fingerprint, else the env's; blanks around it dropped, an empty one unset."""
    return given_text(fingerprint) or env_fingerprint()


def _group_class(profile: Profile, tp: int, group: list[int]) -> str:
    found = profile.node.group_class(tp, group)
    if found is not None:
        return found
    # A profile without tp_groups for this TP still knows the classes of the groups it measured.
    for entry in profile.decisions:
        if entry.tp == tp and set(entry.group) == set(group):
            return entry.group_class
    for skipped in profile.skipped:
        if skipped.tp == tp:
            raise _Fallback(f"TP {tp} was not measured: {skipped.reason}")
    gpus = _gpu_count(profile.node.hardware)
    if gpus is not None and tp > gpus:
        raise _Fallback(f"TP {tp} was not measured: it needs {tp} GPUs, the profiled node has {gpus}")
    raise _Fallback(f"GPU group {sorted(group)} is not in the profile (TP {tp})")


def _gpu_count(hardware: Mapping[str, object]) -> int | None:
    """The profiled node's GPU count (``gpu_count``, an integer wherever the profile validated; else
    the GPUs listed), None when it does not say."""
    count = hardware.get("gpu_count")
    if isinstance(count, int):
        return count
    listed = hardware.get("gpus")
    return len(listed) if isinstance(listed, list) else None


def _rule_words(rule: Rule) -> str:
    if rule.backend == NCCL:
        return "nccl: no faster backend measured at this size"
    assert rule.speedup is not None, "check_semantics: a rule other than nccl states its speed-up"
    return f"{rule.backend} measured {speedup_ci_text(rule.speedup, rule.ci)} faster than nccl"


def _nccl(reason: str, warnings: Sequence[str], tp: object, pattern: object, path: str | None) -> Decision:
    return Decision(
        backend=NCCL,
        max_bytes=None,
        reason=reason,
        warnings=tuple(warnings),
        tp=tp if isinstance(tp, int) else None,
        pattern=pattern if isinstance(pattern, str) else None,
        profile_path=path,
    )


def _failed(error: BaseException) -> str:
    return f"topo-gate reader failed ({type(error).__name__}: {_words(error)}); please report it"


def _words(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # noqa: BLE001 -- an exception whose own str() fails must not escape gate()
        return "(no message)"


def _path_text(profile: object) -> str:
    if not isinstance(profile, (str, bytes, os.PathLike)):
        return repr(profile)  # not a path at all: the loader will say so through _Fallback
    try:
        return os.fsdecode(os.fspath(profile))
    except TypeError:
        return repr(profile)  # not a path at all: the loader will say so through _Fallback


class _ProfileCache:
    """Parsed profiles by path, valid while (device, inode, size, mtime, ctime) are unchanged.

    A launcher asks per layer and per size; parsing once per process keeps that free. The file is
    opened once and identified by ``fstat`` of that open handle, so a profile replaced atomically
    between the check and the read can never be cached under the old file's identity.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[int, ...], Profile | ProfileError]] = {}

    def load(self, path: str) -> Profile:
        with ProfileFile(path) as profile_file:
            cached = self._entries.get(path)
            if cached is not None and cached[0] == profile_file.identity:
                result = cached[1]
            else:
                try:
                    result = profile_from_text(profile_file.read_text())
                except ProfileError as error:
                    result = error  # a broken file stays broken until it changes: do not re-parse
                self._entries[path] = (profile_file.identity, result)
        if isinstance(result, ProfileError):
            raise result.with_traceback(None)  # a cached error must not grow a traceback per call
        return result


_CACHE = _ProfileCache()


def load_once(path: str) -> Profile:
    """The valid, untampered profile at ``path``, parsed once per file version in this process: the
    copy ``gate()`` and ``admit()`` read (so a caller that names the profile after planning with it
    does not parse it again). Raises the loader's ``ProfileError``, as ``io.load_profile`` does."""
    return _CACHE.load(path)
