"""What an evidence document must hold for ``decide`` and the profile builder to use it.

Evidence v1, v1.1, v1.2 and v1.3's optional fields (``after_sizes``, ``context_backends``,
``session``, ``budget``; v1.3's ``preflight`` and per-backend ``call``; docs/ARCHITECTURE.md
"Trials") are checked alike.

Evidence is an input like any other (``probe --replay``, ``decide``): a hand edit or a corrupted file
must stop here with one line naming the field (``runs[0].results[3].nbytes: must be an integer``),
never deeper in the pipeline as a TypeError. ``evidence_problem`` returns that line, or None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topo_gate.profile.errors import ProfileError
from topo_gate.profile.schema import PATTERNS, Node
from topo_gate.profile.validate import describe

EVIDENCE_FORMAT = "topo-gate/evidence/v1"
STATUSES = ("ok", "wrong", "unavailable", "failed", "timeout")
RUN_KEYS = ("tp", "group", "group_class", "pattern", "backends", "results")
RESULT_KEYS = ("backend", "tokens", "nbytes", "status", "samples_us", "per_rank_us", "skew_us")
CONTEXT_KEYS = ("backend", "tokens", "nbytes", "samples_us")
GRAPH_CHECK_KEYS = ("backend", "tokens", "status")
PREFLIGHT_KEYS = (
    "tp", "group_class", "launcher", "release", "variants", "pattern", "min_tokens", "max_tokens", "path",
    "timed", "why", "action",
)  # fmt: skip


class _Problem(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)


def evidence_problem(evidence: Any) -> str | None:
    """The first thing in ``evidence`` that the tools after it could not use, as one line; or None."""
    try:
        _check(evidence)
    except _Problem as problem:
        return str(problem)
    return None


def _check(evidence: Any) -> None:
    if not isinstance(evidence, Mapping):
        raise _Problem("", "not a JSON object")
    fmt = evidence.get("format")
    if not isinstance(fmt, str) or not fmt.startswith("topo-gate/evidence/"):
        raise _Problem("", f"not topo-gate evidence (format {_shown(fmt)})")
    if fmt != EVIDENCE_FORMAT and not fmt.startswith(EVIDENCE_FORMAT + "."):
        raise _Problem("", f"unsupported evidence format {fmt!r} (this topo-gate reads {EVIDENCE_FORMAT})")
    for key, kind in (("node", Mapping), ("trials", Mapping), ("skipped", list), ("runs", list)):
        if not isinstance(evidence.get(key), kind):
            raise _Problem("", f"missing or malformed {key!r}")
    for index, run in enumerate(evidence["runs"]):
        _check_run(run, f"runs[{index}]")
    for index, skipped in enumerate(evidence["skipped"]):
        where = f"skipped[{index}]"
        _int(_key(skipped, "tp", where), f"{where}.tp", minimum=1)
        _text(_key(skipped, "reason", where), f"{where}.reason")
    _check_trials(evidence["trials"])
    _check_node(evidence["node"])
    if evidence.get("budget") is not None:
        _check_budget(evidence["budget"])
    for index, row in enumerate(_list(evidence.get("preflight", []), "preflight")):
        _check_preflight_row(row, f"preflight[{index}]")


def _check_node(node: Mapping[str, Any]) -> None:
    # The recorded block must make a valid profile node; a capture, when present, is checked (and the
    # hardware rebuilt from it) by the loader, which knows the topology layer.
    block = {key: node.get(key) for key in ("fingerprint", "hardware", "software")}
    block["provenance"] = node.get("provenance") or {}
    try:
        Node.from_dict(block)
    except ProfileError as error:
        raise _Problem("", f"node.{error}") from None
    capture = node.get("capture")
    if capture is not None and not isinstance(capture, Mapping):
        raise _Problem("node.capture", f"must be an object or null, found {describe(capture)}")


def _check_trials(trials: Mapping[str, Any]) -> None:
    _text(_key(trials, "dtype", "trials"), "trials.dtype")
    _int(_key(trials, "hidden", "trials"), "trials.hidden", minimum=1)
    for index, tp in enumerate(_list(_key(trials, "tp", "trials"), "trials.tp")):
        _int(tp, f"trials.tp[{index}]", minimum=1)
    for index, pattern in enumerate(_list(_key(trials, "patterns", "trials"), "trials.patterns")):
        _choice(pattern, f"trials.patterns[{index}]", PATTERNS)
    method = trials.get("method", {})
    if not isinstance(method, Mapping):
        raise _Problem("trials.method", f"must be an object, found {describe(method)}")
    device = trials.get("device", "cuda")
    _choice(device, "trials.device", ("cuda", "cpu"))


def _check_run(run: Any, where: str) -> None:
    if not isinstance(run, Mapping) or any(key not in run for key in RUN_KEYS):
        raise _Problem(where, f"needs {', '.join(RUN_KEYS)}")
    tp = _int(run["tp"], f"{where}.tp", minimum=1)
    group = _list(run["group"], f"{where}.group")
    for index, gpu in enumerate(group):
        _int(gpu, f"{where}.group[{index}]", minimum=0)
    if len(group) != tp or len(set(group)) != tp:
        raise _Problem(f"{where}.group", f"must list {tp} distinct GPUs, found {group}")
    _text(run["group_class"], f"{where}.group_class")
    _choice(run["pattern"], f"{where}.pattern", PATTERNS)
    if not isinstance(run["backends"], (Mapping, list)):
        raise _Problem(f"{where}.backends", f"must be an object, found {describe(run['backends'])}")
    if isinstance(run["backends"], list):  # evidence v1 lists the names; decide reads each as text
        for index, name in enumerate(run["backends"]):
            _text(name, f"{where}.backends[{index}]")
    else:  # v1.1 maps each name to its verdict, whose status decide reads (decide/prices.py _outcomes)
        for name, outcome in run["backends"].items():
            if not isinstance(outcome, Mapping):
                raise _Problem(f"{where}.backends.{name}", f"must be an object, found {describe(outcome)}")
            if "call" in outcome:
                _check_call(outcome["call"], f"{where}.backends.{name}.call")
    # Only well-formed sizes make the ladder: a malformed one is refused by _check_result, with its field.
    ladder = {
        result["nbytes"]
        for result in _list(run["results"], f"{where}.results")
        if isinstance(result, Mapping) and type(result.get("nbytes")) is int
    }
    for index, result in enumerate(run["results"]):
        _check_result(result, f"{where}.results[{index}]", ladder)
    _check_run_extras(run, where)
    _check_run_v12(run, where)


def _check_run_extras(run: Mapping[str, Any], where: str) -> None:
    """Evidence v1.1's optional run fields, which decide and report read: a failed plan's ``error``,
    the ``retries`` it took, the layer graphs (``context``) and the rechecked replays (``graph_checks``)."""
    error = run.get("error")
    if error is not None and not isinstance(error, str):
        raise _Problem(f"{where}.error", f"must be a string or null, found {describe(error)}")
    for index, retry in enumerate(_list(run.get("retries", []), f"{where}.retries")):
        _text(retry, f"{where}.retries[{index}]")
    for index, entry in enumerate(_list(run.get("context", []), f"{where}.context")):
        at = f"{where}.context[{index}]"
        if not isinstance(entry, Mapping) or any(key not in entry for key in CONTEXT_KEYS):
            raise _Problem(at, f"needs {', '.join(CONTEXT_KEYS)}")
        _text(entry["backend"], f"{at}.backend")
        _int(entry["tokens"], f"{at}.tokens", minimum=1)
        _int(entry["nbytes"], f"{at}.nbytes", minimum=1)
        _samples(entry["samples_us"], f"{at}.samples_us")
    for index, check in enumerate(_list(run.get("graph_checks", []), f"{where}.graph_checks")):
        at = f"{where}.graph_checks[{index}]"
        if not isinstance(check, Mapping) or any(key not in check for key in GRAPH_CHECK_KEYS):
            raise _Problem(at, f"needs {', '.join(GRAPH_CHECK_KEYS)}")
        _text(check["backend"], f"{at}.backend")
        _int(check["tokens"], f"{at}.tokens", minimum=1)
        _choice(check["status"], f"{at}.status", STATUSES)


def _check_run_v12(run: Mapping[str, Any], where: str) -> None:
    """Evidence v1.2's optional run fields: the backends the layer graphs were told to include
    (``context_backends``) and the worker session several patterns shared (``session``)."""
    names = _list(run.get("context_backends", []), f"{where}.context_backends")
    for index, name in enumerate(names):
        _text(name, f"{where}.context_backends[{index}]")
    if len(set(names)) != len(names):
        raise _Problem(f"{where}.context_backends", f"lists a backend twice: {names}")
    session = run.get("session")
    if session is None:
        return
    at = f"{where}.session"
    if not isinstance(session, Mapping):
        raise _Problem(at, f"must be an object, found {describe(session)}")
    _text(_key(session, "id", at), f"{at}.id")
    patterns = _list(_key(session, "patterns", at), f"{at}.patterns")
    for index, pattern in enumerate(patterns):
        _choice(pattern, f"{at}.patterns[{index}]", PATTERNS)
    if run["pattern"] not in patterns:
        raise _Problem(f"{at}.patterns", f"must include the run's own pattern {run['pattern']!r}")
    _seconds(_key(session, "wall_s", at), f"{at}.wall_s")
    phases = _key(session, "phases_s", at)
    if not isinstance(phases, Mapping):
        raise _Problem(f"{at}.phases_s", f"must be an object, found {describe(phases)}")
    for name, value in phases.items():
        _seconds(value, f"{at}.phases_s.{name}")


def _check_budget(budget: Any) -> None:
    """Evidence v1.2's ``budget``: the time limit the probe ran under and what it dropped to fit."""
    if not isinstance(budget, Mapping):
        raise _Problem("budget", f"must be an object or null, found {describe(budget)}")
    seconds = budget.get("seconds")
    if seconds is not None:
        _seconds(seconds, "budget.seconds")
    for index, dropped in enumerate(_list(budget.get("dropped", []), "budget.dropped")):
        at = f"budget.dropped[{index}]"
        _int(_key(dropped, "tp", at), f"{at}.tp", minimum=1)
        _choice(_key(dropped, "pattern", at), f"{at}.pattern", PATTERNS)
        _text(_key(dropped, "what", at), f"{at}.what")
        _text(_key(dropped, "reason", at), f"{at}.reason")


