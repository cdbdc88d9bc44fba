"""The loader's checks at their edges: integers at 2**63, a speed-up on the edge of its CI or at 1.0,
and a CPU-harness profile, whose baseline rules state exactly 1.0 against themselves.

Each case is a sealed profile file changed in one field and read with ``load_profile``, as ``validate``
and the launcher reader read it: accepted at the edge, refused one step past it, with the field named.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from topo_gate.cli import main
from topo_gate.profile import ProfileInvalid, compute_digest, load_profile
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

REPO = Path(__file__).resolve().parents[2]
CPU_EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
MAX_INT = 2**63 - 1


def _sealed(tmp_path: Path, data: dict[str, Any], name: str = "changed.yaml") -> Path:
    path = tmp_path / name
    path.write_text(to_yaml({**data, "digest": compute_digest(data)}), encoding="utf-8")
    return path


def _refused(tmp_path: Path, data: dict[str, Any]) -> str:
    with pytest.raises(ProfileInvalid) as refused:
        load_profile(_sealed(tmp_path, data))
    return str(refused.value)


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CPU harness's profile, replayed from its recorded gloo evidence (no digest)."""
    out = tmp_path_factory.mktemp("cpu") / "cpu.yaml"
    assert main(["probe", "--replay", str(CPU_EVIDENCE), "--out", str(out)]) == 0
    data = parse_yaml(out.read_text(encoding="utf-8"))
    del data["digest"]
    return data


@pytest.fixture
def cpu(cpu_profile: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(cpu_profile)


@pytest.fixture
def gpu(example_data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(example_data)
    data.pop("digest", None)
    return data


# -- integers: 2**63 - 1 is the largest any field holds ---------------------------------------------------


def test_the_largest_max_bytes_is_read_and_one_more_is_not(tmp_path: Path, gpu: dict[str, Any]) -> None:
    rules = gpu["decisions"][0]["rules"]
    assert rules[-1]["max_bytes"] is None and rules[-2]["max_bytes"] is not None
    rules[-2]["max_bytes"] = MAX_INT
    load_profile(_sealed(tmp_path, gpu))
    rules[-2]["max_bytes"] = MAX_INT + 1
    assert _refused(tmp_path, gpu) == (
        f"decisions[0].rules[{len(rules) - 2}].max_bytes: must be < 2**63, found {MAX_INT + 1}"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [(2**64 - 1, str(2**64 - 1)), (2**64, "an integer of 65 bits"), (2**200, "an integer of 201 bits")],
)
def test_a_huge_integer_is_shown_by_its_size(
    tmp_path: Path, gpu: dict[str, Any], value: int, shown: str
) -> None:
    gpu["decisions"][0]["rules"][0]["max_bytes"] = value
    assert _refused(tmp_path, gpu).endswith(f"max_bytes: must be < 2**63, found {shown}")


@pytest.mark.parametrize("edge", [MAX_INT, -MAX_INT])
def test_plain_data_holds_integers_up_to_2_63_either_side(
    tmp_path: Path, gpu: dict[str, Any], edge: int
) -> None:
    gpu["node"]["provenance"]["counter"] = edge
    load_profile(_sealed(tmp_path, gpu))
    gpu["node"]["provenance"]["counter"] = edge + (1 if edge > 0 else -1)
    message = _refused(tmp_path, gpu)
    assert message.startswith("node.provenance.counter: integer out of range"), message


# -- a rule's speed-up and its CI ------------------------------------------------------------------------


def _first_fast_rule(data: dict[str, Any]) -> dict[str, Any]:
    return next(rule for rule in data["decisions"][0]["rules"] if rule["backend"] != "nccl")


@pytest.mark.parametrize("edge", ["low", "high"])
def test_a_speedup_on_either_end_of_its_ci_is_inside_it(
    tmp_path: Path, gpu: dict[str, Any], edge: str
) -> None:
    rule = _first_fast_rule(gpu)
    rule["ci"] = [1.2, 1.6]
    rule["speedup"] = 1.2 if edge == "low" else 1.6
    load_profile(_sealed(tmp_path, gpu))
    rule["speedup"] = 1.19 if edge == "low" else 1.61
    assert _refused(tmp_path, gpu).endswith(f"ci: [1.2, 1.6] does not contain the speedup {rule['speedup']}")


def test_a_rule_exactly_as_fast_as_nccl_is_read_and_a_slower_one_is_not(
    tmp_path: Path, gpu: dict[str, Any]
) -> None:
    rule = _first_fast_rule(gpu)
    rule.update(speedup=1.0, ci=[0.9, 1.1])
    rule.pop("alternatives", None)
    load_profile(_sealed(tmp_path, gpu))
    rule["speedup"] = 0.999
    assert "speedup: 0.999 is slower than the baseline" in _refused(tmp_path, gpu)


# -- the CPU harness's profile ----------------------------------------------------------------------------


def test_the_cpu_harness_profile_is_read(tmp_path: Path, cpu: dict[str, Any]) -> None:
    profile = load_profile(_sealed(tmp_path, cpu))
    backends = {rule.backend for entry in profile.decisions for rule in entry.rules}
    assert backends == {"gloo", "nccl"}  # gloo's baseline rules, and NCCL above the sizes measured


@pytest.mark.parametrize(("speedup", "ci"), [(1.0, [0.99, 1.0]), (1.0, [1.0, 1.01]), (1.01, [1.0, 1.02])])
def test_a_cpu_baseline_rule_states_exactly_one_against_itself(
    tmp_path: Path, cpu: dict[str, Any], speedup: float, ci: list[float]
) -> None:
    rule = cpu["decisions"][0]["rules"][0]
    assert rule["backend"] == "gloo"
    rule.update(speedup=speedup, ci=ci)
    assert _refused(tmp_path, cpu) == (
        "decisions[0].rules[0].speedup: the baseline against itself is exactly 1.0 (ci [1.0, 1.0])"
    )


def test_a_faster_cpu_backend_states_its_measured_speedup(tmp_path: Path, cpu: dict[str, Any]) -> None:
    rule = cpu["decisions"][0]["rules"][0]
    rule.update(backend="gloo_ring", speedup=1.3, ci=[1.1, 1.5])
    cpu.pop("measurements", None)  # the harness run's own price table would give gloo_ring other figures
    profile = load_profile(_sealed(tmp_path, cpu))
    assert profile.decisions[0].rules[0].backend == "gloo_ring"


@pytest.mark.parametrize(
    ("where", "backend"), [("cpu", "trtllm_oneshot"), ("gpu", "gloo"), ("gpu", "gloo_ring")]
)
def test_a_backend_of_the_other_kind_of_node_is_refused(
    tmp_path: Path, cpu: dict[str, Any], gpu: dict[str, Any], where: str, backend: str
) -> None:
    data = cpu if where == "cpu" else gpu
    rule = _first_fast_rule(data) if where == "gpu" else data["decisions"][0]["rules"][0]
    rule.update(backend=backend, speedup=1.3, ci=[1.1, 1.5])
    rule.pop("alternatives", None)
    kind = "a GPU backend; this is a CPU-harness profile" if where == "cpu" else "a CPU test-harness backend"
    assert f"backend: {backend} is {kind}" in _refused(tmp_path, data)
