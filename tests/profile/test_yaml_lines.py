"""The reader's first path (``yaml_lines.read_canonical``): the text topo-gate writes, read without
PyYAML, exactly as the careful loader reads it -- and everything else handed over (``UNSURE``).

``tests/profile/test_yaml_loaders.py`` holds ``parse_yaml``'s paths to one answer; this file holds the
line reader's own claims: it takes every profile topo-gate writes (not a vacuous equivalence), its
copy of PyYAML's resolvers is PyYAML's, no scalar or damaged text reads otherwise than the careful
loader reads it, and ``import topo_gate`` + ``gate()`` never import PyYAML.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from yaml.constructor import SafeConstructor

from topo_gate.profile.errors import ProfileError
from topo_gate.profile.yaml_format import _ProfileRules, parse_yaml, to_yaml
from topo_gate.profile.yaml_lines import (
    _NUMERIC_RESOLVERS,
    BOOL_WORDS,
    NULL_WORDS,
    NUMERIC_FIRST,
    UNSURE,
    read_canonical,
)

REPO = Path(__file__).resolve().parents[2]
BUNDLED = sorted(REPO.glob("profiles/**/*.yaml"))
TAG = "tag:yaml.org,2002:"


def _careful(text: str) -> object:
    try:
        return parse_yaml(text, fast=False)
    except ProfileError:
        return ProfileError


def _assert_reads_as_careful(text: str) -> object:
    """``read_canonical``'s answer: UNSURE, or the careful loader's data (never data it refuses)."""
    taken = read_canonical(text)
    if taken is not UNSURE:
        careful = _careful(text)
        assert careful is not ProfileError, f"read {text!r}, which the careful loader refuses"
        assert taken == careful and repr(taken) == repr(careful), (taken, careful)
    return taken


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_bundled_profile_is_read_without_pyyaml(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    taken = _assert_reads_as_careful(text)
    assert taken is not UNSURE


def test_every_construct_the_writer_uses_is_taken() -> None:
    document = {
        "schema": "topo-gate/profile/v1.3",
        "created": "2026-11-30T08:00:00Z",  # quoted by the writer: a timestamp elsewhere
        "versions": {"driver": "580.159.04", "cuda": "13.0", "python": "3.12", "torch": "2.11.0+cu130"},
        "keys that need quotes": {"1": "a", "2": "b", "true": "c", "null": "d"},
        "words": ["ok", "stopped", "nccl", "GPU-14bffcd8-4f8c", "2.28.9", "0.7.2.post1", "2.11.0+cu130"],
        "quoted words": {
            "yes": "yes",
            "No": "No",
            "null": "null",
            "hex": "0x1f",
            "under": "1_000",
            "inf": ".inf",
        },
        "numbers": [0, -0, 7, -12, 12345678901234567890, 1.5, -0.0, 1e-06, 2.5e17, 1e300, None, True, False],
        "pairs": [[6.6, 6.7], None, [1.0, 2.0], []],
        "empty": {"list": [], "mapping": {}},
        "folded": "word " * 40 + "end",
        "folded quoted": "it's: " + "a 'quoted' word, " * 12 + "#end",
        "indicators": [{"a": "- dash"}, {"b": "? question", "c": ": colon", "d": "[bracket", "e": "{brace"}],
        "more indicators": {"f": "!bang", "g": "&amp", "h": "*star", "i": "-.5", "j": " padded "},
        "rules": [{"max_bytes": 114688, "backend": "pcie_ipc", "ci": [1.559, 1.571]}, {"max_bytes": None}],
        "long list": list(range(0, 40_000, 997)),
        "nested": {"a": {"b": {"c": [{"d": [1, 2]}]}}},
    }
    text = to_yaml(document)
    assert read_canonical(text) == document == parse_yaml(text, fast=False)


def _alternatives(pattern: str) -> set[str]:
    body = re.sub(r"\s", "", pattern)  # verbose patterns: their whitespace is no part of them
    assert body.startswith("^(?:") and body.endswith(")$"), pattern
    return set(body[4:-2].split("|"))


def test_the_resolvers_are_the_profile_loaders() -> None:
    """The copy is PyYAML's table as the profile loader configures it: the same numeric patterns in
    the same order for each first character, and the bool, null, merge and value resolvers' words."""
    resolvers = _ProfileRules.yaml_implicit_resolvers
    numeric = {TAG + "float", TAG + "int"}
    for first in NUMERIC_FIRST:
        theirs = [(tag, r.pattern, r.flags & re.X) for tag, r in resolvers[first] if tag in numeric]
        ours = [entry for entry in _NUMERIC_RESOLVERS if first != "." or entry[0] != TAG + "int"]
        assert theirs == ours, first
    assert {first for first, rs in resolvers.items() if any(tag in numeric for tag, _ in rs)} == NUMERIC_FIRST
    words: dict[str, set[str]] = {}
    for found in resolvers.values():
        for tag, regexp in found:
            if tag not in numeric:
                words.setdefault(tag, set()).update(_alternatives(regexp.pattern))
    assert words == {
        TAG + "yaml": {"!", "&", "\\*"},  # never a plain scalar: the reader refuses them as indicators
        TAG + "bool": set(BOOL_WORDS),
        TAG + "null": {*NULL_WORDS, ""},
        TAG + "merge": {"<<"},
        TAG + "value": {"="},
    }  # and no timestamp: the profile loader keeps dates as strings
    assert BOOL_WORDS == {word: SafeConstructor.bool_values[word.lower()] for word in BOOL_WORDS}


