"""The names a profile may use, and the helpers every schema class builds its fields with.

``schema.py`` re-exports the names (``SCHEMA``, ``NCCL``, ``BACKENDS``, the patterns, the dtypes), which is where
callers import them from. The helpers build one field from plain data and say where a problem is
(``located``), so each class's ``from_dict`` and ``__post_init__`` stay a list of its fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.validate import (
    describe,
    expect_int,
    expect_list,
    expect_positive_float,
    located,
    require,
)

_T = TypeVar("_T")

#: What writers emit. v1.1 added ``Rule.alternatives``; v1.2 added ``Rule.in_context``,
#: ``DecisionEntry.failed``, ``Profile.fleet`` and one backend name per launcher call sequence; v1.3
#: added ``Profile.measurements`` (the price table). Readers accept any ``v1`` / ``v1.N``.
SCHEMA = "topo-gate/profile/v1.3"
NCCL = "nccl"
#: Every backend name schema v1 knows. ``gloo`` and ``gloo_ring`` are the CPU test harness's
#: (torch.distributed's all-reduce and a hand-written ring); ``decide`` never emits them for a GPU
#: profile, but a profile recorded on the harness must still load.
BACKENDS: tuple[str, ...] = (
    NCCL,
    "trtllm_oneshot",
    "trtllm_twoshot",
    "trtllm_fused_oneshot",
    "trtllm_fused_twoshot",
    "symm_mem_oneshot",
    "symm_mem_twoshot",
    "vllm_custom",
    # v1.2: one backend per launcher call sequence (trials/backends).
    "trtllm_oneshot_vllm",
    "trtllm_twoshot_vllm",
    "trtllm_oneshot_sglang",
    "trtllm_twoshot_sglang",
    "trtllm_fused_oneshot_vllm",
    "trtllm_fused_twoshot_vllm",
    "trtllm_fused_oneshot_sglang",
    "trtllm_fused_twoshot_sglang",
    "symm_mem_twoshot_vllm",
    "custom_v2_sglang",
    "pcie_ipc",
    "gloo",
    "gloo_ring",
)
#: The bare collective: one all-reduce of the hidden state.
PLAIN_PATTERN = "allreduce"
#: All-reduce + residual add + RMSNorm: the site a launcher's fusion pass fuses into one kernel.
FUSED_PATTERN = "allreduce_rmsnorm"
#: The patterns a probe measures and a profile decides, the plain one first. Every module names a
#: pattern by these constants (``tests/test_vocabulary.py`` finds any second spelling).
PATTERNS: tuple[str, ...] = (PLAIN_PATTERN, FUSED_PATTERN)
#: Bytes per element of each activation dtype a probe times in (``topo-gate probe --dtype``,
#: ``cli/probe.py``): the worker sizes its tensors by it and the planner turns tokens into message
#: sizes (``tokens x hidden x itemsize``) by it.
DTYPE_BYTES: Mapping[str, int] = MappingProxyType({"bfloat16": 2, "float16": 2, "float32": 4})
#: The dtypes a profile may name; a profile naming another was not written by a probe, and its
#: message sizes could not be converted.
DTYPES: tuple[str, ...] = tuple(DTYPE_BYTES)
#: A plain backend followed by the norm kernel (fusion off): ``trtllm_oneshot+rmsnorm``. Measured in
#: the ``allreduce_rmsnorm`` runs as the launcher's unfused path; priced in ``measurements``, never
#: named by a rule.
COMPOSITE_SUFFIX = "+rmsnorm"


def round6(value: float) -> float:
    # Six significant digits: more than a timing ratio carries, and short enough to read in YAML.
    return float(f"{value:.6g}")


def plain_copy(value: Any) -> Any:
    """A deep copy of JSON-like data with tuples turned into lists (what YAML and JSON can write)."""
    if isinstance(value, Mapping):
        return {key: plain_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_copy(item) for item in value]
    return value


def sub(data: Mapping[str, Any], key: str, build: Callable[[Any], _T]) -> _T:
    """``build`` applied to the required field ``key``, its problems located there."""
    value = require(data, key)
    with located(key):
        return build(value)


def each(values: object, field_name: str, build: Callable[[Any], _T]) -> tuple[_T, ...]:
    """``build`` applied to every item of the list ``values``, each problem located at its index."""
    built = []
    for index, item in enumerate(expect_list(values, field_name)):
        with located(f"{field_name}[{index}]"):
            built.append(build(item))
    return tuple(built)


def or_empty(value: Any, empty: Any) -> Any:
    # An optional section written as `key: null` means the same as leaving it out.
    return empty if value is None else value


def gpu_group(value: object, field_name: str, *, size: int) -> tuple[int, ...]:
    gpus = tuple(
        expect_int(gpu, f"{field_name}[{i}]", minimum=0)
        for i, gpu in enumerate(expect_list(value, field_name))
    )
    if len(set(gpus)) != len(gpus):
        raise ProfileInvalid(f"GPU indices must be distinct, found {list(gpus)}", field_name)
    if len(gpus) != size:
        raise ProfileInvalid(f"must list {size} GPUs (one per TP rank), found {len(gpus)}", field_name)
    return gpus


def of_type(value: object, cls: type[_T], field_name: str) -> _T:
    if not isinstance(value, cls):
        raise ProfileInvalid(f"must be a {cls.__name__}, found {describe(value)}", field_name)
    return value


def typed_items(values: object, cls: type[_T], field_name: str) -> tuple[_T, ...]:
    """The list ``values`` as a tuple of ``cls`` instances (a class built from code gets checked too)."""
    return tuple(of_type(v, cls, f"{field_name}[{i}]") for i, v in enumerate(expect_list(values, field_name)))


def checked_ci(value: object, field_name: str) -> tuple[float, float]:
    bounds = expect_list(value, field_name)
    if len(bounds) != 2:
        raise ProfileInvalid(f"must be [low, high], found {len(bounds)} numbers", field_name)
    low, high = (round6(expect_positive_float(b, f"{field_name}[{i}]")) for i, b in enumerate(bounds))
    if low > high:
        raise ProfileInvalid(f"low {low} is above high {high}", field_name)
    return (low, high)
