"""The profile loader's first path: the YAML that topo-gate itself writes, read without PyYAML.

``gate()`` runs at every launcher start, and importing PyYAML (its reader and resolver compile large
regular expressions) cost more than parsing the profile. The canonical text ``yaml_format.to_yaml``
writes is a small, regular subset of YAML: printable ASCII, two-space block mappings and
sequences, flow lists of scalars (and of such lists), plain and single-quoted scalars folded at 100
columns. ``read_canonical`` reads exactly that subset, line by line, and answers ``UNSURE`` for
anything else, so that the libyaml and careful paths (``yaml_format.parse_yaml``) alone decide and
word it:

- any character but printable ASCII and ``\\n`` (tabs, CR, NEL, non-ASCII), a blank line, a comment,
  a document marker or directive, a text that does not end with a line break;
- an anchor, alias, tag, block scalar (``|``, ``>``), double-quoted scalar, flow mapping (but
  ``{}``), complex or non-string key, merge or value key, duplicate key, empty value, nesting deeper
  than ``MAX_DEPTH``, or an indentation the writer never produces;
- a scalar PyYAML converts the long way (hexadecimal, octal, sexagesimal, ``_``, ``.inf``, ``.nan``,
  ``yes``/``on``-style booleans), and any exception at all.

Scalars are resolved with PyYAML's own implicit resolvers as the profile loader configures them
(``_NUMERIC_RESOLVERS`` and the words, kept equal to ``yaml_format._ProfileRules``'s by
``tests/profile/test_yaml_lines.py``), and every accepted document reads as the careful loader reads
it (``tests/profile/test_yaml_loaders.py`` holds all the paths to one answer).
"""

from __future__ import annotations

import json
import re

from topo_gate._inputs import MAX_DEPTH

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a launcher ~2 ms
if TYPE_CHECKING:
    from typing import Any

#: ``read_canonical``'s answer for a document it leaves to the YAML paths.
UNSURE: Any = object()

