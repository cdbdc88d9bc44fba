"""Properties: no mutation of a valid profile makes gate() raise or the checks disagree, and every
valid profile round-trips through YAML unchanged.

A mutated profile is re-sealed before writing (so the mutation reaches the schema checks instead of
stopping at the digest), except where the test is about the digest.
"""

from __future__ import annotations

import copy
import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topo_gate
from topo_gate.profile import (
    BACKENDS,
    NCCL,
    PATTERNS,
    Alternative,
    DecisionEntry,
    Profile,
    ProfileError,
    Rule,
    compute_digest,
    dump_profile,
    load_profile,
)
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.yaml"
EXAMPLE_TEXT = EXAMPLE.read_text(encoding="utf-8")
EXAMPLE_DATA = parse_yaml(EXAMPLE_TEXT)
FINGERPRINT = EXAMPLE_DATA["node"]["fingerprint"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from([*BACKENDS, *PATTERNS, "2", "sha256:" + "0" * 64]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location in the document, as a key/index path."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _mutate(data: Any, draw: Any) -> Any:
    path = draw(st.sampled_from(_paths(data)))
    if not path:
        return draw(json_values)  # replace the whole document
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    operation = draw(st.sampled_from(["replace", "delete", "duplicate", "add_key"]))
    if operation == "replace":
        parent[last] = draw(json_values)
    elif operation == "delete":
        del parent[last]
    elif operation == "duplicate" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(json_values)
    return data


def _seal(data: Any) -> Any:
    if isinstance(data, dict):
        try:
            return {**data, "digest": compute_digest(data)}
        except (TypeError, ValueError):
            return data  # NaN or odd keys: not JSON, so no digest can be computed -- write it as is
    return data


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("mutations")
    names = itertools.count()
    # A fresh name per example: the reader caches by file identity, and tests must not depend on
    # how fast a filesystem's timestamps tick.
    return lambda: folder / f"profile-{next(names)}.yaml"


# Why gate() may answer NCCL for a profile the strict loader accepts: the mutation removed or changed
# what this question needs. "topo-gate reader failed" (a bug in the reader) is never one of them.
_ACCEPTED_PROFILE_REASONS = (
    "the profile has no decision for TP 2",
    "TP 2 was not measured",
    "GPU group [0, 1] is not in the profile",
    "this node (fingerprint",
)


def _assert_gate_is_consistent(path: Path) -> None:
    """gate()'s answer is the one the strict loader implies: its own error as the reason when the file
    is refused; otherwise the profile's rule (any backend) or NCCL for a reason a person can act on."""
    decision = topo_gate.gate(path, tp=2, nbytes=4096, fingerprint=FINGERPRINT)
    assert isinstance(decision, topo_gate.Decision)
    try:
        profile = load_profile(path)
    except ProfileError as error:
        assert (decision.backend, decision.fallback) == (NCCL, True)
        assert decision.reason == f"profile {path} unusable: {error}"
        return
    assert not decision.reason.startswith("topo-gate reader failed"), decision.reason
    if decision.fallback:
        assert decision.backend == NCCL and decision.reason.startswith(_ACCEPTED_PROFILE_REASONS), (
            decision.reason
        )
    else:
        entry = profile.find(2, "allreduce", decision.group_class)
        assert entry is not None and decision.rules == entry.rules
        assert decision.backend == entry.rule_for(4096)[1].backend


@SETTINGS
@given(data=st.data())
def test_from_dict_raises_only_profile_errors(data: st.DataObject) -> None:
    mutated = _mutate(copy.deepcopy(EXAMPLE_DATA), data.draw)
    try:
        profile = Profile.from_dict(mutated)
    except ProfileError as error:
        assert str(error)  # names the problem (the malformed-profile tests check which words)
    else:
        assert Profile.from_dict(profile.to_dict()) == profile  # what was accepted is what it says


@SETTINGS
@given(data=st.data())
def test_gate_never_raises_on_mutated_documents(data: st.DataObject, scratch) -> None:
    path = scratch()
    path.write_text(to_yaml(_seal(_mutate(copy.deepcopy(EXAMPLE_DATA), data.draw))), encoding="utf-8")
    _assert_gate_is_consistent(path)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 8))
def test_gate_never_raises_on_mutated_bytes(seed: int, edits: int, scratch) -> None:
    rng = random.Random(seed)
    payload = bytearray(EXAMPLE_TEXT.encode("utf-8"))
    for _ in range(edits):
        at = rng.randrange(len(payload))
        action = rng.choice(["flip", "delete", "insert", "truncate"])
        if action == "flip":
            payload[at] ^= 1 << rng.randrange(8)
        elif action == "delete":
            del payload[at]
        elif action == "insert":
            payload.insert(at, rng.randrange(256))
        else:
            del payload[at:]
            break
    path = scratch()
    path.write_bytes(bytes(payload))
    _assert_gate_is_consistent(path)