def _check_call(call: Any, where: str) -> None:
    """Evidence v1.3's per-backend ``call``: the settings the trial called the kernel with
    (``fp32_acc``, ``launch_with_pdl``, ...; docs/trials.md), each true/false or a word."""
    if not isinstance(call, Mapping):
        raise _Problem(where, f"must be an object, found {describe(call)}")
    for key, value in call.items():
        if not isinstance(value, bool):
            _text(value, f"{where}.{key}")


def _check_preflight_row(row: Any, where: str) -> None:
    """Evidence v1.3's ``preflight``: per launcher default route and token range, whether the run
    timed it, and if not why and what would (``probe/preflight.py``)."""
    if not isinstance(row, Mapping) or any(key not in row for key in PREFLIGHT_KEYS):
        raise _Problem(where, f"needs {', '.join(PREFLIGHT_KEYS)}")
    _int(row["tp"], f"{where}.tp", minimum=1)
    for key in ("group_class", "launcher", "release", "path"):
        _text(row[key], f"{where}.{key}")
    for index, variant in enumerate(_list(row["variants"], f"{where}.variants")):
        _text(variant, f"{where}.variants[{index}]")
    _choice(row["pattern"], f"{where}.pattern", PATTERNS)
    low = _int(row["min_tokens"], f"{where}.min_tokens", minimum=1)
    if row["max_tokens"] is not None:
        _int(row["max_tokens"], f"{where}.max_tokens", minimum=low)
    if not isinstance(row["timed"], bool):
        raise _Problem(f"{where}.timed", f"must be true or false, found {describe(row['timed'])}")
    for key in ("why", "action"):
        if row[key] is not None:
            _text(row[key], f"{where}.{key}")


