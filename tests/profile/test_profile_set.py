"""Profile sets: a directory of profiles, the member for this node chosen by fingerprint, fail closed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topo_gate
from topo_gate.cli import main
from topo_gate.launchers import PlanRequest, sglang_plan
from topo_gate.profile import Profile, dump_profile, load_profile
from topo_gate.profile.profile_set import choose_member
from topo_gate.profile.set_check import check_set

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
H200_X2 = PROFILES / "h200-x2" / "h7168-run1.yaml"
H200_X1 = PROFILES / "h200-x1" / "tp1-2.yaml"
EXAMPLE = PROFILES / "examples" / "synthetic-h200x2.yaml"


def fingerprint_of(path: Path) -> str:
    return load_profile(path).node.fingerprint


def tamper(member: Path) -> None:
    """Change the first rule's stated speedup in place, leaving the digest as it was."""
    text = member.read_text()
    line = next(line for line in text.splitlines() if line.strip().startswith("speedup: "))
    member.write_text(text.replace(line, line.split(":")[0] + ": 9.999", 1))


@pytest.fixture
def fleet_set(tmp_path: Path) -> Path:
    """Three node classes, one profile each, as a deployment repo would keep them."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    for source in (H200_X2, H200_X1, EXAMPLE):
        shutil.copy(source, folder / f"{source.parent.name}.yaml")
    (folder / "README.md").write_text("not a member: only *.yaml / *.yml are\n")
    return folder


@pytest.mark.parametrize("source", [H200_X2, H200_X1, EXAMPLE])
def test_the_member_for_this_node_decides(fleet_set, source):
    alone = topo_gate.gate(source, tp=2, nbytes=4096, fingerprint=fingerprint_of(source))
    in_set = topo_gate.gate(fleet_set, tp=2, nbytes=4096, fingerprint=fingerprint_of(source))
    assert (in_set.backend, in_set.rules, in_set.reason) == (alone.backend, alone.rules, alone.reason)
    if not alone.fallback:  # the single-GPU profile has no TP 2 decision: NCCL, alone or in the set
        assert in_set.profile_path == str(fleet_set / f"{source.parent.name}.yaml")


def test_the_fingerprint_may_come_from_the_environment(fleet_set, monkeypatch):
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", fingerprint_of(H200_X2))
    assert topo_gate.gate(fleet_set, tp=2, nbytes=4096).backend == "pcie_ipc"


def test_without_a_fingerprint_no_member_can_be_chosen(fleet_set):
    decision = topo_gate.gate(fleet_set, tp=2)
    assert decision.fallback and decision.backend == "nccl"
    assert "this node's fingerprint is needed to choose a member" in decision.reason


def test_no_member_for_this_node_is_nccl(fleet_set):
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint="sha256:" + "0" * 64)
    assert decision.fallback
    assert "none of its 3 profiles is for this node (fingerprint sha256:000000000000..." in decision.reason


def test_two_members_for_one_node_is_nccl_even_when_they_agree(fleet_set):
    shutil.copy(H200_X2, fleet_set / "copy.yml")
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint_of(H200_X2))
    assert decision.fallback
    assert "2 profiles are for this node (copy.yml, h200-x2.yaml): ambiguous" in decision.reason
    # The other node classes in the set are unaffected.
    assert not topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint_of(EXAMPLE)).fallback


def test_a_tampered_member_is_found_by_its_fingerprint_then_refused(fleet_set):
    member = fleet_set / "h200-x2.yaml"
    tamper(member)
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint_of(H200_X2))
    assert decision.fallback
    assert f"profile {member} unusable: digest:" in decision.reason


def test_a_fingerprint_line_that_lies_is_caught_by_the_full_check(fleet_set):
    """The index reads only the head; the member is verified in full before it decides anything."""
    member = fleet_set / "h200-x2.yaml"
    real, other = fingerprint_of(H200_X2), fingerprint_of(EXAMPLE)
    member.write_text(member.read_text().replace(real, other, 1))
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint=other)
    assert decision.fallback
    assert "2 profiles are for this node" in decision.reason  # the liar and the real one
    (fleet_set / "examples.yaml").unlink()
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint=other)
    assert decision.fallback and "digest" in decision.reason


def test_a_member_in_another_layout_is_indexed_by_parsing_it(fleet_set, tmp_path):
    member = fleet_set / "examples.yaml"
    member.write_text(json.dumps(load_profile(member).to_dict()))  # JSON is YAML too
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint_of(EXAMPLE))
    assert not decision.fallback and decision.profile_path == str(member)


def test_a_replaced_member_is_reindexed(fleet_set):
    fingerprint = fingerprint_of(H200_X2)
    assert not topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint).fallback
    replacement = fleet_set / "tmp.part"
    shutil.copy(H200_X1, replacement)
    os.replace(replacement, fleet_set / "h200-x2.yaml")  # an atomic update of the member
    (fleet_set / "h200-x1.yaml").unlink()
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint)
    assert decision.fallback and "none of its 2 profiles is for this node" in decision.reason


def test_a_configmap_mount_reads_through_its_symlinks(tmp_path):
    """Kubernetes mounts a ConfigMap as KEY -> ..data/KEY with ..data -> ..<timestamp>/."""
    mount = tmp_path / "profiles"
    (mount / "..2026_11_30_12_00_00.1").mkdir(parents=True)
    shutil.copy(H200_X2, mount / "..2026_11_30_12_00_00.1" / "h200-x2.yaml")
    (mount / "..data").symlink_to("..2026_11_30_12_00_00.1")
    (mount / "h200-x2.yaml").symlink_to("..data/h200-x2.yaml")
    assert topo_gate.gate(mount, tp=2, nbytes=4096, fingerprint=fingerprint_of(H200_X2)).backend == "pcie_ipc"
    assert [m.name for m in check_set(mount).members] == ["h200-x2.yaml"]


def test_an_unlistable_set_is_nccl_not_an_exception(tmp_path):
    assert choose_member(tmp_path / "gone", "sha256:" + "0" * 64).path is None
    decision = topo_gate.gate(tmp_path / "gone", tp=2, fingerprint="sha256:" + "0" * 64)
    assert decision.fallback and "no such file" in decision.reason


@settings(max_examples=30)
@given(contents=st.lists(st.binary(max_size=300), min_size=1, max_size=4))
def test_the_reader_never_raises_on_any_set(tmp_path_factory, contents):
    folder = tmp_path_factory.mktemp("set")
    for index, content in enumerate(contents):
        (folder / f"m{index}.yaml").write_bytes(content)
    decision = topo_gate.gate(folder, tp=2, fingerprint="sha256:" + "a" * 64)
    assert decision.backend == "nccl" and decision.fallback


#: On the bundled 2x H200 profile SGLang's plan for llama-3.1-70b, with the user's own
#: --disable-custom-all-reduce, has knobs: PCIe IPC measured faster than the NCCL the user left.
USER_ARGS = ("--disable-custom-all-reduce",)


def test_launcher_plans_follow_the_member_for_this_node(fleet_set):
    fingerprint = fingerprint_of(H200_X2)
    served = {"tp": 2, "model": "llama-3.1-70b", "user_args": USER_ARGS, "user_env": {}}
    alone = sglang_plan(PlanRequest(H200_X2, fingerprint=fingerprint, **served))
    in_set = sglang_plan(PlanRequest(fleet_set, fingerprint=fingerprint, **served))
    assert not in_set.fallback and in_set.env  # the control: a plan with knobs
    assert (in_set.args, in_set.env, in_set.estimate) == (alone.args, alone.env, alone.estimate)
    assert f"using profile set {fleet_set}: h200-x2.yaml" in in_set.notes
    foreign = sglang_plan(PlanRequest(fleet_set, fingerprint="sha256:" + "0" * 64, **served))
    assert foreign.fallback and "none of its 3 profiles is for this node" in foreign.reason
    assert (foreign.args, dict(foreign.env)) == ((), {})  # the launcher's default: nothing changed
    forced = sglang_plan(PlanRequest(fleet_set, fingerprint="sha256:" + "0" * 64, fallback="nccl", **served))
    assert forced.fallback and "--enforce-disable-flashinfer-allreduce-fusion" in forced.args


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
class TestValidateSet:
    def test_a_good_set(self, capsys, fleet_set):
        code, out, err = run(capsys, "validate", str(fleet_set))
        assert (code, err) == (0, "")
        assert out.splitlines()[-1] == f"OK {fleet_set}: profile set of 3, one per fingerprint"

    def test_a_duplicate_is_named(self, capsys, fleet_set):
        data = load_profile(H200_X2)
        dump_profile(
            data.__class__(**{**data.__dict__, "created": "2027-01-01T00:00:00Z"}), fleet_set / "b.yaml"
        )
        code, _, err = run(capsys, "validate", str(fleet_set))
        assert code == 1 and err.count("\n") == 1
        assert "duplicate: b.yaml, h200-x2.yaml choose the same backends at the same sizes" in err

    def test_two_runs_with_the_same_choices_are_duplicates(self, capsys, tmp_path):
        """Two runs with the same ladders and slightly different measured numbers."""
        again = json.loads(json.dumps(load_profile(H200_X2).to_dict()))
        del again["measurements"]  # the other run's own price table would be other numbers too
        for decision in again["decisions"]:
            for rule in decision["rules"]:
                # Every figure of a rule moves together: a CI must still contain its speedup.
                for figures in (rule, *rule.get("alternatives", ())):
                    _scale_figures(figures, 0.99)
        shutil.copy(H200_X2, tmp_path / "run1.yaml")
        dump_profile(Profile.from_dict(again), tmp_path / "run2.yaml")
        code, _, err = run(capsys, "validate", str(tmp_path))
        assert code == 1
        assert "duplicate: run1.yaml, run2.yaml choose the same backends" in err

    def test_the_two_bundled_runs_are_a_conflict(self, capsys):
        """The bundled 2x H200 runs agree on 27 of 28 sizes but not on 224 KiB: not duplicates."""
        code, _, err = run(capsys, "validate", str(PROFILES / "h200-x2"))
        assert code == 1
        assert "conflict: h7168-run1.yaml, h7168-run2.yaml decide differently for fingerprint" in err

    def test_a_conflict_is_named(self, capsys, fleet_set):
        other = load_profile(H200_X2.with_name("h7168-run2.yaml"))
        run2 = json.loads(json.dumps(other.to_dict()))
        del run2["measurements"]  # 20 KiB is no size its price table measured
        run2["decisions"][0]["rules"][0]["max_bytes"] = 20480  # pcie_ipc up to 20 KiB, not 28 KiB
        dump_profile(Profile.from_dict(run2), fleet_set / "run2.yaml")
        code, _, err = run(capsys, "validate", str(fleet_set))
        assert code == 1
        assert "conflict: h200-x2.yaml, run2.yaml decide differently for fingerprint" in err

    def test_an_invalid_member_is_named(self, capsys, fleet_set):
        (fleet_set / "broken.yaml").write_text("schema: topo-gate/profile/v1\n")
        code, out, err = run(capsys, "validate", "--json", str(fleet_set))
        assert code == 1
        report = json.loads(out)
        assert [m["name"] for m in report["members"] if m["problem"]] == ["broken.yaml"]
        assert "broken.yaml: invalid: created: missing" in err

    def test_an_empty_set_is_not_ok(self, capsys, tmp_path):
        code, _, err = run(capsys, "validate", str(tmp_path))
        assert code == 1 and "no profiles (*.yaml, *.yml) in the set" in err


def test_a_kept_answer_is_dropped_when_the_set_changes(fleet_set):
    fingerprint = fingerprint_of(H200_X2)
    assert not topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint).fallback
    shutil.copy(H200_X2, fleet_set / "second.yaml")  # a new member: the directory changes
    assert "ambiguous" in topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint).reason
    (fleet_set / "second.yaml").unlink()
    assert not topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint).fallback
    chosen = fleet_set / "h200-x2.yaml"
    tamper(chosen)  # in place
    assert "digest" in topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint).reason


REPORTER = (
    "import json, os, sys; print(json.dumps([sys.argv[1:], "
    "{k: v for k, v in os.environ.items() if k.startswith('SGLANG_')}]))"
)


@pytest.mark.slow
def test_exec_reads_the_node_and_follows_its_member_of_the_set(fleet_set, tmp_path):
    """The real path: the node read from the 2x H200's own recorded NVML capture picks its member."""
    evidence = json.loads((PROFILES / "h200-x2" / "h7168-run1.evidence.json").read_text(encoding="utf-8"))
    capture = tmp_path / "h200-x2.capture.json"
    capture.write_text(json.dumps(evidence["node"]["capture"]), encoding="utf-8")
    reporter = tmp_path / "reporter.py"
    reporter.write_text(REPORTER)
    argv = ["--launcher", "sglang", "--model", "llama-3.1-70b", "--from", str(capture), "--"]
    argv += [sys.executable, str(reporter), "--tp-size", "2", *USER_ARGS]
    in_set = subprocess.run(
        [sys.executable, "-m", "topo_gate", "exec", "--profile", str(fleet_set), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    alone = subprocess.run(
        [sys.executable, "-m", "topo_gate", "exec", "--profile", str(H200_X2), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert in_set.returncode == 0 and alone.returncode == 0, in_set.stderr
    assert "FALLBACK" not in in_set.stderr
    assert json.loads(in_set.stdout) == json.loads(alone.stdout)
    assert json.loads(in_set.stdout)[1]["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "1"  # the plan, not nothing
    (fleet_set / "h200-x2.yaml").unlink()
    without = subprocess.run(
        [sys.executable, "-m", "topo_gate", "exec", "--profile", str(fleet_set), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert without.returncode == 0
    assert "FALLBACK" in without.stderr and "none of its 2 profiles is for this node" in without.stderr
    assert json.loads(without.stdout) == [["--tp-size", "2", *USER_ARGS], {}]  # CMD as given


def _scale_figures(figures: dict, factor: float) -> None:
    """Scale a rule's (or an alternative's) speedup, CI and in-context figure, as a re-run might."""
    for key in ("speedup", "in_context"):
        if figures.get(key) is not None:
            figures[key] = round(figures[key] * factor, 3)
    if figures.get("ci") is not None:
        figures["ci"] = [round(bound * factor, 3) for bound in figures["ci"]]


def _mimic(member: Path, fingerprint: str) -> None:
    """Rewrite ``member`` (sealed again) with a hand-written multi-line ``created`` whose lines read
    ``node:`` / ``  fingerprint: <fingerprint>`` at the top of the file; its real field is unchanged."""
    from topo_gate.profile.digest import DIGEST_KEY, compute_digest
    from topo_gate.profile.yaml_format import parse_yaml

    text = member.read_text()
    created = next(line for line in text.splitlines() if line.startswith("created: "))
    text = text.replace(created, f'created: "2026-11-30T08:00:00Z\nnode:\n  fingerprint: {fingerprint}\n"', 1)
    data = parse_yaml(text)
    old_digest = data[DIGEST_KEY]
    new_digest = compute_digest({key: value for key, value in data.items() if key != DIGEST_KEY})
    member.write_text(text.replace(f"digest: {old_digest}\n", f"digest: {new_digest}\n"))
    assert load_profile(member).node.fingerprint != fingerprint  # valid, sealed, for its own node


def test_text_that_only_looks_like_a_fingerprint_is_not_the_members(fleet_set, capsys) -> None:
    """The index reads the parsed ``node.fingerprint`` field, as ``validate DIR`` does: a member for
    another node class whose ``created`` mimics this node's fingerprint line does not make this
    node's lookups ambiguous."""
    mimic = fleet_set / "examples.yaml"
    _mimic(mimic, fingerprint_of(H200_X2))
    assert mimic.read_text().startswith(
        'schema: topo-gate/profile/v1.3\ncreated: "2026-11-30T08:00:00Z\nnode:\n'
    )
    assert main(["validate", str(fleet_set)]) == 0
    capsys.readouterr()
    decision = topo_gate.gate(fleet_set, tp=2, fingerprint=fingerprint_of(H200_X2))
    assert not decision.fallback and decision.profile_path == str(fleet_set / "h200-x2.yaml")
    assert choose_member(fleet_set, fingerprint_of(EXAMPLE)).path == str(mimic)


def test_validate_ok_means_every_members_lookup_finds_it(fleet_set) -> None:
    _mimic(fleet_set / "examples.yaml", fingerprint_of(H200_X1))
    report = check_set(fleet_set)
    assert report.ok
    for member in report.members:
        assert choose_member(fleet_set, member.fingerprint).path == str(fleet_set / member.name)


FP = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            f"schema: x\nnode:\n  hardware: {{gpus: [1, 2]}}\n  fingerprint: {FP}\n",
            FP,
        ),  # after a nested value
        (f'{{"schema": "x", "node": {{"fingerprint": "{FP}"}}}}', FP),  # JSON
        (f"a: &n {{fingerprint: {FP}}}\nnode: *n\n", "full parse"),  # an alias: the full parse decides
        (f"- node: {{fingerprint: {FP}}}\n", None),  # a top level that is no mapping
        (f"node: {FP}\n", None),  # no mapping under node
        (f"node:\n  fingerprint: [{FP}]\n", None),  # no scalar
        ("node:\n  fingerprint: sha256:short\n", None),  # no fingerprint's shape
        (f"other: {{node: {{fingerprint: {FP}}}}}\n", None),  # not at the top
        (f"node:\n  fingerprint: {FP}\n  fingerprint: {FP}\n", FP),  # the loader refuses duplicates later
    ],
)
def test_the_index_reads_the_field_as_the_parser_does(tmp_path, text, expected) -> None:
    from topo_gate.profile.profile_set import _read_fingerprint
    from topo_gate.profile.yaml_format import parse_yaml

    member = tmp_path / "m.yaml"
    member.write_text(text)
    if expected == "full parse":
        try:
            data = parse_yaml(text)
            expected = data["node"]["fingerprint"]
        except Exception:  # noqa: BLE001 -- the profile loader refuses aliases: no fingerprint then
            expected = None
    assert _read_fingerprint(str(member)) == expected
