"""The published JSON Schema of profile v1 (``profiles/schema.json``), generated from ``schema.py``.

For launchers in other languages. It states what JSON Schema can: types, names, ranges, required
fields. Rules it cannot express are in the descriptions and enforced by ``load_profile``: rule
``max_bytes`` strictly increasing, the last rule ``{max_bytes: null, backend: nccl}``, ``ci`` low <=
high, ``group`` of length ``tp``, no two decisions with the same (tp, pattern, group_class), a price
table's lists one entry per size and its CIs containing their values, what ``semantics.py`` checks
across fields, and the digest. Regenerate after a schema change::

    python -m topo_gate.profile.json_schema profiles/schema.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

from topo_gate.profile.fields import DTYPES
from topo_gate.profile.measurements import MAX_CALL_US, MIN_CALL_US, STATUSES
from topo_gate.profile.schema import BACKENDS, COMPOSITE_SUFFIX, NCCL, PATTERNS

_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_POSITIVE = {"type": "number", "exclusiveMinimum": 0}
_GPU_GROUP = {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True, "minItems": 1}


def _object(
    required: list[str], properties: dict[str, Any], description: str | None = None
) -> dict[str, Any]:
    # additionalProperties stays open: a v1.N profile may add optional fields a v1 reader ignores.
    schema: dict[str, Any] = {"type": "object", "required": required, "properties": properties}
    if description:
        schema["description"] = description
    return schema


def _rule() -> dict[str, Any]:
    rule = _object(
        ["max_bytes", "backend"],
        {
            "max_bytes": {"type": ["integer", "null"], "minimum": 1},
            "backend": {"enum": list(BACKENDS)},
            "speedup": {"type": ["number", "null"], "exclusiveMinimum": 0},
            "ci": {"type": ["array", "null"], "items": _POSITIVE, "minItems": 2, "maxItems": 2},
            "alternatives": {"type": ["array", "null"], "items": _alternative()},
            "in_context": {"type": ["number", "null"], "exclusiveMinimum": 0},
            "reason": {"type": ["string", "null"]},
        },
        "Sizes in (previous max_bytes, max_bytes] use backend; null = unbounded. A backend other "
        "than nccl must state the speedup and ci ([low, high], low <= high) it was measured with. "
        "alternatives (v1.1, optional): other backends that also beat nccl at every measured size of "
        "the range, each listed once and never the rule's own backend; none on an nccl rule. "
        "in_context (v1.2, optional): the backend's weakest speedup over nccl in a layer-like graph "
        "(GEMM -> all-reduce [-> norm]).",
    )
    rule["if"] = {"properties": {"backend": {"not": {"const": NCCL}}}}
    rule["then"] = {
        "required": ["speedup", "ci"],
        "properties": {"speedup": _POSITIVE, "ci": {"type": "array"}},
    }
    rule["else"] = {"properties": {"alternatives": {"type": ["array", "null"], "maxItems": 0}}}
    return rule


def _alternative() -> dict[str, Any]:
    return _object(
        ["backend", "speedup", "ci"],
        {
            "backend": {"enum": [name for name in BACKENDS if name != NCCL]},
            "speedup": _POSITIVE,
            "ci": {"type": "array", "items": _POSITIVE, "minItems": 2, "maxItems": 2},
        },
        "Another backend measured faster than nccl across the rule's whole range; speedup and ci "
        "([low, high], low <= high) are its weakest over the range.",
    )


def _decision() -> dict[str, Any]:
    return _object(
        ["tp", "group", "group_class", "pattern", "rules"],
        {
            "tp": {"type": "integer", "minimum": 1},
            "group": _GPU_GROUP,
            "group_class": {"type": "string", "minLength": 1},
            "pattern": {"enum": list(PATTERNS)},
            "failed": {"type": ["string", "null"]},
            "rules": {"type": "array", "minItems": 1, "items": _rule()},
        },
        "The ladder for one (tp, pattern, group_class), unique in the profile. group has tp GPUs. "
        "Rules are ordered by strictly increasing max_bytes; the last is {max_bytes: null, backend: nccl}.",
    )


def _per_size(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": {"oneOf": [{"type": "null"}, item]}}


#: A price in microseconds within the physical bounds (``measurements.MIN_CALL_US`` / ``MAX_CALL_US``).
_NONNEGATIVE = {"type": "number", "minimum": 0, "maximum": MAX_CALL_US}
_PER_CALL = {"type": "number", "minimum": MIN_CALL_US, "maximum": MAX_CALL_US}
_INTERVAL = {"type": "array", "items": _NONNEGATIVE, "minItems": 2, "maxItems": 2}


def _measurement() -> dict[str, Any]:
    names = "|".join(BACKENDS)
    prices = _object(
        ["status", "median_us", "ci_us"],
        {
            "status": {"type": "array", "minItems": 1, "items": {"enum": list(STATUSES)}},
            "median_us": _per_size(_PER_CALL),
            "ci_us": _per_size({**_INTERVAL, "items": {**_NONNEGATIVE, "exclusiveMinimum": 0}}),
            "in_context_us": {"oneOf": [{"type": "null"}, _per_size(_NONNEGATIVE)]},
            "in_context_ci_us": {"oneOf": [{"type": "null"}, _per_size(_INTERVAL)]},
            "transition": {
                "oneOf": [
                    {"type": "null"},
                    _object(
                        ["after_bytes", "cost_us"],
                        {
                            "after_bytes": {
                                "type": "array",
                                "minItems": 1,
                                "items": {"type": "integer", "minimum": 1},
                            },
                            "cost_us": {"type": "array", "items": _per_size(_NONNEGATIVE)},
                        },
                    ),
                ]
            },
        },
        "One backend, one entry per size: status (ok, stopped: a measurement; the others say why "
        "there is no price), median_us and its 95% order-statistic CI (null exactly where the status "
        "is not ok/stopped), in context where a layer graph was timed (layer minus GEMM alone, us), "
        "and for Lamport-style backends transition.cost_us[r][c]: extra us of one replay at size c "
        "right after after_bytes[r] (null where after_bytes[r] <= the size or not measured).",
    )
    return _object(
        ["tp", "group", "group_class", "pattern", "hidden", "dtype", "sizes", "backends"],
        {
            "tp": {"type": "integer", "minimum": 1},
            "group": _GPU_GROUP,
            "group_class": {"type": "string", "minLength": 1},
            "pattern": {"enum": list(PATTERNS)},
            "hidden": {"type": "integer", "minimum": 1},
            "dtype": {"enum": list(DTYPES)},
            "sizes": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
            "backends": {
                "type": "object",
                "minProperties": 1,
                "patternProperties": {
                    f"^({names})(\\{COMPOSITE_SUFFIX})?$": prices,
                },
                "additionalProperties": False,
            },
        },
        "v1.3, optional: the price table of one decision's run (same tp, pattern, group_class, "
        "group). sizes are the run's ladder in bytes, strictly ascending; every list of a backend "
        "has one entry per size.",
    )


def _node() -> dict[str, Any]:
    tp_group = _object(["gpus", "class"], {"gpus": _GPU_GROUP, "class": {"type": "string", "minLength": 1}})
    hardware = {
        "type": "object",
        "description": "The topology layer's description of the node; readers use only tp_groups.",
        "properties": {
            "tp_groups": {
                "type": "object",
                "patternProperties": {"^[1-9][0-9]*$": {"type": "array", "items": tp_group}},
                "additionalProperties": False,
            }
        },
    }
    return _object(
        ["fingerprint", "hardware", "software"],
        {
            "fingerprint": _DIGEST,
            "hardware": hardware,
            "software": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
            "provenance": {"type": ["object", "null"], "description": "Informational only."},
        },
    )


def _fleet() -> dict[str, Any]:
    evidence = _object(
        ["path"], {"path": {"type": "string"}, "digest": {"oneOf": [{"type": "null"}, _DIGEST]}}
    )
    node = _object(
        ["name", "evidence"],
        {"name": {"type": "string"}, "hostname": {"type": ["string", "null"]}, "evidence": evidence},
    )
    return {
        "oneOf": [
            {"type": "null"},
            _object(
                ["count", "method", "nodes"],
                {
                    "count": {"type": "integer", "minimum": 1},
                    "method": {"type": "string"},
                    "nodes": {"type": "array", "minItems": 1, "items": node},
                },
                "v1.2, optional: the nodes of one class whose evidence `topo-gate fleet merge` combined; "
                "every rule held on each of them. count equals the number of nodes; names are unique.",
            ),
        ]
    }


def profile_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``topo-gate/profile/v1`` documents."""
    schema = _object(
        ["schema", "created", "tool", "node", "trials", "decisions", "digest"],
        {
            "schema": {"type": "string", "pattern": r"^topo-gate/profile/v1(\.[0-9]+)?$"},
            "created": {"type": "string", "minLength": 1},
            "tool": _object(["name", "version"], {"name": {"type": "string"}, "version": {"type": "string"}}),
            "node": _node(),
            "trials": _object(
                ["dtype", "hidden", "tp", "patterns"],
                {
                    "dtype": {"enum": list(DTYPES)},
                    "hidden": {"type": "integer", "minimum": 1},
                    "tp": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                    "patterns": {"type": "array", "items": {"enum": list(PATTERNS)}},
                    "method": {"type": ["object", "null"]},
                },
            ),
            "skipped": {
                "type": ["array", "null"],
                "items": _object(
                    ["tp", "reason"], {"tp": {"type": "integer", "minimum": 1}, "reason": {"type": "string"}}
                ),
            },
            "decisions": {"type": "array", "items": _decision()},
            "measurements": {"type": ["array", "null"], "items": _measurement()},
            "evidence": {
                "oneOf": [
                    {"type": "null"},
                    _object(
                        ["path"],
                        {"path": {"type": "string"}, "digest": {"oneOf": [{"type": "null"}, _DIGEST]}},
                    ),
                ]
            },
            "fleet": _fleet(),
            "digest": {
                **_DIGEST,
                "description": 'sha256 of json.dumps(profile without "digest", sort_keys=True, '
                'separators=(",", ":"), ensure_ascii=False) encoded as UTF-8.',
            },
        },
        "A topo-gate gating profile: per TP size, GPU-group class and pattern, the all-reduce backend "
        "measured fastest at each message-size range; NCCL everywhere else.",
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "topo-gate/profile/v1",
        **schema,
    }


def schema_text() -> str:
    return json.dumps(profile_json_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    from topo_gate._atomic import write_atomic

    if len(sys.argv) != 2:
        sys.exit("usage: python -m topo_gate.profile.json_schema OUT.json")
    write_atomic(sys.argv[1], schema_text())