# Each is text the line reader leaves to the YAML paths (which then read or refuse it as they always did).
HANDED_OVER = {
    "comment": "# a note\na: 1\n",
    "trailing comment": "a: 1 # note\n",
    "tab": "a:\n\t- 1\n",
    "blank line": "a: 1\n\nb: 2\n",
    "no final line break": "a: 1",
    "carriage return": "a: 1\r\n",
    "non-ASCII": "a: caf\u00e9\n",
    "document marker": "---\na: 1\n",
    "anchor and alias": "a: &x 1\nb: *x\n",
    "tag": "a: !!str 5\n",
    "block scalar": "a: |\n  text\n",
    "double quotes": 'a: "text"\n',
    "flow mapping": "a: {b: 1}\n",
    "quoted flow item": "a: ['x', y]\n",
    "duplicate key": "a: 1\na: 2\n",
    "hexadecimal": "a: 0x1f\n",
    "underscored": "a: 1_000\n",
    "infinity": "a: .inf\n",
    "NaN among numbers": "a: [1, NaN]\n",
    "merge key value": "a: <<\n",
    "key of another type": "true: 1\n",
    "empty value": "a:\nb: 1\n",
    "nested sequence": "a:\n- - 1\n",
    "list of lists of lists": "a: [[[1]]]\n",
    "root sequence": "- 1\n",
    "mis-indented": "a:\n    b: 1\n  c: 2\n",
    "colon inside": "a: b: c\n",
    "trailing comma": "a: [1, 2,]\n",
}


@pytest.mark.parametrize("text", HANDED_OVER.values(), ids=HANDED_OVER.keys())
def test_what_the_writer_never_writes_is_handed_over(text: str) -> None:
    assert read_canonical(text) is UNSURE


NUMERIC_ALPHABET = "0123456789.-+eE_:xXbo~nNyYtTfFaAiIlLsS<= "


@settings(max_examples=300, deadline=None)
@given(scalar=st.text(alphabet=NUMERIC_ALPHABET, min_size=1, max_size=9))
def test_every_scalar_reads_as_the_careful_loader_reads_it(scalar: str) -> None:
    _assert_reads_as_careful(f"a: {scalar}\n")
    _assert_reads_as_careful(f"a: [{scalar}]\n")
    _assert_reads_as_careful(f"a: [{scalar}, 1]\n")
    _assert_reads_as_careful(f"{scalar}: 1\n")


SMALL = (REPO / "profiles" / "examples" / "synthetic-h200x2.yaml").read_text(encoding="utf-8")


@settings(max_examples=200, deadline=None)
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(SMALL)), st.integers(0, 3), st.sampled_from(list("&*!:[]{}-,'\"# \n0.x|>"))
        ),
        min_size=1,
        max_size=4,
    )
)
def test_a_damaged_profile_reads_as_the_careful_loader_reads_it(edits: list[tuple[int, int, str]]) -> None:
    """A written profile with characters inserted or cut: the same data, or handed over."""
    text = SMALL
    for at, cut, character in edits:
        text = text[:at] + character + text[at + cut :]
    _assert_reads_as_careful(text)


def test_import_and_gate_import_no_pyyaml() -> None:
    """What a launcher pays: the bundled profile is decided without PyYAML ever being imported."""
    profile = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
    code = (
        "import sys, topo_gate\n"
        f"d = topo_gate.gate({str(profile)!r}, tp=2, trust_unverified_node=True)\n"
        "assert not d.fallback, d.reason\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('yaml', '_yaml')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
