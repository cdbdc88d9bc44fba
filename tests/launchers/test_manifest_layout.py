"""scripts/extract_knobs.py writes a manifest in the layout of the file it replaces: re-extracting an
unchanged release rewrites no byte of topo_gate/launchers/data/ (it once rewrote SGLang's in another
layout, a 5,000-line diff of formatting alone). With the releases' files at hand,
tests/launchers/test_manifests_current.py re-runs the real extraction the same way."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "topo_gate" / "launchers" / "data"
SCRIPT = REPO / "scripts" / "extract_knobs.py"
sys.path.insert(0, str(SCRIPT.parent))  # it imports its sibling extract_route_tables, as when run
_spec = importlib.util.spec_from_file_location("extract_knobs", SCRIPT)
assert _spec is not None and _spec.loader is not None
extract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(extract)

MANIFESTS = sorted(DATA.glob("knobs-*.json"))


@pytest.mark.parametrize("committed", MANIFESTS, ids=lambda p: p.name)
@pytest.mark.parametrize("with_options", [True, False], ids=["options-given", "options-kept"])
def test_rewriting_a_committed_manifest_changes_no_byte(
    committed: Path, with_options: bool, tmp_path
) -> None:
    out = tmp_path / committed.name
    shutil.copyfile(committed, out)
    document = json.loads(committed.read_text(encoding="utf-8"))
    if not with_options:  # what the source extraction hands over: the parser table is the file's
        document.pop("all_options", None)
    extract.write_manifest(out, document)
    assert out.read_bytes() == committed.read_bytes()


def test_both_committed_layouts_are_covered() -> None:
    # SGLang's table is expanded, vLLM's one action per line: the test above holds for each.
    layouts = {p.name: extract.committed_layout(p.read_text(encoding="utf-8")) for p in MANIFESTS}
    assert layouts["knobs-vllm-0.33.0.json"] is True
    assert layouts["knobs-sglang-0.5.23.json"] is False


def test_a_new_manifest_gets_the_plain_layout(tmp_path) -> None:
    document = {
        "format": "topo-gate/knobs/v1",
        "all_options": {"actions": [{"dest": "a", "options": ["--a"]}]},
    }
    out = tmp_path / "knobs-x-1.json"
    extract.write_manifest(out, document)
    assert out.read_text(encoding="utf-8") == json.dumps(document, indent=1) + "\n"


def test_a_changed_table_is_written_in_the_files_layout(tmp_path) -> None:
    committed = DATA / "knobs-vllm-0.33.0.json"
    out = tmp_path / committed.name
    shutil.copyfile(committed, out)
    document = json.loads(committed.read_text(encoding="utf-8"))
    document["all_options"]["actions"].append({"dest": "new", "options": ["--new"], "negative": []})
    extract.write_manifest(out, document)
    old, new = committed.read_text().splitlines(), out.read_text().splitlines()
    assert len(new) == len(old) + 1  # one action, one line
    assert '   {"dest": "new", "options": ["--new"], "negative": []}' in new