@SETTINGS
@given(data=st.data())
def test_an_unsealed_edit_is_never_used(data: st.DataObject, scratch) -> None:
    """Change the content but not the digest: gate() must answer NCCL (unless nothing changed)."""
    mutated = _mutate(copy.deepcopy(EXAMPLE_DATA), data.draw)
    path = scratch()
    path.write_text(to_yaml(mutated), encoding="utf-8")
    decision = topo_gate.gate(path, tp=2, fingerprint=FINGERPRINT)
    try:
        unchanged = isinstance(mutated, dict) and compute_digest(mutated) == EXAMPLE_DATA["digest"]
    except (TypeError, ValueError):
        unchanged = False  # not JSON any more (NaN, odd keys): certainly changed
    if not unchanged:
        with pytest.raises(ProfileError) as refused:
            load_profile(path)
        assert (decision.backend, decision.reason) == (NCCL, f"profile {path} unusable: {refused.value}")


# --- round trip of valid profiles -------------------------------------------------------------

# What a GPU profile may state (profile/semantics.check_semantics): GPU backends only, a fast path
# never slower than NCCL, its CI around its speed-up, an NCCL rule without either.
GPU_BACKENDS = [name for name in BACKENDS if name not in ("gloo", "gloo_ring")]
measured = st.lists(st.floats(min_value=1, max_value=1000, allow_nan=False), min_size=3, max_size=3).map(
    sorted
)


@st.composite
def alternatives(draw: st.DrawFn, backend: str) -> list[Alternative]:
    if backend == NCCL:
        return []  # an nccl rule carries none (schema v1.1)
    others = [name for name in GPU_BACKENDS if name not in (NCCL, backend)]
    names = draw(st.lists(st.sampled_from(others), unique=True, max_size=3))
    alternatives = []
    for name in names:
        low, speedup, high = draw(measured)
        alternatives.append(Alternative(name, speedup, [low, high]))
    return alternatives


@st.composite
def ladders(draw: st.DrawFn) -> list[Rule]:
    bounds = sorted(draw(st.sets(st.integers(1, 2**40), max_size=5)))
    rules = []
    for bound in bounds:
        backend = draw(st.sampled_from(GPU_BACKENDS))
        low, speedup, high = draw(measured)
        fast = backend != NCCL
        rules.append(
            Rule(
                bound,
                backend,
                speedup if fast else None,
                [low, high] if fast else None,
                draw(st.none() | st.text(min_size=1, max_size=30)),
                draw(alternatives(backend)),
            )
        )
    return [*rules, Rule(None, NCCL, reason=draw(st.none() | st.text(min_size=1, max_size=30)))]


@st.composite
def profiles(draw: st.DrawFn) -> Profile:
    keys = draw(
        st.sets(
            st.tuples(
                st.integers(1, 8),
                st.sampled_from(PATTERNS),
                st.sampled_from(["nvswitch", "pcie-switch", "ü"]),
            ),
            min_size=1,
            max_size=4,
        )
    )
    # Each class on its own GPUs, and the node lists every group decided (profile/semantics.py).
    classes = ["nvswitch", "pcie-switch", "ü"]
    decisions = [
        DecisionEntry(
            tp=tp,
            group=[8 * classes.index(group_class) + gpu for gpu in range(tp)],
            group_class=group_class,
            pattern=pattern,
            rules=draw(ladders()),
        )
        for tp, pattern, group_class in sorted(keys)
    ]
    tp_groups: dict[str, list] = {}
    for decision in decisions:
        group = {"gpus": list(decision.group), "class": decision.group_class}
        if group not in tp_groups.setdefault(str(decision.tp), []):
            tp_groups[str(decision.tp)].append(group)
    node = copy.deepcopy(EXAMPLE_DATA["node"])
    node["hardware"] = {"gpus": [{"index": i} for i in range(24)], "tp_groups": tp_groups}
    data = {**EXAMPLE_DATA, "node": node, "skipped": [], "decisions": [d.to_dict() for d in decisions]}
    data.pop("measurements", None)  # the example's tables price the example's decisions only
    return Profile.from_dict(data).with_digest()


@settings(max_examples=60, deadline=None)
@given(profile=profiles())
def test_valid_profiles_round_trip(profile: Profile, scratch) -> None:
    first, second = scratch(), scratch()
    dump_profile(profile, first)
    loaded = load_profile(first)
    assert loaded == profile
    dump_profile(loaded, second)
    assert second.read_bytes() == first.read_bytes()
