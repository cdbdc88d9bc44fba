"""The developers' own pre-commit hooks (``.pre-commit-config.yaml``) check what CI checks.

pre-commit reads the file as its schema says (``pre-commit validate-config``); the ruff it installs is
the version the ``[test]`` extra pins, over the folders ``.ci/run`` lints; and the opt-in fast-tests
hook runs the fast loop the README documents.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / ".pre-commit-config.yaml"


def _hooks() -> dict[str, dict]:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    return {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}


def test_pre_commit_reads_the_config() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", str(CONFIG)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_ruff_hooks_are_cis_ruff_over_cis_folders() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pinned = re.search(r'"(ruff==[^"]+)"', pyproject)
    assert pinned is not None
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    folders = re.search(r"^ruff check (.+)$", ci, re.M)
    assert folders is not None
    hooks = _hooks()
    for name, entry in (("ruff", "ruff check"), ("ruff-format", "ruff format")):
        assert hooks[name]["entry"] == entry
        assert hooks[name]["additional_dependencies"] == [pinned[1]]
        assert hooks[name]["files"] == f"^({'|'.join(folders[1].split())})/"


def test_the_fast_tests_hook_is_the_readmes_fast_loop_and_opt_in() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    hook = _hooks()["fast-tests"]
    assert f"{hook['entry']}  " in readme  # the documented command, as the README's code block shows it
    assert "pre-commit" not in hook["stages"]  # never on every commit: it takes a minute
