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


def test_a_rule_exactly_as_fast_as_nccl_in_context_is_read_and_a_slower_one_is_not(
    tmp_path: Path, gpu: dict[str, Any]
) -> None:
    rule = _first_fast_rule(gpu)
    rule["in_context"] = 1.0
    load_profile(_sealed(tmp_path, gpu))
    rule["in_context"] = 0.999
    assert _refused(tmp_path, gpu) == (
        "decisions[0].rules[0].in_context: 0.999 is slower than the baseline in context: a rule names only "
        "a backend measured faster there too"
    )


# -- the CPU harness's profile ----------------------------------------------------------------------------


def test_the_cpu_harness_profile_is_read(tmp_path: Path, cpu: dict[str, Any]) -> None:
    profile = load_profile(_sealed(tmp_path, cpu))
    backends = {rule.backend for entry in profile.decisions for rule in entry.rules}
    assert backends == {"gloo", "nccl"}  # gloo's baseline rules, and NCCL above the sizes measured


@pytest.mark.parametrize(
    ("speedup", "ci"),
    [(1.0, [0.99, 1.0]), (1.0, [1.0, 1.01]), (1.01, [1.0, 1.02]), (0.99, [1.0, 1.0]), (1.01, [1.0, 1.0])],
)
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


# -- the node's TP groups ---------------------------------------------------------------------------------


@pytest.mark.parametrize("listed", ["pcie", "nvlink"])  # sorting after and before the decision's "nvswitch"
def test_a_decision_for_a_group_the_node_lists_under_another_class_is_refused(
    tmp_path: Path, gpu: dict[str, Any], listed: str
) -> None:
    # The reader looks decisions up by the class the node gives a group: a decision stated for another
    # class would never be found, whichever way the two names sort.
    (group,) = gpu["node"]["hardware"]["tp_groups"]["2"]
    assert gpu["decisions"][0]["group_class"] == "nvswitch"
    group["class"] = listed
    assert _refused(tmp_path, gpu) == (
        f"decisions[0].group_class: the node lists GPUs [0, 1] as {listed!r}, not 'nvswitch'"
    )


# -- the price table (v1.3) -------------------------------------------------------------------------------


def test_a_composite_of_a_cpu_backend_in_a_gpu_price_table_is_refused(
    tmp_path: Path, priced: dict[str, Any]
) -> None:
    # A composite column is checked by its plain backend (the name less "+rmsnorm"), as a rule's would be.
    table = priced["measurements"][1]
    assert table["pattern"] == "allreduce_rmsnorm"
    table["backends"] = {
        ("gloo_ring+rmsnorm" if name == "trtllm_oneshot+rmsnorm" else name): prices
        for name, prices in table["backends"].items()
    }
    assert _refused(tmp_path, priced) == (
        "measurements[1].backends.gloo_ring+rmsnorm: gloo_ring is a CPU test-harness backend; this is a GPU profile"
    )


def _oneshot_rung(priced: dict[str, Any]) -> tuple[dict[str, Any], list[float], list[float]]:
    """The first decision's one-shot rung, and the table's isolated and in-context ratios over its range."""
    rule = priced["decisions"][0]["rules"][0]
    table = priced["measurements"][0]
    assert rule["backend"] == "trtllm_oneshot" and table["pattern"] == "allreduce"
    nccl, own = table["backends"]["nccl"], table["backends"]["trtllm_oneshot"]
    columns = [c for c, nbytes in enumerate(table["sizes"]) if nbytes <= rule["max_bytes"]]
    isolated = [nccl["median_us"][c] / own["median_us"][c] for c in columns]
    in_context = [nccl["in_context_us"][c] / own["in_context_us"][c] for c in columns]
    return rule, isolated, in_context


@pytest.mark.slow
def test_a_speedup_at_the_price_tables_bound_is_read_and_one_past_its_slack_is_not(
    tmp_path: Path, priced: dict[str, Any]
) -> None:
    # The rung keeps 3 decimals (6 significant digits here), the table 6 significant digits: a stated
    # speed-up equal to the medians' weakest ratio, rounded, is what the table gives and must load.
    rule, isolated, _ = _oneshot_rung(priced)
    bound = min(isolated)
    at = priced["measurements"][0]["sizes"][isolated.index(bound)]
    for speedup in (round(bound, 3), round(bound, 6)):
        rule.update(speedup=speedup, ci=[round(bound - 0.01, 3), round(bound + 0.01, 3)])
        load_profile(_sealed(tmp_path, priced))
    past = float(f"{bound * (1 + 1e-4) + 1e-3 + 1e-4:.6g}")
    rule.update(speedup=past, ci=[round(bound - 0.01, 3), round(bound + 0.01, 3)])
    assert _refused(tmp_path, priced) == (
        f"decisions[0].rules[0].speedup: trtllm_oneshot {past}x, but the price table's medians give it "
        f"{bound:.3f}x at {at} B"
    )


@pytest.mark.slow
def test_an_in_context_speedup_within_the_slack_of_the_tables_is_read_and_one_past_it_is_not(
    tmp_path: Path, priced: dict[str, Any]
) -> None:
    # Off by the absolute slack (1e-3, a rung's last decimal) from one of the table's in-context ratios:
    # still that ratio. Past the absolute and the relative slack together: none of them.
    rule, _, in_context = _oneshot_rung(priced)
    weakest = min(in_context)
    for stated in (weakest, weakest + 1e-3, weakest - 1e-3):
        rule["in_context"] = float(f"{stated:.6g}")
        load_profile(_sealed(tmp_path, priced))
    past = float(f"{weakest + 1e-3 + 1e-4 * weakest + 1e-4:.6g}")
    rule["in_context"] = past
    shown = ", ".join(f"{ratio:.3f}x" for ratio in in_context)
    assert _refused(tmp_path, priced) == (
        f"decisions[0].rules[0].in_context: {past}x is none of the price table's in-context speed-ups here ({shown})"
    )


def test_a_gpu_backend_priced_in_a_cpu_harness_table_is_refused(tmp_path: Path, cpu: dict[str, Any]) -> None:
    # Whatever the name sorts against the CPU baseline ("gloo"): a one-shot column is a GPU backend.
    table = cpu["measurements"][0]
    table["backends"]["trtllm_oneshot"] = copy.deepcopy(table["backends"]["gloo_ring"])
    assert _refused(tmp_path, cpu) == (
        "measurements[0].backends.trtllm_oneshot: trtllm_oneshot is a GPU backend; this is a CPU-harness profile"
    )
