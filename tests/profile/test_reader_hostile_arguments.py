"""``gate()`` answers an impossible call with NCCL and its reason, in bounded time and memory, before
the profile is read: a huge TP size, an endless GPU list, a NUL in the path. (It used to allocate
``range(tp)`` after reading the profile and answer "topo-gate reader failed ...; please report it".)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topo_gate import gate
from topo_gate.profile import load_profile, reader

EXAMPLE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.yaml"
FINGERPRINT = load_profile(EXAMPLE).node.fingerprint


@pytest.fixture
def unread(monkeypatch):
    """Fail if the profile is read: these calls are answered from their arguments alone."""

    def refuse(*args, **kwargs):
        raise AssertionError("the profile was read")

    monkeypatch.setattr(reader, "_admitted_profile", refuse)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"tp": 10**12}, "tp 1000000000000 is larger than any node has GPUs"),
        ({"tp": 10**5000}, "tp of 16610 bits is larger than any node has GPUs"),
        ({"tp": 2, "gpus": range(10**15)}, "gpus must list 2 distinct GPU indices for TP 2, got more than 2"),
        ({"tp": 2, "gpus": iter(int, 1)}, "got more than 2"),  # an endless iterator
    ],
)
def test_impossible_arguments_are_answered_before_the_profile_is_read(kwargs, reason, unread) -> None:
    decision = gate(EXAMPLE, fingerprint=FINGERPRINT, **kwargs)
    assert decision.fallback and decision.backend == "nccl"
    assert reason in decision.reason and "please report it" not in decision.reason


def test_a_nul_in_the_path_is_named(unread) -> None:
    decision = gate(f"{EXAMPLE}\x00.yaml", tp=2, fingerprint=FINGERPRINT)
    assert decision.fallback and "holds a NUL character" in decision.reason


@given(tp=st.integers(min_value=-(2**70), max_value=2**70))
def test_any_tp_size_is_an_answer_never_a_failure(tp: int) -> None:
    decision = gate(EXAMPLE, tp=tp, fingerprint=FINGERPRINT)
    assert "please report it" not in decision.reason
    if tp > reader.MAX_TP or tp < 1:
        assert decision.fallback


def test_the_largest_tp_read_is_65536() -> None:
    """A TP size up to 2**16 is looked up (and found undecided); one above it is refused unread."""
    at_cap, above = (gate(EXAMPLE, tp=tp, fingerprint=FINGERPRINT) for tp in (65536, 65537))
    assert at_cap.backend == above.backend == "nccl"
    assert "larger than any node has GPUs" not in at_cap.reason
    assert "tp 65537 is larger than any node has GPUs (at most 65536 are read)" in above.reason


def test_a_huge_tp_is_named_by_its_digits_up_to_64_bits_then_by_its_size() -> None:
    """str() of a 64-bit integer is short; above that the reason gives the bit count, not the digits."""
    largest_printed = gate(EXAMPLE, tp=2**64 - 1, fingerprint=FINGERPRINT).reason
    first_by_size = gate(EXAMPLE, tp=2**64, fingerprint=FINGERPRINT).reason
    assert f"tp {2**64 - 1} is larger" in largest_printed
    assert "tp of 65 bits is larger" in first_by_size


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_a_gpu_iterable_is_read_one_past_the_group_and_no_further(tp: int, unread) -> None:
    """The caller's iterator may be a generator with side effects or one it reuses: ``gate`` takes
    what a TP group needs plus one (to tell "too long"), leaving the rest where it was."""
    gpus = iter(range(10**6))
    decision = gate(EXAMPLE, tp=tp, gpus=gpus, fingerprint=FINGERPRINT)
    assert decision.fallback and f"got more than {tp}" in decision.reason
    assert next(gpus) == tp + 1
