"""The fail-closed contracts of the reader, the digest and the field checks, each at its boundary.

Each test states one thing a launcher relies on and checks it on both sides of the line it draws
(accepted / refused), with the exact reason or value, so that a check loosened or moved by one fails.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import pytest

import topo_gate
from topo_gate.profile import NCCL, Profile, dump_profile, load_profile
from topo_gate.profile.digest import canonical_json, compute_digest
from topo_gate.profile.errors import ProfileInvalid, ProfileSchemaTooNew
from topo_gate.profile.given_fingerprint import difference
from topo_gate.profile.validate import (
    MAX_DEPTH,
    describe,
    expect_int,
    expect_plain_data,
    expect_positive_float,
    expect_str,
    schema_minor,
)

# --- digest: canonical JSON as documented (sorted keys, no spaces, UTF-8, no NaN) -----------------


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": [1, 2.5], "a": "ü"}) == '{"a":"ü","b":[1,2.5]}'


def test_canonical_json_refuses_nan_and_infinity() -> None:
    for value in (math.nan, math.inf):
        with pytest.raises(ValueError):
            canonical_json({"x": value})


def test_digest_is_sha256_of_canonical_utf8_without_the_digest_key() -> None:
    text = '{"a":"ü","b":[1,2.5]}'  # written out by hand: the digest must not depend on our own encoder
    expected = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert compute_digest({"b": [1, 2.5], "a": "ü", "digest": "sha256:" + "0" * 64}) == expected
    assert compute_digest({"b": [1, 2.5], "a": "ü"}) == expected


# --- reader: a Profile object is used only when its digest matches its content ---------------------


@pytest.fixture
def fingerprint(example_data: dict) -> str:
    return example_data["node"]["fingerprint"]


@pytest.fixture
def sealed(example_path) -> Profile:
    return load_profile(example_path)


def test_a_sealed_profile_object_decides(sealed: Profile, fingerprint: str) -> None:
    decision = topo_gate.gate(sealed, tp=2, nbytes=1024, fingerprint=fingerprint)
    assert (decision.backend, decision.fallback, decision.source) == ("trtllm_oneshot", False, "profile")


@pytest.mark.parametrize("digest", ["old", None, "sha256:" + "0" * 64])
def test_a_profile_object_whose_content_changed_is_nccl(sealed: Profile, fingerprint: str, digest) -> None:
    # Reword the first rule: the content changes, the digest stays what it was (or is absent). (Its
    # bound must stay a measured size: the price table would contradict any other.)
    entry = sealed.decisions[0]
    rules = (dataclasses.replace(entry.rules[0], reason="reworded"), *entry.rules[1:])
    changed = dataclasses.replace(
        sealed, decisions=(dataclasses.replace(entry, rules=rules), *sealed.decisions[1:])
    )
    changed = dataclasses.replace(changed, digest=sealed.digest if digest == "old" else digest)
    decision = topo_gate.gate(changed, tp=2, nbytes=1024, fingerprint=fingerprint)
    assert (decision.backend, decision.fallback) == (NCCL, True)
    assert decision.reason.startswith("profile object: digest: missing or does not match its content")
    assert topo_gate.gate(changed.with_digest(), tp=2, nbytes=1024, fingerprint=fingerprint).backend != NCCL


def test_a_sealed_profile_object_stating_the_impossible_is_nccl_with_the_check_named(
    sealed: Profile, fingerprint: str
) -> None:
    """A profile built in memory passes the loader's semantic checks too: sealing it (a matching digest)
    vouches for its bytes, not for what it says. Refused as unusable, with the check's own words."""
    emptied = dataclasses.replace(sealed, decisions=(), skipped=()).with_digest()
    decision = topo_gate.gate(emptied, tp=2, nbytes=1024, fingerprint=fingerprint)
    assert (decision.backend, decision.fallback) == (NCCL, True)
    assert decision.reason == (
        "profile object unusable: decisions: no decisions and no skipped TP sizes: the profile decides nothing"
    )


# --- reader: the node check compares for equality, in both directions -------------------------------


@pytest.mark.parametrize("other", ["sha256:" + "0" * 64, "sha256:" + "f" * 64])
def test_any_other_fingerprint_is_nccl_and_named(example_path, fingerprint: str, other: str) -> None:
    decision = topo_gate.gate(example_path, tp=2, fingerprint=other)
    assert (decision.backend, decision.fallback) == (NCCL, True)
    assert decision.reason == (
        f"this node (fingerprint {other[:19]}...) is not the kind the profile was measured on "
        f"({fingerprint[:19]}...): {difference(other, fingerprint)}"
    )


