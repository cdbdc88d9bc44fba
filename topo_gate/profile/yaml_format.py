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
pays at startup); composition runs here, in Python, so the limits above hold either way -- except on
the fast path (``yaml_fast``): a document of plain data that PyYAML's libyaml loader
(``yaml.CSafeLoader``) composes and a constructor of plain data builds, refusing to the careful path
all that it treats specially, so the answer is the same (``tests/profile/test_yaml_loaders.py``).
Without libyaml, PyYAML's pure-Python scanner and parser feed the same careful composition.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.resolver import Resolver

from topo_gate._inputs import MAX_DEPTH, long_integer_words
from topo_gate.profile.errors import ProfileUnreadable
from topo_gate.profile.yaml_fast import UNSURE, plain_data

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
    from yaml._yaml import CParser, get_version

    class LibyamlLoader(_ProfileRules, CParser):
        """The loader on libyaml's scanner; ``_ProfileRules`` precedes CParser, so its composer runs."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _ProfileRules.__init__(self)

    class _LibyamlComposer(yaml.CSafeLoader):
        """PyYAML's libyaml loader with the profile's resolvers: libyaml composes the fast path's node
        tree, and its safe constructor converts the scalars ``yaml_fast`` leaves to it."""

        yaml_implicit_resolvers = _ProfileRules.yaml_implicit_resolvers

        def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
            # A price table is thousands of plain decimals and a few words said again and again: tag a
            # decimal without trying every resolver (nothing in the table above that precedes float
            # matches one), and remember what each word resolved to (it depends on its text alone).
            if kind is yaml.ScalarNode and implicit[0]:
                tag = _WORD_TAGS.get(value)
                if tag is not None:
                    return tag
                if _PLAIN_DECIMAL.fullmatch(value):
                    return "tag:yaml.org,2002:float"
                word: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
                if len(_WORD_TAGS) < _WORDS_KEPT:
                    _WORD_TAGS[value] = word
                return word
            resolved: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
            return resolved

    _PLAIN_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+")
    _WORD_TAGS: dict[str, str] = {}
    _WORDS_KEPT = 4096

    ProfileLoader: type[_ProfileRules] = LibyamlLoader
    # libyaml caps nesting (at 1000) since 0.2.5; older, its composer's recursion is unbounded.
    _FAST = get_version() >= (0, 2, 5)
else:
    ProfileLoader = PurePythonLoader
    _FAST = False


class _ProfileDumper(yaml.SafeDumper):
    """Writes plain data in the given key order, never with anchors (the loader refuses them)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_list_inline_when_flat(self, data: list[Any]) -> yaml.SequenceNode:
        # Lists of scalars ([0, 1], [2.62, 2.97]) and of such lists (a price table's CIs, [[6.6, 6.7],
        # null, ...]) read better, and take far fewer lines, in flow style.
        flow = all(_flat(item) if isinstance(item, list) else not isinstance(item, dict) for item in data)
        return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _flat(items: list[Any]) -> bool:
    return all(not isinstance(item, (dict, list)) for item in items)


_ProfileDumper.add_representer(list, _ProfileDumper.represent_list_inline_when_flat)
# The dumper quotes any string the loader would read as another type: "0E0" must stay a string.
# (It keeps the timestamp resolver, so dates are quoted too, for YAML 1.1 readers elsewhere.)
_ProfileDumper.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


def parse_yaml(
    text: str, loader: type[_ProfileRules] = ProfileLoader, *, allow_empty: bool = False, fast: bool = True
) -> Any:
    """YAML (or JSON) text -> plain data; a one-line ``ProfileUnreadable`` on any syntax problem.

    No document is an error, or None with ``allow_empty`` (a launcher's config file may be empty).
    With ``loader`` the default and ``fast``, and libyaml present, a document of plain data takes
    the fast path (``yaml_fast``), which answers what the careful loader would; anything else, and
    every error, is the careful loader's own."""
    if fast and _FAST and loader is ProfileLoader:
        data = _fast(text)
        if data is not UNSURE and data is not None:
            return data
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


def _fast(text: str) -> Any:
    loader = _LibyamlComposer(text)
    try:
        root = loader.get_single_node()
    except Exception:  # noqa: BLE001 -- a syntax error (or anything): the careful loader words it
        return UNSURE
    # No "&" in the text: no anchor, so no alias either (one without its anchor fails to compose).
    return UNSURE if root is None else plain_data(root, loader, anchors="&" in text)


def to_yaml(data: Any) -> str:
    """Plain data -> YAML text in the mapping's own key order, pure ASCII.

    Non-ASCII characters are written as escapes: with ``allow_unicode`` PyYAML writes U+0085 (NEL)
    raw, and reading it back yields a line break instead -- a digest mismatch on the next load.
    """
    return yaml.dump(data, Dumper=_ProfileDumper, sort_keys=False, allow_unicode=False, width=100)
