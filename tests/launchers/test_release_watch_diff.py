"""The release watch's pure parts, on values written here: what its manifest diff names, which
registry versions count as newer, and that a report flags a release only for what changes routing
(scripts/release_watch.py; its run on real wheels is tests/launchers/test_release_watch.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
_spec = importlib.util.spec_from_file_location("release_watch", SCRIPTS / "release_watch.py")
assert _spec is not None and _spec.loader is not None
watch = importlib.util.module_from_spec(_spec)
sys.modules["release_watch"] = watch  # its dataclasses look their module up there
_spec.loader.exec_module(watch)


def test_diff_names_added_removed_and_changed_entries() -> None:
    old = {"env": {"A": {"default": 1}, "B": {}}, "sets": {"breakable": ["X", "Y"]}}
    new = {"env": {"A": {"default": 2}, "C": {}}, "sets": {"breakable": ["Y", "Z"]}}
    assert list(watch.diff(old, new)) == [
        "- `env.A.default`: 1 -> 2",
        "- removed `env.B` (was {})",
        "- added `env.C`: {}",
        "- `sets.breakable`: added `Z`",
        "- `sets.breakable`: removed `X`",
    ]
    assert list(watch.diff(old, old)) == []


def test_a_long_value_is_cut() -> None:
    (line,) = watch.diff({"t": [1]}, {"t": list(range(200))})
    assert line.endswith("...") and len(line) < watch.SHOWN_CHARS + 20


def test_only_final_releases_above_the_baseline_are_newer() -> None:
    assert [
        v for v in ("0.7.4", "0.7.2", "0.8.0rc1", "0.7.2.post1", "bogus") if watch._newer(v, "0.7.2.post1")
    ] == ["0.7.4"]


def test_a_release_is_flagged_only_for_route_relevant_sections() -> None:
    quiet = [watch.Section("Cited spans", ["- 3 spans: 1 unchanged, 2 moved"])]
    loud = [*quiet, watch.Section("Conformance", ["- conformance not run: why"], relevant=True)]
    report = watch.render({"vllm": [("0.35.0", quiet), ("0.36.0", loud)]}, {"vllm": "0.34.0"})
    assert "### vllm 0.35.0: nothing route-relevant changed" in report
    assert "### vllm 0.36.0: route-relevant changes in: Conformance" in report
    assert "#### Conformance (route-relevant)" in report


DATA = Path(__file__).resolve().parents[2] / "topo_gate" / "launchers" / "data"


def test_git_pinned_spans_are_checked_in_a_newer_source_or_listed_to_re_read(tmp_path: Path) -> None:
    header = tmp_path / "cpp/tensorrt_llm/common/customAllReduceUtils.h"
    header.parent.mkdir(parents=True)
    header.write_text("// a newer header\n" * 300, encoding="utf-8")
    checked = watch.git_pinned_section("trtllm", "git-f6a156b", [f"abc1234={tmp_path}"])
    assert checked.relevant
    assert checked.lines[0] == "- 3 of 3 hashed spans checked in the source given (abc1234); 3 changed"
    listed = watch.git_pinned_section("trtllm", "git-f6a156b", [])
    assert not listed.relevant
    spans = json.loads((DATA / "spans-trtllm-git-f6a156b.json").read_text(encoding="utf-8"))
    hashed_and_symbols = len(spans["spans"]) + len(spans["unhashed"])
    assert sum(line.startswith("- re-read by hand:") for line in listed.lines) == hashed_and_symbols
    assert ("torch", "git-09a6d12") in watch.git_pinned()