def _same_shown_prefix(fingerprint: str) -> str:
    """Another node's fingerprint that a refusal shows exactly as this one's: the first 19
    characters kept, the last hex digit changed."""
    last = "0" if fingerprint[-1] != "0" else "1"
    other = fingerprint[:-1] + last
    assert other[:19] == fingerprint[:19] and other != fingerprint
    return other


def test_a_fingerprint_equal_in_what_the_message_shows_is_still_another_node(
    example_path, fingerprint: str
) -> None:
    other = _same_shown_prefix(fingerprint)
    decision = topo_gate.gate(example_path, tp=2, nbytes=1024, fingerprint=other)
    assert (decision.backend, decision.fallback) == (NCCL, True)
    assert decision.reason.startswith(f"this node (fingerprint {fingerprint[:19]}...) is not the kind")


def test_a_set_member_equal_in_what_the_message_shows_is_not_chosen(
    example_path, fingerprint: str, tmp_path
) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "member.yaml").write_bytes(example_path.read_bytes())
    decision = topo_gate.gate(folder, tp=2, nbytes=1024, fingerprint=_same_shown_prefix(fingerprint))
    assert (decision.backend, decision.fallback) == (NCCL, True)
    assert "none of its 1 profiles is for this node" in decision.reason


def test_fallback_answers_cover_every_size_from_zero(example_path) -> None:
    decision = topo_gate.gate(example_path, tp=2, fingerprint="sha256:" + "0" * 64)
    assert (decision.min_bytes, decision.max_bytes, decision.rules, decision.group_class) == (
        0,
        None,
        (),
        None,
    )
    assert (decision.tp, decision.pattern, decision.profile_path) == (2, "allreduce", str(example_path))


def test_a_decision_cannot_be_changed_after_the_fact(example_path, fingerprint: str) -> None:
    decision = topo_gate.gate(example_path, tp=2, fingerprint=fingerprint)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.backend = "trtllm_oneshot"  # type: ignore[misc]


def test_fallback_is_read_from_the_source_value_not_its_identity() -> None:
    built = topo_gate.Decision(backend=NCCL, max_bytes=None, reason="x", source="".join(["fall", "back"]))
    assert built.fallback
    assert not dataclasses.replace(built, source="profile").fallback


# --- reader: the GPU group must be exactly TP distinct indices --------------------------------------


@pytest.mark.parametrize("gpus", [[0, 1, 1], [0, 0], [1], [0, 1, 2], [0, -1], [True, 0], "01"])
def test_a_group_that_is_not_tp_distinct_indices_is_nccl(example_path, fingerprint: str, gpus) -> None:
    decision = topo_gate.gate(example_path, tp=2, gpus=gpus, fingerprint=fingerprint)
    assert (decision.backend, decision.fallback) == (NCCL, True)
    assert decision.reason.startswith("gpus must")


def test_the_group_in_another_order_is_the_same_group(example_path, fingerprint: str) -> None:
    assert (
        topo_gate.gate(example_path, tp=2, gpus=[1, 0], fingerprint=fingerprint).backend == "trtllm_oneshot"
    )


# --- reader: rule reasons in words when the profile gives none --------------------------------------


@pytest.mark.parametrize("backend", ["pcie_ipc", "vllm_custom"])
def test_a_rule_without_a_reason_is_described_by_its_numbers(
    example_data, write_profile, fingerprint, backend
):
    entry = example_data["decisions"][0]
    entry["rules"] = [
        {"max_bytes": 4096, "backend": backend, "speedup": 2.0, "ci": [1.5, 2.5]},
        {"max_bytes": None, "backend": "nccl"},
    ]
    path = write_profile(example_data)
    small = topo_gate.gate(path, tp=entry["tp"], pattern=entry["pattern"], nbytes=1, fingerprint=fingerprint)
    assert (small.backend, small.reason) == (
        backend,
        f"{backend} measured 2.00x (CI 1.50-2.50) faster than nccl",
    )
    large = topo_gate.gate(
        path, tp=entry["tp"], pattern=entry["pattern"], nbytes=8192, fingerprint=fingerprint
    )
    assert (large.backend, large.reason, large.fallback) == (
        NCCL,
        "nccl: no faster backend measured at this size",
        False,
    )


