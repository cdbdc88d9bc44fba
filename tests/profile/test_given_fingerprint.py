"""A node fingerprint given rather than read, as the reader, the CLI's rule, profile sets and the plugins
take it (topo_gate/profile/given_fingerprint.py): blanks around it dropped (a ConfigMap's trailing
space, a ``.env`` file's CR), a blank one unset, and two that still differ named with where."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import topo_gate
from topo_gate.cli._node import given_fingerprint
from topo_gate.plugins import verified_fingerprint
from topo_gate.profile.given_fingerprint import FINGERPRINT_ENV, difference, env_fingerprint, given_text
from topo_gate.profile.profile_set import choose_member


@pytest.fixture
def fingerprint(example_data: dict) -> str:
    return example_data["node"]["fingerprint"]


@pytest.mark.parametrize(
    ("value", "taken"),
    [
        ("sha256:ab", "sha256:ab"),
        ("sha256:ab ", "sha256:ab"),
        ("sha256:ab\r", "sha256:ab"),
        ("\tsha256:ab\r\n", "sha256:ab"),
        ("sha256:a b", "sha256:a b"),  # a blank inside is no blank around: kept, and so a mismatch
        (" ", None),
        ("", None),
        (None, None),
    ],
    ids=repr,
)
def test_blanks_around_a_value_are_dropped_and_a_blank_value_is_unset(
    value: str | None, taken: str | None
) -> None:
    assert given_text(value) == taken
    assert env_fingerprint({} if value is None else {FINGERPRINT_ENV: value}) == taken


@pytest.mark.parametrize(
    ("here", "there", "words"),
    [
        ("sha256:abc", "sha256:abd", "they differ at character 10: 'c' here, 'd' in the profile"),
        ("sha256:abcx", "sha256:abc", "this node's has 1 more character(s) after the first 10: 'x'"),
        ("sha256:ab", "sha256:abc", "the profile's has 1 more character(s) after the first 9: 'c'"),
        ("sha256:abc\x00", "sha256:abc", "this node's has 1 more character(s) after the first 10: '\\x00'"),
    ],
)
def test_two_fingerprints_are_named_with_where_they_differ(here: str, there: str, words: str) -> None:
    assert difference(here, there) == words


@pytest.mark.parametrize("tail", [" ", "\r", "\r\n", "\t"], ids=repr)
def test_the_reader_takes_a_fingerprint_with_a_blank_after_it_from_the_env_or_the_caller(
    example_path: Path, fingerprint: str, tail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FINGERPRINT_ENV, fingerprint + tail)
    assert topo_gate.gate(example_path, tp=2).backend == "trtllm_oneshot"
    monkeypatch.delenv(FINGERPRINT_ENV)
    assert topo_gate.gate(example_path, tp=2, fingerprint=fingerprint + tail).backend == "trtllm_oneshot"


@pytest.mark.parametrize("value", ["", " ", "\r"], ids=repr)
def test_a_blank_env_value_is_an_unverified_node_not_another_node(
    example_path: Path, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FINGERPRINT_ENV, value)
    decision = topo_gate.gate(example_path, tp=2)
    assert decision.backend == "nccl"
    assert decision.reason.startswith("node not verified against the profile's fingerprint")
    trusted = topo_gate.gate(example_path, tp=2, trust_unverified_node=True)
    assert trusted.backend == "trtllm_oneshot"


def test_a_blank_fingerprint_from_the_caller_leaves_the_env_to_say(
    example_path: Path, fingerprint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FINGERPRINT_ENV, fingerprint)
    assert topo_gate.gate(example_path, tp=2, fingerprint=" ").backend == "trtllm_oneshot"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda f: f[:-1] + ("0" if f[-1] != "0" else "1"), "they differ at character 71"),
        (lambda f: f + "x", "this node's has 1 more character(s) after the first 71: 'x'"),
        (lambda f: f + "\u00a0x", "this node's has 2 more character(s) after the first 71: '\\xa0x'"),
        (lambda f: f[:-1], "the profile's has 1 more character(s) after the first 70"),
    ],
)
def test_the_reader_compares_whole_fingerprints_and_says_where_they_differ(
    example_path: Path, fingerprint: str, change, words: str
) -> None:
    decision = topo_gate.gate(example_path, tp=2, fingerprint=change(fingerprint))
    assert decision.backend == "nccl"
    assert "is not the kind the profile was measured on" in decision.reason
    assert words in decision.reason


def test_a_profile_set_chooses_its_member_for_a_fingerprint_with_a_blank_after_it(
    example_path: Path, fingerprint: str, tmp_path: Path
) -> None:
    shutil.copy(example_path, tmp_path / "node.yaml")
    assert choose_member(tmp_path, fingerprint + "\r").path == str(tmp_path / "node.yaml")
    assert "fingerprint is needed" in choose_member(tmp_path, " ").reason


@pytest.mark.parametrize(
    ("option", "environ", "expected"),
    [
        (" sha256:ab\r", {}, ("sha256:ab", "--node-fingerprint")),
        (" ", {FINGERPRINT_ENV: "sha256:cd "}, ("sha256:cd", FINGERPRINT_ENV)),
        (None, {FINGERPRINT_ENV: "\r\n"}, None),
    ],
    ids=repr,
)
def test_the_cli_rule_takes_values_as_the_reader_does(option, environ, expected) -> None:
    assert given_fingerprint(option, None, environ) == expected


def test_a_plugin_trusts_the_env_value_without_its_blanks_and_reads_the_node_for_a_blank_one() -> None:
    assert verified_fingerprint({FINGERPRINT_ENV: "sha256:ab \r"})[0] == "sha256:ab"
    fingerprint, how = verified_fingerprint({FINGERPRINT_ENV: "  "})
    assert not how.startswith(FINGERPRINT_ENV)  # the node is read (no NVML here: "node not checked")
