"""scripts/extract_knobs.py reads TensorRT-LLM's AUTO lookup table from the C++ header text itself.

The header is not in the repository; these tests feed the parser a small header of the same shape
(written here, two TP rows of two fusion ops) and check what it extracts and what it refuses.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "extract_knobs.py"
# The extractor imports its sibling scripts/extract_route_tables.py, as it does when run as a script.
sys.path.insert(0, str(SCRIPT.parent))
_spec = importlib.util.spec_from_file_location("extract_knobs", SCRIPT)
assert _spec is not None and _spec.loader is not None
extract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(extract)

HEADER = """
enum class AllReduceStrategyType : int8_t
{
    NCCL = 0,
    ONESHOT = 4,
    TWOSHOT = 5,
    NCCL_SYMMETRIC = 8,
};
inline size_t getMaxRequiredWorkspaceSize(int worldSize) noexcept
{
    char const* envWorkspaceSize = std::getenv("WORKSPACE_ENV");
    if (envWorkspaceSize != nullptr)
    {
        return static_cast<size_t>(std::atoi(envWorkspaceSize));
    }
    return 1234; // a comment with {braces, 99}
}
inline std::unordered_map<AllReduceFusionOp, int> mapFusionOpToIndex = {
    {AllReduceFusionOp::NONE, 0},
    {AllReduceFusionOp::RESIDUAL_RMS_NORM, 1},
};
inline AllReduceStrategyType selectStrategyLookUpTable(size_t num_tokens)
{
    if (num_tokens > 4)
    {
        return AllReduceStrategyType::NCCL_SYMMETRIC;
    }
    return static_cast<AllReduceStrategyType>(num_tokens);
}
inline AllReduceBestStrategyTableType AllReduceBestStrategyTableSM90
    = {{    // TP=2
           {// Fusion=NONE
               {4, 4, 0}, {4, 5, 0}},
           {// Fusion=RESIDUAL_RMS_NORM
               {4, 4, 4}, {4, 4, 5}}}};
inline AllReduceBestStrategyTableType AllReduceBestStrategyTableSM100 = {{{{4}}}};
inline const std::unordered_map<int, AllReduceBestStrategyTableType> AllReduceBestStrategyTable = {
    {90, AllReduceBestStrategyTableSM90},
    {100, AllReduceBestStrategyTableSM100},
};
"""


def test_the_table_and_its_meaning_come_from_the_header_text() -> None:
    tables = extract.trtllm_header_tables(HEADER)
    assert tables["allreduce_strategy_values"] == {"NCCL": 0, "ONESHOT": 4, "TWOSHOT": 5, "NCCL_SYMMETRIC": 8}
    assert tables["allreduce_auto_table_fusion_index"] == {"NONE": 0, "RESIDUAL_RMS_NORM": 1}
    assert tables["allreduce_auto_table"] == {
        "90": [[[[4, 4, 0], [4, 5, 0]], [[4, 4, 4], [4, 4, 5]]]],
        "100": [[[[4]]]],
    }
    assert tables["allreduce_auto_table_out_of_range"] == "NCCL_SYMMETRIC"
    assert tables["allreduce_routing_limit_default"] == 1234
    assert tables["allreduce_routing_limit_env"] == ["WORKSPACE_ENV"]


def test_a_table_registered_under_another_sm_is_refused() -> None:
    swapped = HEADER.replace("{90, AllReduceBestStrategyTableSM90}", "{90, AllReduceBestStrategyTableSM100}")
    with pytest.raises(ValueError, match="registered"):
        extract.trtllm_header_tables(swapped)


def test_anything_but_numbers_in_a_table_is_refused() -> None:
    with pytest.raises(ValueError, match="unexpected"):
        extract.trtllm_header_tables(HEADER.replace("{4, 5, 0}", "{4, FIVE, 0}"))


def test_two_fallbacks_in_the_lookup_are_refused() -> None:
    doubled = HEADER.replace(
        "return static_cast", "return AllReduceStrategyType::NCCL;\n    return static_cast"
    )
    with pytest.raises(ValueError, match="fallback"):
        extract.trtllm_header_tables(doubled)


# A Python file of the same shape as TensorRT-LLM's: the env reads the route model keys on, and one it
# does not (kept out of the manifest by RELEVANT).
PYTHON = """
import os

def mpi_disabled() -> bool:
    return os.environ.get("TLLM_DISABLE_MPI") == "1"

def force_all_reduce_deterministic():
    return os.getenv("FORCE_DETERMINISTIC", "0") == "1" or os.getenv("FORCE_ALL_REDUCE_DETERMINISTIC", "0") == "1"

def is_testing():
    return os.environ.get("TLLM_TEST_MNNVL", "0") == "1" and os.environ.get("TLLM_LOG_LEVEL") is None
"""


def test_the_env_the_route_model_reads_is_kept_and_nothing_else() -> None:
    manifest = extract.keep_relevant(
        extract.trtllm_manifest(extract.Source({"tensorrt_llm/_utils.py": PYTHON})), "trtllm"
    )
    assert manifest["env"] == {
        "FORCE_ALL_REDUCE_DETERMINISTIC": {"default": "0"},
        "FORCE_DETERMINISTIC": {"default": "0"},
        "TLLM_DISABLE_MPI": {"default": None},
        "TLLM_TEST_MNNVL": {"default": "0"},
    }


def test_every_env_var_the_route_model_reads_survives_extraction() -> None:
    from topo_gate.launchers.routes import trtllm

    read = {
        trtllm.WORKSPACE_ENV,
        trtllm.AUTOTUNE_OFF_ENV,
        trtllm.MPI_OFF_ENV,
        trtllm.MNNVL_TEST_ENV,
        *trtllm.DETERMINISTIC_ENVS,
    }
    assert {
        name for name in read if not (extract.RELEVANT.search(name) or name in extract.ROUTED_ENV)
    } == set()