def _check_after_sizes(result: Mapping[str, Any], where: str, ladder: set[Any]) -> None:
    """Evidence v1.2's ``after_sizes``: replays timed right after each larger ladder size, ascending;
    ``after_larger_us``, when also present, is the largest entry's samples (v1.1 readers use it)."""
    entries = _list(result["after_sizes"], f"{where}.after_sizes")
    previous = result["nbytes"]
    for index, entry in enumerate(entries):
        at = f"{where}.after_sizes[{index}]"
        after = _int(_key(entry, "after_nbytes", at), f"{at}.after_nbytes", minimum=1)
        if after not in ladder:
            raise _Problem(f"{at}.after_nbytes", f"{after} is not a size of the run's ladder")
        if after <= previous:
            what = "the result's own size" if index == 0 else "the entry before"
            raise _Problem(f"{at}.after_nbytes", f"must be larger than {what} ({previous}), found {after}")
        previous = after
        _samples(_key(entry, "samples_us", at), f"{at}.samples_us")
    _int(_key(result, "graph_calls", where), f"{where}.graph_calls", minimum=1)
    if entries and "after_larger_us" in result and result["after_larger_us"] != entries[-1]["samples_us"]:
        raise _Problem(f"{where}.after_larger_us", "must equal the samples of the largest after_sizes entry")


