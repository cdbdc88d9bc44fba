"""Each span topo-gate cites has its hash in its release's span file, and each span file names only
spans topo-gate cites (scripts/cited_spans.py): a citation added without its hash, or a hash left
behind by a citation that moved, fails here, with no wheel needed. The hash itself, and where a span
went in the next release (scripts/span_relocation.py), are pinned on small texts written here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
# span_relocation imports its sibling cited_spans, as it does when run from scripts/.
sys.path.insert(0, str(SCRIPTS))


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cited_spans = _load("cited_spans")
span_relocation = _load("span_relocation")

CITATIONS = cited_spans.citations()
FILES = sorted({(c.launcher, c.release) for c in CITATIONS})


def _recorded(launcher: str, release: str) -> dict:
    return cited_spans.load(launcher, release)


def _full_key(citation, recorded: dict) -> str | None:
    """The span file's key of a citation (a bare plugin citation through ``resolved``)."""
    if not citation.bare:
        return citation.key
    path = recorded["resolved"].get(citation.key)
    return None if path is None else f"{path}:{citation.cite.lines}"


def test_every_modelled_release_has_a_span_file() -> None:
    modelled = {(name, release) for name in knobs.SUPPORTED for release in knobs.SUPPORTED[name]}
    modelled |= {
        (name, release) for name in knobs.LIBRARY_RELEASES for release in knobs.LIBRARY_RELEASES[name]
    }
    assert modelled <= set(FILES), f"modelled releases nothing cites: {sorted(modelled - set(FILES))}"
    for launcher, release in FILES:
        assert cited_spans.span_file(launcher, release).exists(), (
            f"no span file for {launcher} {release}: python scripts/cited_spans.py hash {launcher} {release} ..."
        )


@pytest.mark.parametrize(("launcher", "release"), FILES)
def test_every_citation_has_its_hash(launcher: str, release: str) -> None:
    recorded = _recorded(launcher, release)
    entries = recorded["spans"].keys() | recorded["unhashed"].keys()
    missing = []
    for citation in CITATIONS:
        if (citation.launcher, citation.release) != (launcher, release):
            continue
        key = _full_key(citation, recorded)
        if citation.bare and key is None:
            continue  # a module naming several launchers: another release's file resolves it (below)
        if key not in entries:
            missing.append(f"{citation.cite} ({citation.where})")
    assert not missing, (
        f"cited in {launcher} {release} with no hash in {cited_spans.span_file(launcher, release).name}: "
        f"{missing}; read each span, then python scripts/cited_spans.py hash {launcher} {release} ..."
    )


def test_every_bare_plugin_citation_resolves_in_exactly_one_release() -> None:
    resolving: dict[str, list[str]] = defaultdict(list)
    for citation in CITATIONS:
        if citation.bare and citation.key in _recorded(citation.launcher, citation.release)["resolved"]:
            resolving[f"{citation.where} {citation.key}"].append(citation.release)
    bare = {f"{c.where} {c.key}" for c in CITATIONS if c.bare}
    assert {name: len(set(releases)) for name, releases in resolving.items()} == dict.fromkeys(bare, 1)


@pytest.mark.parametrize(("launcher", "release"), FILES)
def test_a_span_file_names_only_spans_cited(launcher: str, release: str) -> None:
    recorded = _recorded(launcher, release)
    ours = [c for c in CITATIONS if (c.launcher, c.release) == (launcher, release)]
    cited = {_full_key(c, recorded) for c in ours}
    stale = (recorded["spans"].keys() | recorded["unhashed"].keys()) - cited
    assert not stale, (
        f"{cited_spans.span_file(launcher, release).name} hashes spans nothing cites: {sorted(stale)}"
    )
    assert recorded["resolved"].keys() <= {c.key for c in ours if c.bare}
    assert (recorded["launcher"], recorded["version"], recorded["format"]) == (
        launcher,
        release,
        cited_spans.FORMAT,
    )


