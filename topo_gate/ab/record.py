"""The A/B record (``topo-gate/ab/v1``): what was compared, every run, and the verdict, sealed.

Sealed as a profile is: ``digest`` is ``"sha256:" + sha256`` of the canonical JSON of everything but
the digest (``profile.digest``), so an edited record is refused by ``show`` and ``report``. Written
through the one guarded writer (``_atomic.write_atomic``), read through the guarded reader
(``_inputs``: regular file, size cap, depth and number caps), then checked field by field so that
a hostile file is one line naming the field, never a crash in a renderer. Fields: docs/ab.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from topo_gate._atomic import write_atomic
from topo_gate._inputs import InputError, RegularFile, parse_json
from topo_gate.ab.benchmarks import HIGHER, LOWER
from topo_gate.ab.record_check import semantic_problem
from topo_gate.ab.verdict import VERDICTS
from topo_gate.profile.digest import DIGEST_KEY, compute_digest

FORMAT = "topo-gate/ab/v1"
_MARK = b'"topo-gate/ab/'
MAX_RECORD_BYTES = 32 * 1024 * 1024
#: ok, or why the run does not count: exit status, time limit, no readable metric.
STATUSES = ("ok", "failed", "timeout", "no-metric")


class RecordError(Exception):
    """A record that cannot be used. ``kind``: ``unreadable`` (exit 3), ``invalid`` or ``tampered``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def seal(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with its digest (any old digest replaced)."""
    content = {key: value for key, value in record.items() if key != DIGEST_KEY}
    return {**content, DIGEST_KEY: compute_digest(content)}


def write_record(path: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Check, seal and write ``record`` atomically (``OutputRefused`` when it cannot be written)."""
    sealed = seal(record)
    problem = record_problem(sealed)
    if problem:
        raise ValueError(f"refusing to write an invalid A/B record: {problem}")
    return write_atomic(path, json.dumps(sealed, indent=1, ensure_ascii=False, allow_nan=False) + "\n")


def looks_like_record(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is JSON naming the A/B format near its top (never raises)."""
    try:
        with RegularFile(path, "an A/B record") as source:
            head = source.read_head(1 << 12)
    except InputError:
        return False
    return head.lstrip().startswith(b"{") and _MARK in head


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The record at ``path``, checked and untampered; ``RecordError`` (one line) otherwise."""
    try:
        with RegularFile(path, "an A/B record") as source:
            data = parse_json(source.read_text(MAX_RECORD_BYTES))
    except InputError as error:
        raise RecordError("unreadable", f"{path}: {error}") from None
    problem = record_problem(data)
    if problem:
        raise RecordError("invalid", f"{path}: {problem}")
    if compute_digest(data) != data[DIGEST_KEY]:
        raise RecordError(
            "tampered", f"{path}: digest mismatch: the record was edited after it was written (or is damaged)"
        )
    # After the digest, like a profile's semantic check: a tampered file is reported as tampered.
    problem = semantic_problem(data)
    if problem:
        raise RecordError("invalid", f"{path}: {problem}")
    checked: dict[str, Any] = data  # record_problem: a JSON object with every field
    return checked


Check = Callable[[Any], bool]


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _or_none(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _interval(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)


_TOP: dict[str, Check] = {
    "format": lambda v: v == FORMAT,
    "created": _is_str,
    "tool": lambda v: isinstance(v, dict),
    "command": _list_of(_is_str),
    "launcher": _is_str,
    "launcher_version": _is_str,
    "benchmark": _or_none(_is_str),
    "result_via": _is_str,
    "metric": lambda v: isinstance(v, dict),
    "model": _or_none(_is_str),
    "hidden": _or_none(_is_int),
    "tp": _is_int,
    "profile": lambda v: isinstance(v, dict),
    "node": lambda v: isinstance(v, dict),
    "method": lambda v: isinstance(v, dict),
    "arms": lambda v: isinstance(v, dict) and bool(v),
    "runs": _list_of(lambda r: isinstance(r, dict)),
    "summary": lambda v: isinstance(v, dict),
    "comparisons": _list_of(lambda c: isinstance(c, dict)),
    "verdict": lambda v: v in VERDICTS,
    "notes": _list_of(_is_str),
    DIGEST_KEY: lambda v: isinstance(v, str) and v.startswith("sha256:"),
}
#: Fields a record written before them lacks: checked where present.
_OPTIONAL_TOP: dict[str, Check] = {"release": lambda v: isinstance(v, dict)}
#: ``release``: the launcher release CMD's interpreter had installed and the one the plan modelled
#: (``releases.Resolution.to_dict``), where they were read (or why not): a record says what it tested.
_RELEASE: dict[str, Check] = {
    "modelled": _or_none(_is_str),
    "installed": _or_none(_is_str),
    "flashinfer_modelled": _or_none(_is_str),
    "flashinfer_installed": _or_none(_is_str),
    "override": _or_none(_is_str),
    "refusal": _or_none(_is_str),
    "read": _is_str,
}
_METRIC: dict[str, Check] = {"name": _is_str, "direction": lambda v: v in (HIGHER, LOWER), "unit": _is_str}
#: ``path`` None: no profile was given (no plan arm: an env arm or nccl against the default).
_PROFILE: dict[str, Check] = {
    "path": _or_none(_is_str),
    "digest": _or_none(_is_str),
    "fingerprint": _or_none(_is_str),
}
_ARM: dict[str, Check] = {
    "args": _list_of(_is_str),
    "env": _str_map,
    "config": lambda v: isinstance(v, dict),
    "added": _list_of(_is_str),
    "warnings": _list_of(_is_str),
    "notes": _list_of(_is_str),
    "reason": _is_str,
    "same_as": _or_none(_is_str),
}
_RUN: dict[str, Check] = {
    "index": _is_int,
    "arm": _is_str,
    "round": _or_none(_is_int),
    "status": lambda v: v in STATUSES,
    "exit_code": _or_none(_is_int),
    "value": _or_none(_is_number),
    "reason": _or_none(_is_str),
    "tail": _list_of(_is_str),
    "stdout": _is_str,
    "stderr": _is_str,
    "result": _or_none(_is_str),
    "wall_s": _is_number,
}
_SUMMARY: dict[str, Check] = {
    "rounds": _list_of(_is_int),
    "samples": _list_of(_is_number),
    "successes": _is_int,
    "failures": _is_int,
    "median": _or_none(_is_number),
    "mean": _or_none(_is_number),
    "spread": _or_none(_is_number),
}
_COMPARISON: dict[str, Check] = {
    "arm": _is_str,
    "against": lambda v: v == "default",
    "pairs": _is_int,
    "ratio": _or_none(_is_number),
    "ci": _or_none(_interval),
    "verdict": lambda v: v in VERDICTS,
    "reason": _is_str,
}


def record_problem(data: Any) -> str | None:
    """What is wrong with ``data`` as an A/B record (``field: problem``), or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("format") != FORMAT:
        return f"format: expected {FORMAT!r}, got {data.get('format')!r}"
    problem = _fields(data, _TOP, "") or _fields(data, _OPTIONAL_TOP, "", optional=True)
    if problem:
        return problem
    checks: list[tuple[Mapping[str, Any], dict[str, Check], str]] = [
        *(((data["release"], _RELEASE, "release"),) if "release" in data else ()),
        (data["metric"], _METRIC, "metric"),
        (data["profile"], _PROFILE, "profile"),
        *((arm, _ARM, f"arms.{name}") for name, arm in data["arms"].items()),
        *((run, _RUN, f"runs[{i}]") for i, run in enumerate(data["runs"])),
        *((s, _SUMMARY, f"summary.{name}") for name, s in data["summary"].items()),
        *((c, _COMPARISON, f"comparisons[{i}]") for i, c in enumerate(data["comparisons"])),
    ]
    for value, fields, where in checks:
        if not isinstance(value, dict):
            return f"{where}: not an object"
        problem = _fields(value, fields, where)
        if problem:
            return problem
    return _references(data)


def _fields(
    value: Mapping[str, Any], fields: Mapping[str, Check], where: str, *, optional: bool = False
) -> str | None:
    for key, check in fields.items():
        name = f"{where}.{key}" if where else key
        if key not in value:
            if optional:
                continue
            return f"{name}: missing"
        if not check(value[key]):
            return f"{name}: unexpected value {_short(value[key])}"
    return None


def _references(data: Mapping[str, Any]) -> str | None:
    arms = set(data["arms"])
    for index, run in enumerate(data["runs"]):
        if run["arm"] not in arms:
            return f"runs[{index}].arm: {_short(run['arm'])} is not one of the arms"
        if (run["status"] == "ok") != (run["value"] is not None):
            return f"runs[{index}]: status {run['status']} with value {run['value']!r}"
    for name in data["summary"]:
        if name not in arms:
            return f"summary.{_short(name)}: not one of the arms"
    for index, comparison in enumerate(data["comparisons"]):
        if comparison["arm"] not in arms:
            return f"comparisons[{index}].arm: {_short(comparison['arm'])} is not one of the arms"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."
