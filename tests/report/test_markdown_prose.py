"""Text from a file inside the prose of ``summary.md`` (a skipped reason in the launchers' outlook, a
report label): every word GitHub would act on after Markdown -- an @-mention, a #reference, an emoji
code, a bare URL -- is an inert code span, and the words around it stay readable prose
(topo_gate/report/inert.py ``markdown_prose``, outlook.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.profile import compute_digest
from topo_gate.profile.yaml_format import parse_yaml, to_yaml
from topo_gate.report.figures import file_stem
from topo_gate.report.inert import markdown_prose

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
# What GitHub acts on outside a code span.
ACTIVE = re.compile(r"@\w|#\d|:[a-z0-9_+-]+:|https?://|www\.", re.IGNORECASE)
HOSTILE = "@everyone see [here](https://evil.example) :shipit: #1 www.evil.example <b>x</b>"


@pytest.mark.parametrize(
    ("word", "inert"),
    [
        ("@everyone", "`@everyone`"),
        ("me@example.org", "`me@example.org`"),
        ("#12", "`#12`"),
        (":shipit:", "`:shipit:`"),
        ("https://evil.example", "`https://evil.example`"),
        ("www.evil.example", "`www.evil.example`"),
        # Just outside: nothing GitHub acts on, so plain (escaped) prose.
        (":shipit", ":shipit"),
        ("https:evil", "https:evil"),
        ("wwwevil", "wwwevil"),
        ("measured:", "measured:"),
        ("[here](x)", "\\[here\\](x)"),
        ("<b>", "\\<b\\>"),
    ],
)
def test_a_word_github_acts_on_is_a_code_span_and_any_other_is_escaped_prose(word: str, inert: str) -> None:
    assert markdown_prose(word) == inert
    assert markdown_prose(f"TP 4 was skipped: {word} here") == f"TP 4 was skipped: {inert} here"


def test_file_stems_of_names_that_differ_only_in_spelling_differ() -> None:
    assert file_stem("ab-AB x", "AB x") != file_stem("ab-ab-x", "ab-x")
    assert file_stem("ab-ab-x", "ab-x") == "ab-ab-x"


def test_a_skipped_reason_and_a_label_stay_inert_in_the_summary(tmp_path: Path, capsys) -> None:
    data = parse_yaml(PROFILE.read_text())
    data["skipped"] = [{"tp": 4, "reason": HOSTILE}]
    data.pop("digest")
    path = tmp_path / "@everyone [x](https:evil.example) :shipit:.yaml"
    path.write_text(to_yaml({**data, "digest": compute_digest(data)}))
    out = tmp_path / "r"
    assert main(["report", str(path), "--out", str(out), "--format", "md"]) == 0, capsys.readouterr()
    summary = (out / "summary.md").read_text()
    assert "@everyone" in summary and ":shipit:" in summary  # shown...
    assert not ACTIVE.search(CODE_SPAN.sub("", summary)), CODE_SPAN.sub("", summary)  # ...never live