@pytest.mark.parametrize(("launcher", "release"), FILES)
def test_a_span_is_hashed_unless_its_source_could_not_be_had(launcher: str, release: str) -> None:
    """Wheels hold every cited file; only a symbol citation or a git source not at hand goes
    unhashed, with the reason."""
    recorded = _recorded(launcher, release)
    if recorded["source"]["kind"] == "wheel":
        assert recorded["unhashed"] == {}
    for key, why in recorded["unhashed"].items():
        assert why and ("cites a symbol" in why or "no hash" in why), key
    assert all(value.startswith("sha256:") and len(value) == 7 + 64 for value in recorded["spans"].values())


def test_the_span_hash_is_of_the_cited_lines_stripped_joined_in_order() -> None:
    text = "one\ntwo  \t\nthree\nfour\r\nfive\n"
    expected = hashlib.sha256(b"four\ntwo\nthree").hexdigest()
    assert cited_spans.span_hash(text, ((4, 4), (2, 3))) == f"sha256:{expected}"
    assert cited_spans.span_hash(text, ((2, 3), (4, 4))) != f"sha256:{expected}"


def test_a_span_past_the_end_of_the_file_has_no_hash() -> None:
    with pytest.raises(cited_spans.SpanError, match="outside the file's 3 lines"):
        cited_spans.span_hash("a\nb\nc", ((2, 4),))


def test_a_cite_names_its_ranges_or_none_for_a_symbol() -> None:
    assert Cite("r", "p.py", "117-118,134,186-289").ranges == ((117, 118), (134, 134), (186, 289))
    assert Cite("r", "p.py", "AllreduceOp::selectImplementation").ranges is None
    assert Cite("r", "p.py", "12-").ranges is None
    assert Cite("r", "a/p.py", "3-4").key == "a/p.py:3-4"


def test_check_names_the_spans_another_source_does_not_reproduce() -> None:
    old = {"m.py": "a\nb\nc\nd\n"}
    recorded = {
        "m.py:2-3": cited_spans.span_hash(old["m.py"], ((2, 3),)),
        "m.py:1": cited_spans.span_hash(old["m.py"], ((1, 1),)),
    }
    changed = cited_spans.check(recorded, {"m.py": "a\nB\nc\nd\n"})
    assert [item.key for item in changed] == ["m.py:2-3"]
    assert [item.why for item in cited_spans.check(recorded, {})] == ["m.py is not in the release"] * 2


OLD = {"pkg/m.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n"}


def test_relocation_unchanged_moved_changed_gone() -> None:
    relocate = span_relocation.relocate
    assert relocate("pkg/m.py:1-2", OLD, OLD).status == "unchanged"
    shifted = {"pkg/m.py": "import x\n\n" + OLD["pkg/m.py"]}
    moved = relocate("pkg/m.py:1-2,5-6", OLD, shifted)
    assert (moved.status, moved.where) == ("moved", "pkg/m.py:3-4,7-8")
    elsewhere = {"pkg/m.py": "", "pkg/n.py": "# moved\n" + OLD["pkg/m.py"]}
    assert relocate("pkg/m.py:5-6", OLD, elsewhere).where == "pkg/n.py:6-7"
    edited = {"pkg/m.py": OLD["pkg/m.py"].replace("return 2", "return 3")}
    changed = relocate("pkg/m.py:5-6", OLD, edited, ("r1", "r2"))
    assert changed.status == "changed"
    assert "-    return 2\n+    return 3" in changed.diff and "r1 pkg/m.py:5-6" in changed.diff
    assert relocate("pkg/m.py:1", OLD, {}).status == "gone"


def test_a_plugin_span_names_a_file_and_lines_or_continues_the_last_one() -> None:
    text = "at ``vllm/a.py:3-4``, ``:9`` and ``b.py:12``; not http://host:8000 or ``scripts/x.py``"
    found = [(m["path"], m["lines"]) for m in cited_spans._PLUGIN_SPAN.finditer(text)]
    assert found == [("vllm/a.py", "3-4"), (None, "9"), ("b.py", "12")]
