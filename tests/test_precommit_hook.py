"""The pre-commit hook deployment repos use (``.pre-commit-hooks.yaml``), run for real.

``pre-commit try-repo`` installs this checkout into a fresh environment of its own (pip, with the
runtime dependencies from the package index) and runs the hook in a throwaway deployment repo, as
``pre-commit run`` would there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from topo_gate.profile.yaml_format import parse_yaml, to_yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
GOOD = REPO / "profiles" / "examples" / "synthetic-h200x2.yaml"


def _deployment_repo(root: Path) -> Path:
    """A git repo with one good, one tampered and one unsealed profile, and YAML that is no profile."""
    profiles = root / "profiles"
    profiles.mkdir(parents=True)
    shutil.copyfile(GOOD, profiles / "good.yaml")
    data = parse_yaml(GOOD.read_text(encoding="utf-8"))
    data["decisions"][0]["rules"][0]["speedup"] *= 2  # a hand edit; the recorded digest stays
    (profiles / "tampered.yaml").write_text(to_yaml(data), encoding="utf-8")
    del data["digest"]
    (profiles / "unsealed.yaml").write_text(to_yaml(data), encoding="utf-8")
    (root / "service.yaml").write_text("replicas: 2\n", encoding="utf-8")  # outside profiles/
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    return root


def _try_repo(deploy: Path, home: Path, *files: str) -> subprocess.CompletedProcess[str]:
    selection = ["--files", *files] if files else ["--all-files"]
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "topo-gate-validate", "--verbose"]
        + selection,
        cwd=deploy,
        env={**os.environ, "PRE_COMMIT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_the_readme_config_names_the_hook_this_repo_provides() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Checking profiles on commit", 1)[1].split("\n## ", 1)[0]
    config = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    provided = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert [hook["id"] for hook in config["repos"][0]["hooks"]] == [provided[0]["id"]]
    assert provided[0]["entry"] == "topo-gate validate" and provided[0]["language"] == "python"


@pytest.mark.slow
def test_the_hook_fails_on_tampered_and_unsealed_profiles_and_passes_a_good_one(tmp_path: Path) -> None:
    deploy, home = _deployment_repo(tmp_path / "deploy"), tmp_path / "pre-commit-home"
    everything = _try_repo(deploy, home)
    output = everything.stdout + everything.stderr
    assert everything.returncode == 1, output
    assert "OK profiles/good.yaml: schema v1.3" in output
    assert "topo-gate: error: profiles/tampered.yaml: digest: the content hashes to" in output
    assert "topo-gate: error: profiles/unsealed.yaml: digest: missing" in output
    assert "service.yaml" not in output
    good_only = _try_repo(deploy, home, "profiles/good.yaml")
    assert good_only.returncode == 0, good_only.stdout + good_only.stderr
