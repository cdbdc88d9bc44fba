"""The price table's semantic bounds (docs/profile.md, "Bounds on the numbers"), at each bound: a
per-call price within the physical range, a CI within its factor of the median, a dtype a probe
writes, finite numbers. Each case is the synthetic PCIe profile resealed with one change and read as
``validate``, the reader and the planners read it: accepted just inside, refused just outside, with
the field named; a planner refused so changes nothing and says why, in RFC 8259 JSON."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from topo_gate.cli import main
from topo_gate.launchers.plan.request import PlanRequest
from topo_gate.launchers.vllm import vllm_plan
from topo_gate.profile import ProfileInvalid, compute_digest, load_profile
from topo_gate.profile.measurements import MAX_CALL_US, MIN_CALL_US
from topo_gate.profile.semantics import CPU_CI_FACTOR, GPU_CI_FACTOR
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

REPO = Path(__file__).resolve().parents[2]
PCIE = REPO / "profiles" / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml"
FINGERPRINT = "sha256:" + "5c" * 32
CPU_HARNESS = REPO / "tests" / "fixtures" / "profiles" / "cpu-harness-tp2.yaml"
#: measurements[1] is TP 2 allreduce_rmsnorm; vLLM's default path at 1 token (~13 us in context),
#: which no rule names, so its prices can change without contradicting a rule.
FUSED = 1
DEFAULT_PATH = "vllm_custom+rmsnorm"


@pytest.fixture(scope="module")
def pcie() -> dict[str, Any]:
    data = parse_yaml(PCIE.read_text(encoding="utf-8"))
    del data["digest"]
    return data


@pytest.fixture
def data(pcie: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(pcie)


def _sealed(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "resealed.yaml"
    path.write_text(to_yaml({**data, "digest": compute_digest(data)}), encoding="utf-8")
    return path


def _refusal(tmp_path: Path, data: dict[str, Any]) -> str:
    with pytest.raises(ProfileInvalid) as refused:
        load_profile(_sealed(tmp_path, data))
    return str(refused.value)


def _prices(data: dict[str, Any], name: str = DEFAULT_PATH) -> dict[str, Any]:
    return data["measurements"][FUSED]["backends"][name]


def _everywhere(data: dict[str, Any], value: float) -> None:
    """Every price of the default path at ``value`` (median, CI, in context): a backend resealed so."""
    prices = _prices(data)
    for key in ("median_us", "in_context_us"):
        prices[key] = [None if v is None else value for v in prices[key]]
    for key in ("ci_us", "in_context_ci_us"):
        prices[key] = [None if ci is None else [value, value] for ci in prices[key]]


# -- a per-call price within the physical range -------------------------------------------------------


@pytest.mark.parametrize("value", [MIN_CALL_US, 1.0, MAX_CALL_US])
def test_a_price_at_the_physical_bounds_is_read(tmp_path: Path, data: dict[str, Any], value: float) -> None:
    _everywhere(data, value)
    load_profile(_sealed(tmp_path, data))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (math.nextafter(MIN_CALL_US, 0), "us is faster than any all-reduce kernel (at least 0.5 us a call)"),
        (math.nextafter(MAX_CALL_US, math.inf), "us is longer than a probe can time (at most 60000000 us"),
        (1e300, "1e+300 us is longer than a probe can time"),
        (1e307, "1e+307 us is longer than a probe can time"),
    ],
)
def test_a_price_past_the_physical_bounds_is_refused(
    tmp_path: Path, data: dict[str, Any], value: float, words: str
) -> None:
    _everywhere(data, value)
    message = _refusal(tmp_path, data)
    assert message.startswith(f"measurements[{FUSED}].backends.{DEFAULT_PATH}.median_us[0]: "), message
    assert words in message


def test_a_transition_longer_than_a_probe_can_time_is_refused(tmp_path: Path, data: dict[str, Any]) -> None:
    transition = _prices(data, "trtllm_oneshot_vllm+rmsnorm")["transition"]
    column = next(c for c, cost in enumerate(transition["cost_us"][0]) if cost is not None)
    transition["cost_us"][0][column] = MAX_CALL_US
    load_profile(_sealed(tmp_path, data))
    transition["cost_us"][0][column] = math.nextafter(MAX_CALL_US, math.inf)
    message = _refusal(tmp_path, data)
    assert f"trtllm_oneshot_vllm+rmsnorm.transition.cost_us[0][{column}]: " in message
    assert "longer than a probe can time" in message


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_number_that_is_not_finite_is_refused(value: float) -> None:
    from topo_gate.profile.measurements import BackendPrices

    with pytest.raises(ProfileInvalid, match=r"^median_us\[0\]: must be a finite number, found float"):
        BackendPrices(status=("ok",), median_us=(value,), ci_us=((1.0, 2.0),))


# -- a CI within a bounded factor of its median --------------------------------------------------------


def _first_priced(prices: dict[str, Any], key: str) -> int:
    return next(i for i, value in enumerate(prices[key]) if value is not None)


@pytest.mark.parametrize(("side", "key"), [(1, "ci_us"), (0, "ci_us"), (1, "in_context_ci_us")])
def test_a_ci_at_its_factor_is_read_and_one_past_it_refused(
    tmp_path: Path, data: dict[str, Any], side: int, key: str
) -> None:
    prices = _prices(data)
    values = "median_us" if key == "ci_us" else "in_context_us"
    index = _first_priced(prices, values)
    median = max(prices[values][index], prices["median_us"][index])
    edge = median * GPU_CI_FACTOR if side else median / GPU_CI_FACTOR
    prices[key][index][side] = edge
    load_profile(_sealed(tmp_path, data))
    prices[key][index][side] = math.nextafter(edge, math.inf if side else 0.0)
    message = _refusal(tmp_path, data)
    assert message.startswith(f"measurements[{FUSED}].backends.{DEFAULT_PATH}.{key}[{index}]: "), message
    assert f"reaches more than 10x from the median {median}: no probe's 95% CI is that wide" in message


def test_the_issue_s_ci_up_to_a_billion_us_on_a_13_us_kernel_is_refused(
    tmp_path: Path, data: dict[str, Any]
) -> None:
    prices = _prices(data)
    assert 12 < prices["in_context_us"][0] < 14  # the ~13 us kernel of the issue
    prices["in_context_ci_us"][0][1] = 1e9
    assert "in_context_ci_us[0][1]: 1000000000.0 us is longer than a probe can time" in _refusal(
        tmp_path, data
    )
    prices["in_context_ci_us"][0][1] = 1e6  # within what a probe can time, but not this kernel's noise
    assert "in_context_ci_us[0]: [" in _refusal(tmp_path, data)


def test_an_in_context_ci_may_reach_down_to_zero(tmp_path: Path, data: dict[str, Any]) -> None:
    """An in-context price is a difference (layer minus GEMM) that noise may leave at 0: no lower
    bound on its CI, as ``decide`` writes a negative difference as 0."""
    prices = _prices(data)
    prices["in_context_ci_us"][0][0] = 0.0
    load_profile(_sealed(tmp_path, data))


def test_the_cpu_harness_has_a_wider_factor() -> None:
    """The CPU harness on a loaded VM records CIs wider than any GPU run's (10.9x for gloo in the
    recorded evidence): the CPU factor is the one its profiles are held to."""
    data = parse_yaml(CPU_HARNESS.read_text(encoding="utf-8"))
    assert data["node"]["hardware"]["device"] == "cpu"
    assert CPU_CI_FACTOR > GPU_CI_FACTOR
    load_profile(CPU_HARNESS)


# -- known dtypes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_a_dtype_a_probe_writes_is_read(tmp_path: Path, data: dict[str, Any], dtype: str) -> None:
    data["trials"]["dtype"] = dtype
    for table in data["measurements"]:
        table["dtype"] = dtype
    load_profile(_sealed(tmp_path, data))


@pytest.mark.parametrize("where", ["trials", "measurements"])
def test_fp8_is_no_dtype_a_probe_writes(tmp_path: Path, data: dict[str, Any], where: str) -> None:
    data["trials"]["dtype"] = "fp8" if where == "trials" else data["trials"]["dtype"]
    for table in data["measurements"]:
        table["dtype"] = "fp8" if where == "measurements" else table["dtype"]
    message = _refusal(tmp_path, data)
    field = "trials.dtype" if where == "trials" else "measurements[0].dtype"
    assert message == f"{field}: unknown dtype 'fp8' (known: bfloat16, float16, float32)"


def test_the_profile_s_dtypes_are_the_probe_s() -> None:
    from topo_gate.cli.probe import DTYPES as PROBE_DTYPES
    from topo_gate.profile.fields import DTYPE_BYTES, DTYPES

    assert set(DTYPES) == set(PROBE_DTYPES.values()) == set(DTYPE_BYTES)


# -- validate, the reader and the planners -------------------------------------------------------------


def test_validate_refuses_a_backend_resealed_at_1e300_us(
    tmp_path: Path, data: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _everywhere(data, 1e300)
    path = _sealed(tmp_path, data)
    assert main(["validate", str(path)]) == 1
    _, err = capsys.readouterr()
    assert "median_us[0]: 1e+300 us is longer than a probe can time" in err


def test_a_planner_changes_nothing_on_a_price_no_probe_could_measure(
    tmp_path: Path, data: dict[str, Any]
) -> None:
    _everywhere(data, 1e300)
    plan = vllm_plan(PlanRequest(_sealed(tmp_path, data), tp=2, model="qwen3-32b", fingerprint=FINGERPRINT))
    assert plan.fallback and plan.args == () and plan.env == {}
    assert "unusable: measurements[1].backends.vllm_custom+rmsnorm.median_us[0]: 1e+300 us is longer" in (
        plan.reason
    )


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not RFC 8259 JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_recommend_json_on_a_price_of_1e307_us_is_rfc_8259(
    tmp_path: Path, data: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _everywhere(data, 1e307)
    argv = ["recommend", str(_sealed(tmp_path, data)), "--launcher", "vllm", "--tp", "2"]
    code = main([*argv, "--model", "qwen3-32b", "--node-fingerprint", FINGERPRINT, "--format", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    plan = _strict_json(out)
    assert plan["fallback"] is True and "1e+307 us is longer than a probe can time" in plan["reason"]