# --- field checks: each boundary, both sides ------------------------------------------------------


def test_describe_shows_strings_up_to_40_characters_whole() -> None:
    assert describe("a" * 40) == "str " + repr("a" * 40)
    assert describe("b" * 41) == "str " + repr("b" * 37 + "...")
    assert (describe(None), describe(True), describe(2.5), describe([1])) == (
        "null",
        "bool True",
        "float 2.5",
        "list",
    )


def test_schema_versions() -> None:
    assert schema_minor("topo-gate/profile/v1") == 0
    assert schema_minor("topo-gate/profile/v1.3") == 3
    with pytest.raises(ProfileSchemaTooNew, match="unknown schema major 2"):
        schema_minor("topo-gate/profile/v2")
    for bad in ("topo-gate/profile/v1.x", "topo-gate/profile/v", "other/v1", 1):
        with pytest.raises(ProfileInvalid):
            schema_minor(bad)


def test_integers_and_strings() -> None:
    assert expect_int(5, "f", minimum=5) == 5
    with pytest.raises(ProfileInvalid, match="must be >= 5, found 4"):
        expect_int(4, "f", minimum=5)
    with pytest.raises(ProfileInvalid, match="must be an integer, found bool True"):
        expect_int(True, "f", minimum=0)
    assert expect_str("x", "f") == "x"
    for bad in ("", 5, None):
        with pytest.raises(ProfileInvalid, match="must be a non-empty string"):
            expect_str(bad, "f")


def test_positive_floats() -> None:
    assert expect_positive_float(1e-9, "f") == 1e-9
    for bad in (0, 0.0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(ProfileInvalid):
            expect_positive_float(bad, "f")


def _nested(levels: int, kind: str) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value] if kind == "list" else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_plain_data_nests_up_to_max_depth(kind: str) -> None:
    expect_plain_data(_nested(MAX_DEPTH, kind), "extra")
    with pytest.raises(ProfileInvalid, match=f"nested deeper than {MAX_DEPTH} levels"):
        expect_plain_data(_nested(MAX_DEPTH + 1, kind), "extra")


def test_plain_data_checks_every_list_item_and_names_it() -> None:
    with pytest.raises(ProfileInvalid) as raised:
        expect_plain_data({"runs": [1.0, {"x": math.nan}]}, "extra")
    assert "extra.runs[1].x" in str(raised.value) and "finite" in str(raised.value)
    with pytest.raises(ProfileInvalid, match="mapping keys must be strings"):
        expect_plain_data({1: "a"}, "extra")
    with pytest.raises(ProfileInvalid, match="plain JSON data, found bytes"):
        expect_plain_data([b"x"], "extra")
    expect_plain_data(json.loads('{"a": [null, true, 1, 2.5, "s"]}'), "")


# --- reader: TP 1 is a TP size like any other, and an edited file is read again ----------------------


def test_tp_1_is_a_question_not_an_error(example_path, fingerprint: str) -> None:
    assert (
        topo_gate.gate(example_path, tp=1, fingerprint=fingerprint).reason
        == "GPU group [0] is not in the profile (TP 1)"
    )
    assert (
        topo_gate.gate(example_path, tp=0, fingerprint=fingerprint).reason
        == "tp must be a positive integer, got 0"
    )


def test_a_profile_rewritten_in_place_shorter_is_read_again(example_path, tmp_path, fingerprint: str) -> None:
    # Same file (inode), new content that is smaller: the cache must not take it for the old one.
    path = tmp_path / "p.yaml"
    path.write_text(example_path.read_text(encoding="utf-8"), encoding="utf-8")
    assert topo_gate.gate(path, tp=2, nbytes=1024, fingerprint=fingerprint).backend == "trtllm_oneshot"
    data = load_profile(example_path).to_dict()
    data["decisions"] = []
    del data["measurements"]  # a price table without its decisions is refused
    shorter = Profile.from_dict(data).with_digest()
    staged = tmp_path / "staged.yaml"
    dump_profile(shorter, staged)
    with open(path, "w", encoding="utf-8") as same_file:
        same_file.write(staged.read_text(encoding="utf-8"))
    decision = topo_gate.gate(path, tp=2, nbytes=1024, fingerprint=fingerprint)
    assert decision.backend == NCCL and decision.reason.startswith("the profile has no decision for TP 2")
