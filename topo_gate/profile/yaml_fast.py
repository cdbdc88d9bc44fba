"""The profile loader's fast path: libyaml composes the document, and a constructor of plain data
builds it -- only where the result is exactly what the careful loader (``yaml_format``) would build.

A launcher pays for ``gate()`` at startup, and a v1.3 profile's price table is thousands of scalars:
composing them in Python costs a multiple of parsing them. Here libyaml's own composer builds the
node tree (its parser caps nesting at 1000, so its recursion is bounded), and ``plain_data`` walks
it, refusing -- with ``UNSURE``, never with an error -- everything the careful loader treats
specially, so that path alone decides and words it:

- an alias (a node reached twice), nesting deeper than ``MAX_DEPTH``, a duplicate key (the careful
  loader's rule: the same tag and text), a merge key (``<<``);
- any tag but the plain ones (str, int, float, bool, null, seq, map): ``!!binary``, ``!!python/...``,
  ``!!timestamp``, a local tag;
- any scalar its conversion does not take the short way (hexadecimal, octal, sexagesimal, ``_``,
  ``.inf``, ``.nan``: SafeConstructor's own method converts those), and any exception at all.

So a document this path accepts, the careful loader accepts with equal data; everything else goes to
the careful loader (``tests/profile/test_yaml_loaders.py`` holds the two to the same answers).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from topo_gate._inputs import MAX_DEPTH

__all__ = ["UNSURE", "plain_data"]

#: ``plain_data``'s answer for a document it leaves to the careful loader.
UNSURE: Any = object()

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + name for name in ("str", "int", "float", "bool", "null"))
_SEQ, _MAP = _TAG + "seq", _TAG + "map"
_DIGITS = frozenset("0123456789")
_SLOW_FLOAT = frozenset("_:nN")  # underscores, sexagesimal, .inf/.nan: SafeConstructor's own way


class _NotPlain(Exception):
    """Internal: leave this document to the careful loader."""


def plain_data(root: yaml.Node, constructor: SafeConstructor, *, anchors: bool = True) -> Any:
    """What the careful loader would build from ``root``, or ``UNSURE``. ``anchors=False``: the text
    has none, so no node can be reached twice and the walk need not track them."""
    try:
        return _Builder(constructor, anchors).build(root, 1)
    except Exception:  # noqa: BLE001 -- any surprise: the careful loader decides, and says why
        return UNSURE


class _Builder:
    def __init__(self, constructor: SafeConstructor, anchors: bool) -> None:
        self.constructor = constructor
        self.seen: set[int] | None = set() if anchors else None

    def build(self, node: yaml.Node, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _NotPlain
        if self.seen is not None:
            if id(node) in self.seen:
                raise _NotPlain  # an alias: libyaml hands the anchored node out again
            self.seen.add(id(node))
        tag = node.tag
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, tag)
        if isinstance(node, yaml.SequenceNode) and tag == _SEQ:
            return [self.build(item, depth + 1) for item in node.value]
        if isinstance(node, yaml.MappingNode) and tag == _MAP:
            return self._mapping(node, depth)
        raise _NotPlain

    def _mapping(self, node: yaml.MappingNode, depth: int) -> dict[Any, Any]:
        built: dict[Any, Any] = {}
        keys: set[tuple[str, str]] = set()
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                identity = (key_node.tag, key_node.value)
                if identity in keys:
                    raise _NotPlain  # a duplicate key: the careful loader names it
                keys.add(identity)
            key = self.build(key_node, depth + 1)
            built[key] = self.build(value_node, depth + 1)  # an unhashable key raises: careful loader
        return built

    def _scalar(self, node: yaml.ScalarNode, tag: str) -> Any:
        value: str = node.value
        if tag == _STR:
            return value
        if tag == _FLOAT:
            if _SLOW_FLOAT.isdisjoint(value):
                return float(value)  # what SafeConstructor computes for these (sign * float(rest))
            return self.constructor.construct_yaml_float(node)
        if tag == _INT:
            digits = value[1:] if value[:1] in "+-" else value
            if digits and _DIGITS.issuperset(digits) and (digits == "0" or digits[0] != "0"):
                return int(value)
            return self.constructor.construct_yaml_int(node)  # 0x, 0o, 0b, 010, 1_000, 1:30
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return SafeConstructor.bool_values[value.lower()]
        raise _NotPlain
