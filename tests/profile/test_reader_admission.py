"""admit(): the profile read and verified once for a TP group, then each pattern's and size's Decision
from it -- the answer gate() gives for the same question, with nothing read or verified again."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from topo_gate.profile import Admission, admit, gate, load_profile, reader

KiB, MiB = 1024, 1024 * 1024
OTHER_NODE = "sha256:" + "1" * 64
SIZES = (None, 0, 448 * KiB, 448 * KiB + 1, MiB, 10**12)


@pytest.fixture
def fingerprint(example_data: dict) -> str:
    return example_data["node"]["fingerprint"]


@pytest.fixture
def tampered(example_data: dict, write_profile) -> Path:
    path = write_profile(example_data)
    path.write_text(path.read_text(encoding="utf-8").replace("448", "449", 1), encoding="utf-8")
    return path


@pytest.fixture
def profile_set(example_path: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "set"
    folder.mkdir()
    shutil.copy(example_path, folder / "h200.yaml")
    return folder


def _sources(example_path: Path, tampered: Path, profile_set: Path, tmp_path: Path) -> dict[str, object]:
    sealed = load_profile(example_path)
    return {
        "file": example_path,
        "text path": str(example_path),
        "set": profile_set,
        "object": sealed,
        "object, content changed": dataclasses.replace(sealed, created="2000-01-01T00:00:00Z"),
        "missing": tmp_path / "absent.yaml",
        "tampered": tampered,
        "not a path": 42,
    }


OPTIONS = {
    "verified": {"fingerprint": "HERE"},
    "another node": {"fingerprint": OTHER_NODE},
    "unverified": {},
    "trusted unverified": {"trust_unverified_node": True},
    "trusted but strict": {"trust_unverified_node": True, "strict": True},
    "group reordered": {"fingerprint": "HERE", "gpus": [1, 0]},
    "group not in the profile": {"fingerprint": "HERE", "gpus": [0, 2]},
    "group too short": {"fingerprint": "HERE", "gpus": [0]},
    "tp not measured": {"fingerprint": "HERE", "tp": 4},
    "tp not a size": {"fingerprint": "HERE", "tp": 0},
    "tp not a number": {"fingerprint": "HERE", "tp": "2"},
}


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_every_pattern_and_size_is_answered_as_gate_answers_it(
    example_path, tampered, profile_set, tmp_path, fingerprint, options
) -> None:
    options = {"tp": 2, **options}
    if options.get("fingerprint") == "HERE":
        options["fingerprint"] = fingerprint
    for name, source in _sources(example_path, tampered, profile_set, tmp_path).items():
        admission = admit(source, **options)
        for pattern in ("allreduce", "allreduce_rmsnorm"):
            for nbytes in SIZES:
                asked = gate(source, pattern=pattern, nbytes=nbytes, **options)
                assert admission.decide(pattern, nbytes) == asked, (name, pattern, nbytes)


def test_an_admitted_profile_carries_what_it_was_admitted_with(
    example_path, profile_set, fingerprint
) -> None:
    admission = admit(profile_set, tp=2, fingerprint=fingerprint)
    assert admission.profile is not None and admission.reason == ""
    assert (admission.tp, admission.group_class) == (2, "nvswitch")
    assert admission.warnings == gate(profile_set, tp=2, fingerprint=fingerprint).warnings  # drift, if any
    assert (admission.profile_path, admission.given_path) == (
        str(profile_set / "h200.yaml"),
        str(profile_set),
    )
    assert admission.profile == load_profile(example_path)


def test_a_refused_profile_says_why_and_every_answer_is_that_reason(example_path) -> None:
    admission = admit(example_path, tp=2, fingerprint=OTHER_NODE)
    assert admission.profile is None and admission.group_class is None
    assert "is not the kind the profile was measured on" in admission.reason
    decision = admission.decide("allreduce_rmsnorm", MiB)
    assert (decision.backend, decision.fallback, decision.reason) == ("nccl", True, admission.reason)


@pytest.mark.parametrize(
    ("pattern", "nbytes", "reason"),
    [
        ("bogus", None, "unknown pattern 'bogus' (known: allreduce, allreduce_rmsnorm)"),
        ("allreduce", -1, "nbytes must be None or an integer >= 0, got -1"),
        ("allreduce", True, "nbytes must be None or an integer >= 0, got True"),
    ],
)
def test_a_question_gate_would_refuse_is_refused_with_its_words(
    example_path, fingerprint, pattern, nbytes, reason
) -> None:
    decision = admit(example_path, tp=2, fingerprint=fingerprint).decide(pattern, nbytes)
    assert (decision.backend, decision.fallback, decision.reason) == ("nccl", True, reason)


def test_the_profile_is_verified_once_however_many_answers_are_taken(
    example_path, fingerprint, monkeypatch
) -> None:
    calls = {"digest": 0, "semantics": 0}

    def counted(name, real):
        def call(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(reader, "compute_digest", counted("digest", reader.compute_digest))
    monkeypatch.setattr(reader, "check_semantics", counted("semantics", reader.check_semantics))
    admission = admit(load_profile(example_path), tp=2, fingerprint=fingerprint)
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        for nbytes in SIZES:
            assert not admission.decide(pattern, nbytes).fallback
    assert calls == {"digest": 1, "semantics": 1}


def test_a_bug_below_admission_is_a_refusal_not_a_crash(example_path, fingerprint, monkeypatch) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(reader, "_check_node", broken)
    admission = admit(example_path, tp=2, fingerprint=fingerprint)
    assert admission.reason == "topo-gate reader failed (RuntimeError: boom); please report it"
    assert admission.decide().reason == admission.reason


def test_an_admission_cannot_be_changed_after_the_fact(example_path, fingerprint) -> None:
    admission = admit(example_path, tp=2, fingerprint=fingerprint)
    assert isinstance(admission, Admission)
    with pytest.raises(dataclasses.FrozenInstanceError):
        admission.reason = "changed"  # type: ignore[misc]


def test_a_bug_while_deciding_from_an_admission_is_nccl_with_the_reason(
    example_path, fingerprint, monkeypatch
) -> None:
    """An admitted profile's decide() never raises on the launcher: a bug is NCCL, saying so."""
    admission = admit(example_path, tp=2, fingerprint=fingerprint)

    def broken(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(reader, "_decision", broken)
    decision = admission.decide("allreduce", 448 * KiB)
    assert decision.backend == "nccl" and decision.fallback
    assert decision.reason == "topo-gate reader failed (RuntimeError: boom); please report it"


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_an_interrupt_while_deciding_from_an_admission_is_not_swallowed(
    example_path, fingerprint, monkeypatch, stop
) -> None:
    admission = admit(example_path, tp=2, fingerprint=fingerprint)

    def interrupted(*_args, **_kwargs):
        raise stop

    monkeypatch.setattr(reader, "_decision", interrupted)
    with pytest.raises(stop):
        admission.decide("allreduce", 448 * KiB)


@pytest.mark.parametrize("tp", [2, 4])
def test_a_refused_admission_answers_its_own_reason_for_every_pattern(tmp_path, tp: int) -> None:
    """A refusal keeps the TP size it was asked for, and its decide() says why it was refused, not
    that the reader failed."""
    admission = admit(tmp_path / "missing.yaml", tp=tp)
    assert admission.profile is None and admission.tp == tp and admission.reason
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        decision = admission.decide(pattern, 448 * KiB)
        assert decision.fallback and decision.reason == admission.reason
        assert "reader failed" not in decision.reason
