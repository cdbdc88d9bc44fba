"""The schema dataclasses, the canonical YAML form and the digest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from topo_gate._atomic import OutputRefused
from topo_gate.profile import (
    SCHEMA,
    Alternative,
    DecisionEntry,
    Profile,
    ProfileInvalid,
    ProfileSchemaTooNew,
    Rule,
    compute_digest,
    dump_profile,
    load_profile,
    profile_from_text,
    profile_to_yaml,
)
from topo_gate.profile.yaml_format import parse_yaml


def test_example_round_trips_identically(example_path: Path, tmp_path: Path) -> None:
    loaded = load_profile(example_path)
    dump_profile(loaded, tmp_path / "again.yaml")
    assert load_profile(tmp_path / "again.yaml") == loaded
    # The committed file is byte-for-byte the canonical form: dump is a fixed point.
    assert (tmp_path / "again.yaml").read_text(encoding="utf-8") == example_path.read_text(encoding="utf-8")


def test_digest_is_over_canonical_json_without_the_digest(example_path: Path) -> None:
    example_data = parse_yaml(example_path.read_text(encoding="utf-8"))  # price table and all
    recorded = example_data["digest"]
    assert compute_digest(example_data) == recorded
    reordered = dict(reversed(list(example_data.items())))  # key order is not content
    assert compute_digest(reordered) == recorded
    example_data["created"] = "2027-01-01T00:00:00Z"
    assert compute_digest(example_data) != recorded


def test_floats_are_rounded_at_construction_and_survive_yaml() -> None:
    rule = Rule(max_bytes=1024, backend="trtllm_oneshot", speedup=3.123456789, ci=[1e-06, 3.987654321])
    assert rule.speedup == 3.12346
    assert rule.ci == (1e-06, 3.98765)
    entry = DecisionEntry(
        tp=2,
        group=[0, 1],
        group_class="nvswitch",
        pattern="allreduce",
        rules=[rule, Rule(max_bytes=None, backend="nccl")],
    )
    assert entry.rules[0] is rule and entry.group == (0, 1)


def test_yaml_1_2_exponent_floats_are_numbers(example_data: dict) -> None:
    text = profile_to_yaml(Profile.from_dict(example_data).with_digest())
    speedup = example_data["decisions"][0]["rules"][0]["speedup"]
    edited = text.replace(f"speedup: {speedup}\n", f"speedup: {round(speedup * 1000)}e-3\n")
    assert edited != text
    # 2063e-3 is YAML 1.2 float syntax; YAML 1.1 would read it as a string (and then fail as a type).
    assert profile_from_text(edited, verify_digest=False).decisions[0].rules[0].speedup == speedup


def test_unquoted_timestamp_stays_a_string(example_data: dict) -> None:
    text = profile_to_yaml(Profile.from_dict(example_data)).replace(
        "created: '2026-11-30T08:00:00Z'", "created: 2026-11-30T08:00:00Z"
    )
    assert profile_from_text(text, verify_digest=False).created == "2026-11-30T08:00:00Z"


def test_minor_version_and_unknown_fields_are_accepted(example_data: dict) -> None:
    example_data["schema"] = "topo-gate/profile/v1.7"
    example_data["a_future_field"] = {"anything": [1, 2.5, None]}
    example_data["decisions"][0]["rules"][0]["future_rule_field"] = "ignored"
    example_data["digest"] = compute_digest(example_data)
    profile = profile_from_text(profile_to_yaml_plain(example_data))
    assert profile.schema == "topo-gate/profile/v1.7"
    assert "a_future_field" not in profile.to_dict()


def profile_to_yaml_plain(data: dict) -> str:
    from topo_gate.profile.yaml_format import to_yaml

    return to_yaml(data)


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ("topo-gate/profile/v2", ProfileSchemaTooNew),
        ("topo-gate/profile/v0.9", ProfileSchemaTooNew),
        ("topo-gate/profile/1", ProfileInvalid),
        (1, ProfileInvalid),
    ],
)
def test_other_schemas_are_refused(example_data: dict, schema: object, error: type) -> None:
    example_data["schema"] = schema
    with pytest.raises(error, match="^schema: "):
        Profile.from_dict(example_data)


def test_invalid_profiles_cannot_be_built_in_code() -> None:
    """decide builds dataclasses directly: the invariants hold there too."""
    with pytest.raises(
        ProfileInvalid, match=r"^rules\[1\]\.max_bytes: must be > 4096 \(rules must be ordered\)$"
    ):
        DecisionEntry(
            tp=2,
            group=[0, 1],
            group_class="nvswitch",
            pattern="allreduce",
            rules=[Rule(4096, "trtllm_oneshot", 2.0, [1.9, 2.1]), Rule(1024, "nccl"), Rule(None, "nccl")],
        )
    with pytest.raises(ProfileInvalid, match=r"^ci\[0\]: must be a number, found str .a.$"):
        Rule(4096, "trtllm_oneshot", 2.0, ["a", "b"])


def test_a_v1_0_profile_without_alternatives_loads_and_keeps_its_digest(
    example_data: dict, write_profile, tmp_path: Path
) -> None:
    """Schema v1.1 only added ``alternatives``, written only when non-empty: a v1.0 file re-dumps to
    the same content and digest."""
    example_data["schema"] = "topo-gate/profile/v1"
    for decision in example_data["decisions"]:
        for rule in decision["rules"]:
            rule.pop("alternatives", None)
    path = write_profile(example_data)
    loaded = load_profile(path)
    assert all(rule.alternatives == () for d in loaded.decisions for rule in d.rules)
    dump_profile(loaded, tmp_path / "again.yaml")
    assert load_profile(tmp_path / "again.yaml").digest == loaded.digest
    assert "alternatives" not in (tmp_path / "again.yaml").read_text(encoding="utf-8")


def test_alternatives_are_checked_and_rounded_in_code() -> None:
    rule = Rule(
        4096,
        "trtllm_oneshot",
        2.0,
        [1.9, 2.1],
        alternatives=[Alternative("vllm_custom", 1.23456789, [1.2, 1.3])],
    )
    assert rule.alternatives == (Alternative("vllm_custom", 1.23457, (1.2, 1.3)),)
    assert rule.faster_than_nccl == {"trtllm_oneshot", "vllm_custom"}
    assert Rule(None, "nccl").faster_than_nccl == frozenset()
    with pytest.raises(ProfileInvalid, match=r"^alternatives: an nccl rule has no alternatives"):
        Rule(4096, "nccl", alternatives=[Alternative("vllm_custom", 1.2, [1.1, 1.3])])
    with pytest.raises(ProfileInvalid, match=r"^alternatives\[1\]\.backend: vllm_custom is listed twice$"):
        Rule(
            4096,
            "trtllm_oneshot",
            2.0,
            [1.9, 2.1],
            alternatives=[
                Alternative("vllm_custom", 1.2, [1.1, 1.3]),
                Alternative("vllm_custom", 1.1, [1.0, 1.2]),
            ],
        )
    with pytest.raises(ProfileInvalid, match=r"^backend: nccl is the baseline"):
        Alternative("nccl", 1.0, [1.0, 1.0])
    with pytest.raises(ProfileInvalid, match=r"^alternatives\[0\]: must be a Alternative, found dict$"):
        Rule(4096, "trtllm_oneshot", 2.0, [1.9, 2.1], alternatives=[{"backend": "vllm_custom"}])


def test_dump_is_atomic_and_leaves_no_temp_files(example_path: Path, tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    target.write_text("old content\n")
    dump_profile(load_profile(example_path), target)
    assert os.listdir(tmp_path) == ["p.yaml"]
    assert load_profile(target).digest == load_profile(example_path).digest


def test_with_digest_seals_what_to_dict_returns(example_path: Path) -> None:
    profile = load_profile(example_path)
    unsealed = Profile.from_dict({**profile.to_dict(), "digest": None})
    assert unsealed.digest is None
    assert unsealed.with_digest() == profile
    assert profile.schema == SCHEMA  # the example is written by decide, from its synthetic evidence
    assert SCHEMA == "topo-gate/profile/v1.3"


def test_a_failed_dump_leaves_the_old_file(example_path: Path, tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "p.yaml"
    target.write_text("old content\n")

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OutputRefused, match="p.yaml: cannot write: no space left on the device"):
        dump_profile(load_profile(example_path), target)
    assert target.read_text() == "old content\n"
    assert os.listdir(tmp_path) == ["p.yaml"]
