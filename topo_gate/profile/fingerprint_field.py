"""A profile's ``node.fingerprint`` field read from the YAML parser's events, stopping there.

Kept apart from ``profile_set`` so that reading one profile (the launcher's path through ``gate()``)
imports no PyYAML: only a profile *set*'s index needs the parser's events.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml

from topo_gate.profile.errors import ProfileError
from topo_gate.profile.yaml_format import parse_yaml

_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")
_EVENT_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def fingerprint_field(text: str) -> str | None:
    """The document's ``node.fingerprint`` when it is a fingerprint, else None: the parser's events
    are read only up to the field (a few hundred bytes into a canonical profile); a document that
    cannot be settled that way is parsed whole."""
    try:
        found = _field(text)
        if found is _UNSURE:
            data = parse_yaml(text)
            node = data.get("node") if isinstance(data, dict) else None
            found = node.get("fingerprint") if isinstance(node, dict) else None
    except (ProfileError, yaml.YAMLError):
        return None
    return found if isinstance(found, str) and _FINGERPRINT.fullmatch(found) else None


_UNSURE = object()


def _field(text: str) -> object:
    """``node.fingerprint`` of the top-level mapping from the parser's events, stopping there: the
    scalar's text, None when the document has no such field, ``_UNSURE`` for what only a full parse
    settles (an alias, a complex key, a top level that is no mapping)."""
    events = yaml.parse(text, Loader=_EVENT_LOADER)
    for event in events:
        if isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
            continue
        if not isinstance(event, yaml.MappingStartEvent):
            return _UNSURE
        break
    return _in_mapping(events, ("node", "fingerprint"))


def _in_mapping(events: Iterator[yaml.Event], keys: tuple[str, ...]) -> object:
    for key in events:
        if isinstance(key, yaml.MappingEndEvent):
            return None
        if not isinstance(key, yaml.ScalarEvent):
            return _UNSURE
        value = next(events)
        if key.value != keys[0]:
            if _skip(value, events) is _UNSURE:
                return _UNSURE
            continue
        if isinstance(value, yaml.AliasEvent):
            return _UNSURE
        if len(keys) == 1:
            return value.value if isinstance(value, yaml.ScalarEvent) else None
        return _in_mapping(events, keys[1:]) if isinstance(value, yaml.MappingStartEvent) else None
    return _UNSURE


def _skip(first: yaml.Event, events: Iterator[yaml.Event]) -> object:
    """Consume the rest of the node ``first`` starts."""
    depth = 1 if isinstance(first, (yaml.MappingStartEvent, yaml.SequenceStartEvent)) else 0
    while depth:
        event = next(events, None)
        if event is None:
            return _UNSURE
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None
