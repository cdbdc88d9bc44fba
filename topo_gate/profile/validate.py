"""Checks that name the problem and where: ``rules[2].max_bytes: must be > 8388608``.

Checks of plain values; what a well-formed profile may claim is ``semantics.py``'s. The schema
dataclasses call these from ``__post_init__``, so an invalid ``Profile`` cannot be built, from a
file or from ``decide``. Each check raises ``ProfileInvalid`` with the field
it was given; ``located()`` prefixes the outer path as the error travels up
(``decisions[1]`` + ``rules[2].max_bytes``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from topo_gate._inputs import MAX_DEPTH, MAX_INT
from topo_gate.profile.errors import ProfileError, ProfileInvalid, ProfileSchemaTooNew

SCHEMA_NAME = "topo-gate/profile"
SCHEMA_MAJOR = 1
# "topo-gate/profile/v1" or "topo-gate/profile/v1.N": a minor bump only adds optional fields.
_SCHEMA_RE = re.compile(r"topo-gate/profile/v(\d+)(?:\.(\d+))?")
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


@contextmanager
def located(prefix: str) -> Iterator[None]:
    """Prefix the field path of any ``ProfileError`` raised inside with ``prefix``."""
    try:
        yield
    except ProfileError as error:
        raise error.within(prefix) from None


def describe(value: object) -> str:
    """A short, safe description of a value for an error message: ``list``, ``str 'abc'``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"bool {value!r}"
    if isinstance(value, int):
        return f"int {_int_words(value)}"
    if isinstance(value, float):
        return f"float {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"str {shown!r}"
    return type(value).__name__


def schema_minor(value: object) -> int:
    """The minor version of a ``schema`` value this reader accepts; raise for anything else."""
    if not isinstance(value, str):
        raise ProfileInvalid(f"must be a string like '{SCHEMA_NAME}/v1', found {describe(value)}", "schema")
    match = _SCHEMA_RE.fullmatch(value)
    if match is None:
        raise ProfileInvalid(f"not a topo-gate profile schema: {value!r}", "schema")
    major = int(match.group(1))
    if major != SCHEMA_MAJOR:
        raise ProfileSchemaTooNew(
            f"unknown schema major {major}; this topo-gate reads v{SCHEMA_MAJOR}", "schema"
        )
    return int(match.group(2) or 0)


def require(data: Mapping[str, Any], key: str) -> Any:
    if key not in data:
        raise ProfileInvalid("missing", key)
    return data[key]


def expect_mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ProfileInvalid(f"must be a mapping, found {describe(value)}", field)
    return value


def expect_list(value: object, field: str) -> list[Any]:
    # Tuples are accepted so dataclasses can be rebuilt from their own (tuple-valued) attributes.
    if not isinstance(value, (list, tuple)):
        raise ProfileInvalid(f"must be a list, found {describe(value)}", field)
    return list(value)


def expect_int(value: object, field: str, *, minimum: int) -> int:
    # bool is an int subclass in Python; `max_bytes: true` is a typo, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProfileInvalid(f"must be an integer, found {describe(value)}", field)
    if value < minimum:
        raise ProfileInvalid(f"must be >= {minimum}, found {_int_words(value)}", field)
    if value > MAX_INT:
        raise ProfileInvalid(f"must be < 2**63, found {_int_words(value)}", field)
    return value


def _int_words(value: int) -> str:
    # str() of an integer with thousands of digits raises ValueError; its size is what matters.
    return str(value) if value.bit_length() <= 64 else f"an integer of {value.bit_length()} bits"


def expect_str(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ProfileInvalid(f"must be a non-empty string, found {describe(value)}", field)
    return value


def expect_optional_str(value: object, field: str) -> str | None:
    return None if value is None else expect_str(value, field)


def expect_choice(value: object, field: str, choices: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str) or value not in choices:
        shown = repr(value) if isinstance(value, str) else describe(value)
        raise ProfileInvalid(f"unknown {what} {shown} (known: {', '.join(choices)})", field)
    return value


def expect_positive_float(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileInvalid(f"must be a number, found {describe(value)}", field)
    if not math.isfinite(value) or value <= 0:
        raise ProfileInvalid(f"must be a finite number > 0, found {value!r}", field)
    return float(value)


def expect_digest(value: object, field: str) -> str:
    if not isinstance(value, str) or _DIGEST_RE.fullmatch(value) is None:
        raise ProfileInvalid(f"must be 'sha256:' and 64 lowercase hex digits, found {describe(value)}", field)
    return value


def expect_plain_data(value: object, field: str, depth: int = 0) -> None:
    """JSON data only: str keys, finite floats, no bytes/sets/dates (the digest hashes it as JSON)."""
    if depth > MAX_DEPTH:
        raise ProfileInvalid(f"nested deeper than {MAX_DEPTH} levels", field)
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            # Scalars inline: a price table's lists hold thousands, and a call each is most of the cost.
            kind = type(item)
            if item is None or kind is str or kind is bool or (kind is float and math.isfinite(item)):
                continue
            expect_plain_data(item, f"{field}[{index}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProfileInvalid(f"mapping keys must be strings, found {describe(key)}", field)
            expect_plain_data(item, f"{field}.{key}" if field else key, depth + 1)
        return
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, int):
        if not -MAX_INT <= value <= MAX_INT:
            raise ProfileInvalid(f"integer out of range, found {_int_words(value)}", field)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ProfileInvalid(f"must be a finite number, found {value!r}", field)
        return
    raise ProfileInvalid(f"must be plain JSON data, found {describe(value)}", field)