_TAG = "tag:yaml.org,2002:"
#: PyYAML 6.0's implicit resolvers (yaml/resolver.py, the ``Resolver.add_implicit_resolver`` calls)
#: as the profile loader configures them (no timestamp; YAML 1.2 floats, ``yaml_format._YAML12_FLOAT``),
#: in the order PyYAML tries them for a scalar's first character. Those of a fixed set of words are
#: written as the words (``_WORDS``); the numeric ones are compiled the first time a scalar needs them.
_NUMERIC_RESOLVERS: tuple[tuple[str, str, int], ...] = (
    (
        _TAG + "float",
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    (
        _TAG + "int",
        r"""^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+
                    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""",
        re.X,
    ),
    (_TAG + "float", r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$", 0),
)
#: The first characters of a scalar the numeric resolvers may match (the int one takes no ".").
NUMERIC_FIRST = frozenset("-+0123456789.")
#: The bool and null resolvers' words, with what SafeConstructor builds of them; the merge (``<<``)
#: and value (``=``) resolvers' words, which it builds nothing of here.
BOOL_WORDS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
NULL_WORDS = ("~", "null", "Null", "NULL")
_WORDS: dict[str, Any] = {**BOOL_WORDS, **dict.fromkeys(NULL_WORDS)}
_UNBUILT_WORDS = ("<<", "=")
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
# A decimal float() reads as SafeConstructor does: PyYAML's float (with a "."), or YAML 1.2's (an
# exponent); not "-.5", which neither resolver takes.
_FLOAT = re.compile(r"[-+]?[0-9]+(?:\.[0-9]*(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)")
_numeric: list[tuple[str, re.Pattern[str]]] = []
_PRINTABLE = re.compile(r"[\x20-\x7e\n]*")
_KEY = re.compile(r"([A-Za-z_](?:[A-Za-z0-9_.+/ -]*[A-Za-z0-9_.+/-])?|'[^']*(?:''[^']*)*'):(?: |$)")
_FLOW_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/-]*")
_FLOW_REFUSED = re.compile(r"['\"{}#&*!|>%@`?:]")  # quoted, mapped, commented, tagged: the YAML paths'
#: Characters that make a plain scalar anything but plain text when they start it (PyYAML's
#: ``check_plain``), and the runs inside one that end it or start a comment.
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")


class _NotCanonical(Exception):
    """Internal: leave this document to the YAML paths."""


def read_canonical(text: str) -> Any:
    """The plain data of ``text`` as the careful loader would build it, or ``UNSURE``."""
    try:
        if not text.endswith("\n") or not _PRINTABLE.fullmatch(text):
            return UNSURE
        lines = text.split("\n")
        lines.pop()
        return _Reader(lines).document()
    except Exception:  # noqa: BLE001 -- any surprise: the YAML paths decide, and say why
        return UNSURE


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _scalar(value: str) -> Any:
    """A plain scalar's value under the profile loader's resolvers."""
    if value in _WORDS:
        return _WORDS[value]
    if value in _UNBUILT_WORDS:
        raise _NotCanonical
    if value[0] not in NUMERIC_FIRST:
        return value
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    if value.count(".") > 1:
        return value  # a version: no numeric resolver takes two dots
    if not _numeric:
        _numeric.extend((tag, re.compile(pattern, flags)) for tag, pattern, flags in _NUMERIC_RESOLVERS)
    if any(pattern.match(value) for _, pattern in _numeric):
        raise _NotCanonical  # 0x1f, 1_000, 010, 1:30, .inf: PyYAML's own conversion
    return value


def _plain(text: str) -> str:
    """``text`` if it is one plain scalar (no indicator start, no ``: `` or `` #`` inside)."""
    first = text[0]
    if first in _INDICATORS and not (first == "-" and text[1:2] not in ("", " ")):
        raise _NotCanonical
    if ": " in text or " #" in text or text.endswith(":"):
        raise _NotCanonical
    return text


class _Reader:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.at = 0

    def document(self) -> dict[str, Any]:
        if not self.lines or _indent(self.lines[0]) != 0:
            raise _NotCanonical
        data = self.mapping(0, 1)
        if self.at != len(self.lines):
            raise _NotCanonical
        return data

    def mapping(self, indent: int, depth: int, first: str | None = None) -> dict[str, Any]:
        """The mapping whose keys stand at column ``indent``; ``first``: its first line's text after
        a sequence's ``- `` (the rest of its lines are whole)."""
        if depth > MAX_DEPTH:
            raise _NotCanonical
        built: dict[str, Any] = {}
        while self.at < len(self.lines):
            if first is None:
                line = self.lines[self.at]
                here = _indent(line)
                if here < indent:
                    break
                if here != indent:
                    raise _NotCanonical
                content = line[indent:]
            else:
                content, first = first, None
            if content.startswith("- "):
                break  # an indentless sequence's next entry: the caller's
            matched = _KEY.match(content)
            if matched is None:
                raise _NotCanonical
            key = matched.group(1)
            if key[0] == "'":
                key = key[1:-1].replace("''", "'")
            elif type(_scalar(key)) is not str:
                raise _NotCanonical  # a key of another type (true, null): the careful loader's
            if key in built:
                raise _NotCanonical  # a duplicate: the careful loader names it
            self.at += 1
            built[key] = self.value(content[matched.end() :].lstrip(" "), indent, depth + 1)
        return built

    def value(self, rest: str, indent: int, depth: int) -> Any:
        """A mapping value: ``rest`` of its key's line, and the lines below deeper than ``indent``."""
        if depth > MAX_DEPTH:
            raise _NotCanonical
        if rest:
            return self.inline(rest, indent, depth)
        if self.at == len(self.lines):
            raise _NotCanonical  # an empty value
        line = self.lines[self.at]
        below = _indent(line)
        if line[below:].startswith("- ") and below >= indent:
            return self.sequence(below, depth)
        if below > indent:
            return self.mapping(below, depth)
        raise _NotCanonical  # an empty value

    def sequence(self, indent: int, depth: int) -> list[Any]:
        if depth + 1 > MAX_DEPTH:
            raise _NotCanonical
        items: list[Any] = []
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if _indent(line) != indent or not line.startswith("- ", indent):
                break
            content = line[indent + 2 :]
            if not content or content[0] == " " or content.startswith("- "):
                raise _NotCanonical  # an empty or nested entry: never written
            if _KEY.match(content):
                items.append(self.mapping(indent + 2, depth + 1, first=content))
            else:
                self.at += 1
                items.append(self.inline(content, indent + 1, depth + 1))
                if self.at < len(self.lines) and _indent(self.lines[self.at]) > indent:
                    raise _NotCanonical  # a folded entry: never written
        return items

    def inline(self, text: str, indent: int, depth: int) -> Any:
        """A scalar or flow list starting on the line just read, continued on lines deeper than
        ``indent``."""
        first = text[0]
        if first == "[":
            return self.flow(text, indent, depth)
        if text == "{}":
            return {}
        if first == "'":
            return self.quoted(text, indent)
        pieces = [text.rstrip(" ")]
        pieces += self.continued(indent)
        if any(not piece or piece[0] == "#" for piece in pieces):
            raise _NotCanonical
        return _scalar(_plain(" ".join(pieces)))

    def continued(self, indent: int) -> list[str]:
        """The stripped lines below, deeper than ``indent``: a folded scalar's continuation."""
        pieces = []
        while self.at < len(self.lines) and _indent(self.lines[self.at]) > indent:
            pieces.append(self.lines[self.at].strip(" "))
            self.at += 1
        return pieces

    def quoted(self, text: str, indent: int) -> str:
        raw = "\n".join([text, *self.continued(indent)])
        end = 1
        while True:
            end = raw.index("'", end)
            if raw.startswith("''", end):
                end += 2
                continue
            break
        if raw[end + 1 :].strip(" "):
            raise _NotCanonical  # text after the closing quote
        lines = raw[1:end].split("\n")
        if any(not line.strip(" ") for line in lines[1:-1]) or (len(lines) > 1 and not lines[-1].strip(" ")):
            raise _NotCanonical  # a blank line folds to a line break: the careful loader's
        if len(lines) == 1:
            return lines[0].replace("''", "'")
        if not lines[0].rstrip(" "):
            raise _NotCanonical  # a line break right after the opening quote
        # Folded as PyYAML folds: the spaces around each line break become one.
        middle = [line.strip(" ") for line in lines[1:-1]]
        folded = " ".join([lines[0].rstrip(" "), *middle, lines[-1].lstrip(" ")])
        return folded.replace("''", "'")

    def flow(self, text: str, indent: int, depth: int) -> list[Any]:
        raw = " ".join([text.rstrip(" "), *self.continued(indent)])
        if not raw.endswith("]") or raw.count("[") != raw.count("]"):
            raise _NotCanonical
        if _FLOW_REFUSED.search(raw):
            raise _NotCanonical
        if depth + 2 > MAX_DEPTH:
            raise _NotCanonical
        inner = raw[1:-1].strip(" ")
        if not inner:
            return []
        if "[" not in inner and (inner[0].isalpha() or inner[0] == "_"):
            return [_flow_word(word.strip(" ")) for word in inner.split(",")]
        data = _FLOW_DECODER.decode(raw)  # numbers, null, true, false and lists of them
        for item in data:
            if type(item) is list and any(type(value) is list for value in item):
                raise _NotCanonical  # deeper than a list of lists: never written
        return data  # type: ignore[no-any-return]


def _flow_word(word: str) -> Any:
    if not _FLOW_WORD.fullmatch(word):
        raise _NotCanonical
    return _scalar(word)


def _refuse(name: str) -> Any:
    raise _NotCanonical  # NaN, Infinity: JSON's words, YAML's strings


#: ``json.loads(raw, parse_constant=_refuse)`` builds this decoder (and its scanner) anew per call,
#: and a price table has a hundred flow lists: one for them all.
_FLOW_DECODER = json.JSONDecoder(parse_constant=_refuse)
