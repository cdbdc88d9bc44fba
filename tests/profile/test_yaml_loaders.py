"""The profile loader's three ways of reading YAML give one answer.

``parse_yaml`` takes the fast path (libyaml composes, ``yaml_fast`` builds plain data) where it can,
and otherwise the careful path (libyaml's events, composed and constructed in Python with every
limit); without libyaml it runs PyYAML's pure-Python scanner. On every profile-like file in the repo,
on the inputs each path treats specially, and on generated documents, the fast path answers exactly
what the careful one does -- the same data, or the same one-line error -- and the pure-Python
scanner the same data or an error of the same kind (on well-formed input: on damaged text the two
scanners disagree about some syntax, as they always have, so there only the libyaml paths are held
to one answer).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.profile.errors import ProfileError
from topo_gate.profile.yaml_format import PurePythonLoader, parse_yaml, to_yaml

REPO = Path(__file__).resolve().parents[2]
FILES = sorted(
    {
        *REPO.glob("profiles/**/*.yaml"),
        *REPO.glob("tests/profile/**/*.yaml"),
        *REPO.glob("tests/fixtures/**/*.yaml"),
        *REPO.glob("tests/launchers/cases/*.yaml"),
    }
)
pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="the fast path needs libyaml")

# Each is a document the fast path must hand to the careful one, or take exactly as it would.
SPECIAL = {
    "alias": "a: &x 1\nb: *x\n",
    "alias of a list": "a: &x [1, 2]\nb: *x\n",
    "anchor without alias": "a: &x 1\nb: 2\n",
    "undefined alias": "a: *nowhere\n",
    "ampersand in text": "note: 'R&D & more'\nb: [1, 2]\n",
    "duplicate key": "a: 1\nb: 2\na: 3\n",
    "duplicate quoted key": "a: 1\n'a': 2\n",
    "int and str keys": "1: a\n'1': b\n",
    "equal ints spelt apart": "1: a\n0x1: b\n",
    "merge key": "base: &b {x: 1}\nitem:\n  <<: *b\n  y: 2\n",
    "merge key without alias": "item:\n  <<: {x: 1}\n  x: 2\n",
    "value key": "=: 1\n",
    "ints": "a: [0, -0, +5, 010, 0o17, 0x1f, 0b101, 1_000, 1:30, -12, 12345678901234567890]\n",
    "floats": "a: [1.5, -0.0, 1., .5, 1e3, 2063e-3, 1.5e+3, 1_0.5, 1:30.5, .inf, -.Inf, .nan, 1e400]\n",
    "bools and nulls": "a: [yes, No, TRUE, off, On, ~, null, Null, '']\n",
    "timestamp": "created: 2026-11-30T08:00:00Z\n",
    "explicit timestamp": "created: !!timestamp 2026-11-30T08:00:00Z\n",
    "binary": "blob: !!binary aGVsbG8=\n",
    "python tag": "x: !!python/name:os.system\n",
    "local tag": "x: !mine 1\n",
    "explicit str": "x: !!str 5\ny: !!int '7'\nz: !!float '2'\n",
    "set": "x: !!set {a: null}\n",
    "complex key": "? [1, 2]\n: x\n",
    "mapping key": "{a: 1}: x\n",
    "deep": "a: " + "[" * 40 + "]" * 40 + "\n",
    "at the depth cap": "a: " + "[" * 30 + "1" + "]" * 30 + "\n",
    "beyond libyaml's cap": "a: " + "[" * 2000 + "]" * 2000 + "\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "empty": "",
    "comment only": "# nothing\n",
    "null document": "null\n",
    "scalar document": "just text\n",
    "syntax error": "a: [1, 2\n",
    "tab": "a:\n\t- 1\n",
    "huge integer": "a: " + "9" * 5000 + "\n",
    "nul byte": "a: '\x00'\n",
    "unicode": "a: 'NEL \u0085 and \u00e9'\nb: \"\\u202e\"\n",
    "json": json.dumps({"a": [1, 2.5, None, True], "b": {"c": "d"}}),
}


def _answer(text: str, **options: object) -> tuple[str, object]:
    try:
        return "data", parse_yaml(text, **options)
    except ProfileError as error:
        return type(error).__name__, str(error)
    except Exception as error:  # noqa: BLE001 -- the same unexpected error on both paths is the same answer
        return type(error).__name__, str(error)


def _same(a: tuple[str, object], b: tuple[str, object]) -> bool:
    """Equal answers; NaN equals NaN (``.nan`` reads as a float that equals nothing)."""
    return _canonical(a) == _canonical(b)


def _canonical(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, dict):
        return {repr(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *(_canonical(item) for item in value)]
    return value


def _assert_one_answer(text: str, *, pure_too: bool = True) -> None:
    fast, careful = _answer(text), _answer(text, fast=False)
    assert _same(fast, careful), (fast, careful)
    if not pure_too:
        return
    pure = _answer(text, loader=PurePythonLoader)
    assert pure[0] == careful[0], (pure, careful)  # scanners word syntax errors differently
    if careful[0] == "data":
        assert _same(pure, careful)


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_profile_like_file_reads_the_same_every_way(path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8: the file reader refuses it before any YAML")
    _assert_one_answer(text)


@pytest.mark.parametrize("text", SPECIAL.values(), ids=SPECIAL.keys())
def test_the_inputs_each_path_treats_specially_read_the_same(text: str) -> None:
    _assert_one_answer(text)


def test_the_fast_path_is_taken_for_a_plain_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a vacuous equivalence: the bundled profile is built by the fast path, not handed over."""
    from topo_gate.profile import yaml_format

    text = (REPO / "profiles" / "h200-x2" / "h7168-run1.yaml").read_text(encoding="utf-8")
    taken = yaml_format._fast(text)
    assert taken is not yaml_format.UNSURE and taken == parse_yaml(text, fast=False)
    assert yaml_format._fast(SPECIAL["alias"]) is yaml_format.UNSURE


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(document=st.dictionaries(st.text(min_size=1, max_size=6), plain, min_size=1, max_size=5))
def test_generated_documents_read_the_same(document: dict) -> None:
    _assert_one_answer(to_yaml(document))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    document=st.dictionaries(st.text(min_size=1, max_size=6), plain, min_size=1, max_size=5),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from("&*!<:[]{}-,'\"#\n 0.x")), max_size=4),
)
def test_damaged_documents_read_the_same(document: dict, edits: list[tuple[int, str]]) -> None:
    text = to_yaml(document)
    for at, character in edits:
        at %= len(text) + 1
        text = text[:at] + character + text[at:]
    _assert_one_answer(text, pure_too=False)
