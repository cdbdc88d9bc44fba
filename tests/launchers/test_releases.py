"""Which modelled release plans for the release a user runs: ``releases.resolve`` at each boundary,
and what a plan made for an unmodelled release does (nothing, saying both releases)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from topo_gate._version import __version__
from topo_gate.launchers import PlanRequest, knobs, vllm_plan
from topo_gate.launchers.command.releases import (
    ALLOW_ENV,
    EQUIVALENT,
    Installed,
    installed_here,
    modelled_words,
    public_version,
    resolve,
)

NEWEST_VLLM = knobs.releases_of("vllm")[-1]
NEWEST_FI = knobs.releases_of("flashinfer")[-1]
PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "h200-x2" / "h7168-run1.yaml"


def vllm(version: str | None, flashinfer: str | None = NEWEST_FI) -> Installed:
    return Installed({"vllm": version, "flashinfer": flashinfer}, "in the test's interpreter")


@pytest.mark.parametrize(
    ("version", "public"),
    [("0.34.0+cu129", "0.34.0"), ("0.33.0", "0.33.0"), (" 0.33.0 ", "0.33.0"), ("0.34.0rc1", "0.34.0rc1")],
)
def test_versions_compare_on_their_public_part(version: str, public: str) -> None:
    assert public_version(version) == public


@pytest.mark.parametrize("release", knobs.releases_of("vllm"))
def test_every_modelled_release_plans_with_its_own_model(release: str) -> None:
    resolution = resolve("vllm", vllm(release), environ={})
    assert (resolution.release, resolution.refusal, resolution.notes) == (release, None, ())


def test_a_local_build_label_is_the_same_release() -> None:
    resolution = resolve("vllm", vllm(f"{NEWEST_VLLM}+cu129"), environ={})
    assert resolution.release == NEWEST_VLLM
    assert resolution.describe() == f"vLLM {NEWEST_VLLM}"


def test_an_unmodelled_release_is_refused_naming_both_releases_and_the_way_out() -> None:
    resolution = resolve("vllm", vllm("0.35.0"), environ={})
    assert resolution.release is None
    releases = knobs.releases_of("vllm")
    listed = ", ".join(releases[:-1]) + " and " + releases[-1] if len(releases) > 1 else releases[0]
    assert modelled_words("vllm") == listed
    assert resolution.refusal is not None
    assert resolution.refusal.startswith(
        f"vLLM 0.35.0 installed; topo-gate {__version__} models vLLM {listed}: "
    )
    assert resolution.refusal.endswith(
        f"upgrade topo-gate, or {ALLOW_ENV}=0.35.0 to plan with the {NEWEST_VLLM} model at your own risk"
    )
    assert resolution.describe() == f"vLLM {NEWEST_VLLM} (installed: 0.35.0)"


@pytest.mark.parametrize("version", ["0.32.9", "0.33.1", "0.34.0rc1", "0.34.0.post1", "1.0.0"])
def test_a_neighbour_of_a_modelled_release_is_not_it(version: str) -> None:
    assert resolve("vllm", vllm(version), environ={}).refusal is not None


@pytest.mark.parametrize("allowed", ["0.35.0", "0.35.0+cu129", "0.33.0, 0.35.0", " 0.35.0 "])
def test_the_override_plans_with_the_newest_model_and_warns(allowed: str) -> None:
    resolution = resolve("vllm", vllm("0.35.0"), environ={ALLOW_ENV: allowed})
    assert (resolution.release, resolution.override, resolution.refusal) == (NEWEST_VLLM, "0.35.0", None)
    assert resolution.notes[0] == (
        f"warning: {ALLOW_ENV}: vLLM 0.35.0 planned with the {NEWEST_VLLM} model at your own risk"
    )


@pytest.mark.parametrize("allowed", ["", "0.35", "0.35.1", "vllm==0.35.0", ","])
def test_an_override_naming_another_release_lets_nothing_through(allowed: str) -> None:
    resolution = resolve("vllm", vllm("0.35.0"), environ={ALLOW_ENV: allowed})
    assert resolution.release is None and resolution.override is None


def test_an_unreadable_release_plans_with_the_newest_model_and_a_warning() -> None:
    resolution = resolve("vllm", Installed(problem="vllm on PATH is a shell script"), environ={})
    assert resolution.release == NEWEST_VLLM and resolution.refusal is None
    assert resolution.notes == (
        "warning: the installed vLLM release could not be read (vllm on PATH is a shell script): "
        f"planned with the vLLM {NEWEST_VLLM} model",
    )


def test_an_unreadable_release_is_refused_under_strict() -> None:
    resolution = resolve("vllm", Installed(problem="timed out"), strict=True, environ={})
    assert resolution.release is None
    assert resolution.refusal == "the installed vLLM release could not be read (timed out) (--strict)"


def test_a_launcher_not_installed_where_it_runs_warns_and_strict_refuses() -> None:
    loose = resolve("vllm", vllm(None), environ={})
    assert loose.release == NEWEST_VLLM
    assert loose.notes == (
        f"warning: vLLM is not installed in the test's interpreter: planned with the vLLM {NEWEST_VLLM} model",
    )
    strict = resolve("vllm", vllm(None), strict=True, environ={})
    assert strict.refusal == "vLLM is not installed in the test's interpreter (--strict)"


def test_flashinfer_is_matched_for_the_launchers_that_read_its_table() -> None:
    assert resolve("vllm", vllm(NEWEST_VLLM, "0.8.0"), environ={}).refusal.startswith(
        "FlashInfer 0.8.0 installed"
    )
    no_fi = resolve("vllm", vllm(NEWEST_VLLM, None), environ={})
    assert no_fi.flashinfer == NEWEST_FI and no_fi.notes[0].startswith("warning: FlashInfer is not installed")
    assert resolve("vllm", vllm(NEWEST_VLLM, None), strict=True, environ={}).refusal is not None


def test_flashinfer_is_not_asked_of_tensorrt_llm() -> None:
    release = knobs.releases_of("trtllm")[-1]
    resolution = resolve("trtllm", Installed({"trtllm": release, "flashinfer": "0.8.0"}), environ={})
    assert (resolution.release, resolution.refusal) == (release, None)


def test_a_reviewed_equivalent_release_plans_with_the_model_it_equals_and_says_so() -> None:
    (installed, modelled), *_ = EQUIVALENT["flashinfer"].items()
    resolution = resolve("vllm", vllm(NEWEST_VLLM, installed), environ={})
    assert resolution.flashinfer == modelled
    assert resolution.notes == (
        f"FlashInfer {installed} plans with the {modelled} model (route-equivalent, reviewed)",
    )


def test_every_equivalent_release_points_at_a_modelled_one() -> None:
    for name, table in EQUIVALENT.items():
        for installed, modelled in table.items():
            assert modelled in knobs.releases_of(name)
            assert installed not in knobs.releases_of(name)


def test_the_override_for_flashinfer_is_recorded_with_the_launchers() -> None:
    resolution = resolve("vllm", vllm("0.35.0", "0.8.0"), environ={ALLOW_ENV: "0.35.0,0.8.0"})
    assert resolution.override == "0.35.0,0.8.0"
    assert [note.split(":")[1].strip() for note in resolution.notes] == [ALLOW_ENV, ALLOW_ENV]


def test_nothing_read_plans_for_the_newest_without_a_note() -> None:
    resolution = resolve("sglang", None, strict=True, environ={})
    assert (resolution.release, resolution.refusal, resolution.notes) == (knobs.PINNED["sglang"], None, ())


def test_installed_here_reads_distribution_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "vllm-0.35.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.35.0\n", encoding="utf-8")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    found = installed_here(("vllm", "sglang"))
    assert found.versions == {"vllm": "0.35.0", "sglang": None}
    # Read from metadata: nothing is imported.
    assert not any(name == "vllm" or name.startswith("vllm.") for name in sys.modules)


def test_a_plan_for_an_unmodelled_release_changes_nothing_and_names_both() -> None:
    plan = vllm_plan(
        PlanRequest(PROFILE, tp=2, model="llama-3-70b", trust_unverified_node=True, installed=vllm("0.35.0"))
    )
    assert plan.fallback and (plan.args, dict(plan.env)) == ((), {})
    assert plan.reason.startswith("vLLM 0.35.0 installed;")
    assert plan.release_name() == f"vLLM {NEWEST_VLLM} (installed: 0.35.0)"
    assert plan.to_dict()["release"]["installed"] == "0.35.0"


def test_under_fallback_nccl_an_unmodelled_release_forces_nccl() -> None:
    request = PlanRequest(
        PROFILE, tp=2, fallback="nccl", trust_unverified_node=True, installed=vllm("0.35.0")
    )
    plan = vllm_plan(request)
    assert plan.fallback and "VLLM_ALLREDUCE_USE_FLASHINFER" in plan.env


def test_a_plan_names_the_release_it_modelled() -> None:
    plan = vllm_plan(PlanRequest(PROFILE, tp=2, model="llama-3-70b", trust_unverified_node=True))
    assert not plan.fallback
    assert plan.release is not None and plan.release.release == NEWEST_VLLM
    assert plan.release_name() == f"vLLM {NEWEST_VLLM}"
