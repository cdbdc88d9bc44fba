"""The YAML dialect of profile files: a strict safe loader and a dumper that writes what it reads.

The loader yields JSON data only (mappings with string keys, lists, str, int, finite float, bool,
null), so the digest hashes exactly what was read. It is stricter than ``yaml.safe_load``:

- no aliases: profiles never need them, and refusing them stops "billion laughs" expansion at the
  first ``*alias``, before any memory is spent;
- no duplicate keys: YAML keeps the last silently, which would turn a hand edit into a hidden one;
- no merge keys (``<<: {...}``): the keys they merge in are shadowed by the mapping's own, a
  duplicate in all but name;
- no implicit timestamps: ``created: 2026-11-30T08:00:00Z`` stays a string, as JSON would keep it;
- YAML 1.2 floats: ``1e-06`` is a float (YAML 1.1 makes it a string);
- nesting capped: a hostile ``[[[[...`` fails with a message, not a RecursionError.

Tags such as ``!!python/object`` construct nothing: construction is ``yaml.SafeConstructor``'s.
Scanning uses libyaml when PyYAML was built with it (about 6x faster on a profile, which a launcher
pays at startup); composition always runs here, in Python, so the limits above hold either way.
"""

from __future__ import annotations

import re

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.resolver import Resolver

from topo_gate._inputs import MAX_DEPTH, long_integer_words
from topo_gate.profile.errors import ProfileUnreadable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a launcher ~2 ms
if TYPE_CHECKING:
    from typing import Any

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_YAML12_FLOAT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


class _ProfileRules(Composer, SafeConstructor, Resolver):
    """Composition and construction with the limits above; events come from a parser mixed in."""

    _depth = 0

    if TYPE_CHECKING:  # supplied by the parser mixed in: PyYAML's or libyaml's, with its own events

        def check_event(self, *choices: Any) -> bool: ...
        def peek_event(self) -> Any: ...

    def __init__(self) -> None:
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise ComposerError(None, None, "aliases (*name) are not allowed", mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                raise ConstructorError(None, None, "merge keys (<<) are not allowed", key_node.start_mark)
            if isinstance(key_node, yaml.ScalarNode):
                identity = (key_node.tag, key_node.value)
                if identity in seen:
                    raise ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(identity)
        return super().construct_mapping(node, deep=deep)


_ProfileRules.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}
_ProfileRules.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


class PurePythonLoader(_ProfileRules, yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """The loader on PyYAML's own scanner (used when libyaml is missing, and by the tests)."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _ProfileRules.__init__(self)


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class LibyamlLoader(_ProfileRules, CParser):
        """The loader on libyaml's scanner; ``_ProfileRules`` precedes CParser, so its composer runs."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _ProfileRules.__init__(self)

    ProfileLoader: type[_ProfileRules] = LibyamlLoader
else:
    ProfileLoader = PurePythonLoader


class _ProfileDumper(yaml.SafeDumper):
    """Writes plain data in the given key order, never with anchors (the loader refuses them)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_list_inline_when_flat(self, data: list[Any]) -> yaml.SequenceNode:
        # Short lists of scalars ([0, 1], [2.62, 2.97]) read better on one line.
        flow = all(not isinstance(item, (dict, list)) for item in data)
        return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_ProfileDumper.add_representer(list, _ProfileDumper.represent_list_inline_when_flat)
# The dumper quotes any string the loader would read as another type: "0E0" must stay a string.
# (It keeps the timestamp resolver, so dates are quoted too, for YAML 1.1 readers elsewhere.)
_ProfileDumper.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


def parse_yaml(text: str, loader: type[_ProfileRules] = ProfileLoader, *, allow_empty: bool = False) -> Any:
    """YAML (or JSON) text -> plain data; a one-line ``ProfileUnreadable`` on any syntax problem.

    No document is an error, or None with ``allow_empty`` (a launcher's config file may be empty)."""
    try:
        # PyYAML's stubs accept only its own loader classes; this one mixes the same bases.
        data = yaml.load(text, Loader=loader)  # type: ignore[arg-type]  # noqa: S506 -- a SafeConstructor loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        context = f" ({error.context})" if error.context and error.problem else ""
        raise ProfileUnreadable(f"not valid YAML: {where}{error.problem or error.context}{context}") from None
    except yaml.YAMLError as error:
        raise ProfileUnreadable(f"not valid YAML: {error}") from None
    except ValueError as error:  # an integer with more digits than Python converts (thousands)
        raise ProfileUnreadable(f"not valid YAML: {long_integer_words(text) or error}") from None
    if data is None and not allow_empty:
        raise ProfileUnreadable("empty: no YAML document in the file")
    return data


def to_yaml(data: Any) -> str:
    """Plain data -> YAML text in the mapping's own key order, pure ASCII.

    Non-ASCII characters are written as escapes: with ``allow_unicode`` PyYAML writes U+0085 (NEL)
    raw, and reading it back yields a line break instead -- a digest mismatch on the next load.
    """
    return yaml.dump(data, Dumper=_ProfileDumper, sort_keys=False, allow_unicode=False, width=100)
