"""cmdline reads each command line of the corpus as recorded there.

The recorded readings are the pinned launchers' own: scripts/cmdline_agreement.py (run by
scripts/launcher_parsers.sh) parses every case with SGLang 0.5.23's and vLLM 0.33.0's real parsers
and fails where they and cmdline disagree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from topo_gate.launchers.command import parse as cmdline

CORPUS = yaml.safe_load((Path(__file__).parent / "cmdline" / "corpus.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CORPUS, ids=[case["id"] for case in CORPUS])
def test_corpus_case(case: dict, tmp_path: Path) -> None:
    for name, text in (case.get("files") or {}).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    argv = [token.replace("{dir}", str(tmp_path)) for token in case["argv"]]
    launcher = cmdline.find_entry(argv).launcher
    if "error" in case:
        with pytest.raises(cmdline.CmdlineError) as refused:
            cmdline.tp_size(launcher, argv)
            cmdline.user_knobs(launcher, argv, {})
        assert case["error"].lower() in str(refused.value).lower()
        assert "\n" not in str(refused.value)
        return
    assert cmdline.tp_size(launcher, argv) == case.get("tp")
    assert list(cmdline.user_knobs(launcher, argv, {}).args) == case.get("knobs", [])
    assert list(cmdline.parse(launcher, argv).unrecognized) == case.get("unrecognized", [])


def test_the_corpus_covers_every_kind_of_line() -> None:
    kinds = {
        "abbreviation": lambda c: any(
            t in ("--tensor-parallel", "--tp-siz", "--disable-custom") for t in c["argv"]
        ),
        "underscores": lambda c: any(t.startswith("--") and "_" in t.split(".")[0] for t in c["argv"]),
        "equals": lambda c: any(t.startswith("-") and "=" in t for t in c["argv"]),
        "repeated": lambda c: "repeated" in c["id"],
        "ambiguous": lambda c: c.get("error") == "ambiguous",
        "config file": lambda c: bool(c.get("files")),
        "dotted": lambda c: "dotted" in c["id"],
    }
    for launcher in ("vllm", "sglang"):
        mine = [c for c in CORPUS if c["id"].startswith(launcher)]
        wanted = [kind for kind in kinds if kind != "dotted" or launcher == "vllm"]  # dotted: vLLM's only
        missing = [kind for kind in wanted if not any(map(kinds[kind], mine))]
        assert not missing, f"{launcher}: no corpus case of {missing}"