def _check_result(result: Any, where: str, ladder: set[Any]) -> None:
    if not isinstance(result, Mapping) or any(key not in result for key in RESULT_KEYS):
        raise _Problem(where, f"needs {', '.join(RESULT_KEYS)}")
    _text(result["backend"], f"{where}.backend")
    _int(result["tokens"], f"{where}.tokens", minimum=1)
    _int(result["nbytes"], f"{where}.nbytes", minimum=1)
    if result["status"] not in STATUSES:
        raise _Problem(where, f"status {_shown(result['status'])} is not one of {', '.join(STATUSES)}")
    samples = result["samples_us"]
    if not isinstance(samples, list) or not all(_is_positive_number(s) for s in samples):
        raise _Problem(where, "samples_us must be a list of positive numbers")
    if result["status"] == "ok" and not samples:
        raise _Problem(where, "status ok without samples")
    reason = result.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _Problem(f"{where}.reason", f"must be a string or null, found {describe(reason)}")
    error = result.get("max_abs_err")
    if error is not None and (isinstance(error, bool) or not isinstance(error, (int, float))):
        raise _Problem(f"{where}.max_abs_err", f"must be a number or null, found {describe(error)}")
    if "after_larger_us" in result:  # v1.1: a replay right after the largest size (decide's rule 5)
        _samples(result["after_larger_us"], f"{where}.after_larger_us")
        _int(_key(result, "graph_calls", where), f"{where}.graph_calls", minimum=1)
    if "after_sizes" in result:  # v1.2: a replay right after each larger size (the price table)
        _check_after_sizes(result, where, ladder)


def _samples(value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(_is_positive_number(s) for s in value):
        raise _Problem(where, f"must be a list of positive numbers, found {describe(value)}")


def _key(data: Any, key: str, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise _Problem(where, f"must be an object, found {describe(data)}")
    if key not in data:
        raise _Problem(f"{where}.{key}", "missing")
    return data[key]


def _int(value: Any, where: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Problem(where, f"must be an integer, found {describe(value)}")
    if value < minimum:
        raise _Problem(where, f"must be >= {minimum}, found {value}")
    return value


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise _Problem(where, f"must be a number of seconds >= 0, found {describe(value)}")
    return float(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Problem(where, f"must be a non-empty string, found {describe(value)}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Problem(where, f"must be a list, found {describe(value)}")
    return value


def _choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise _Problem(where, f"must be one of {', '.join(choices)}, found {describe(value)}")
    return value


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) and len(value) <= 40 else describe(value)


def _is_positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
