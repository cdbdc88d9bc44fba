"""SGLang's custom all-reduce v2 as ``custom_v2_dispatch`` reproduces it: admission, workspace sizes and
the algorithm per size.

The rules without a table run everywhere. The rest run on SGLang's own tuning table and its own
``_pick_config``, executed from the pinned release's files (``sglang_v2_sources``: skipped without them),
so what is compared is the release, not numbers copied from it.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_v2_sources import config_module, sglang_pick_config

from topo_gate.trials.backends import custom_v2_dispatch as dispatch
from topo_gate.trials.backends.custom_v2 import expandable_segments

MIB = 1024 * 1024
#: hidden 7168 in bf16: one token is 14336 bytes (DeepSeek-V3's hidden size, the bundled profiles').
TOKEN_BYTES = 7168 * 2
#: Multiprocessor counts of the GPUs SGLang tuned on (H200: 132 SMs, as the H200 reported; B200: 148).
SM_COUNTS = {"sm90": 132, "sm100": 148, "sm107": 148}


@pytest.mark.parametrize(
    ("world_size", "group_class", "dtype", "expected"),
    [
        (2, "nvswitch", "bfloat16", None),
        (8, "nvlink", "float16", None),  # every pair direct NVLink (an NVLink mesh or bridge)
        (4, "nvswitch", "float32", None),
        (9, "nvswitch", "bfloat16", "TP 9 is not in v2's table for this GPU (TP 2, 3, 4, 5, 6, 7, 8)"),
        (2, "pix", "bfloat16", "every GPU pair is on NVLink; group class is pix"),
        (2, None, "bfloat16", "group class is unknown"),
        (2, "nvswitch", "float64", "dtype float64 not supported"),
    ],
)
def test_whole_run_admission(
    world_size: int, group_class: str | None, dtype: str, expected: str | None
) -> None:
    reason = dispatch.v2_unavailable(
        world_size=world_size,
        supported_world_sizes=(2, 3, 4, 5, 6, 7, 8),
        group_class=group_class,
        dtype=dtype,
    )
    assert reason == expected if expected is None else expected in reason


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, True),
        ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64, expandable_segments : true"}, True),
        ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}, False),
        ({"PYTORCH_ALLOC_CONF": "expandable_segments:True"}, True),
    ],
)
def test_expandable_segments_are_read_from_the_allocator_config(
    environ: dict[str, str], expected: bool
) -> None:
    assert expandable_segments(environ) is expected


@pytest.fixture(scope="module")
def tables() -> dict[str, dict[int, Any]]:
    configs = config_module()
    return {
        "sm90": configs._sm90_configs(SM_COUNTS["sm90"]),
        "sm100": configs._sm100_configs(SM_COUNTS["sm100"]),
        "sm107": configs._sm107_configs(SM_COUNTS["sm107"]),
    }


@pytest.fixture(scope="module")
def pick_config() -> Any:
    return sglang_pick_config()


def runs(config: Any, *, graph: bool, max_tokens: int = 4096) -> list[tuple[int, int, tuple | None]]:
    """The algorithm per token count at hidden 7168, as runs (first, last, (algo, graph, multicast))."""
    found: list[tuple[int, int, tuple | None]] = []
    for tokens in range(1, max_tokens + 1):
        choice = dispatch.pick(config, tokens * TOKEN_BYTES, graph=graph)
        key = None if choice is None else (choice.algo, choice.use_graph, choice.use_multicast)
        if found and found[-1][2] == key:
            found[-1] = (found[-1][0], tokens, key)
        else:
            found.append((tokens, tokens, key))
    return found


PUSH, PULL2 = dispatch.ONE_SHOT_PUSH, dispatch.TWO_SHOT_PULL
#: What SGLang 0.5.23 runs inside CUDA graphs on an H200 at hidden 7168, default 16 MiB limit (1170
#: tokens): (no multicast mapping, with one).
SM90_GRAPH = {
    2: ([(1, 1170, (PUSH, False, False)), (1171, 4096, None)],) * 2,
    4: ([(1, 27, (PUSH, False, False)), (28, 1170, (PULL2, True, False)), (1171, 4096, None)],) * 2,
    8: (
        [(1, 9, (PUSH, False, False)), (10, 1170, (PULL2, True, False)), (1171, 4096, None)],
        [(1, 9, (PUSH, False, False)), (10, 36, (PULL2, True, False)), (37, 1170, (PULL2, False, True)), (1171, 4096, None)],
    ),
}  # fmt: skip


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_sm90_picks_per_size_at_hidden_7168(tables: dict[str, dict[int, Any]], world_size: int) -> None:
    workspace = dispatch.size_workspace(tables["sm90"][world_size], world_size, max_size=16 * MIB)
    without, with_multicast = SM90_GRAPH[world_size]
    assert runs(dispatch.without_multicast(workspace.config), graph=True) == without
    assert runs(workspace.config, graph=True) == with_multicast
    assert workspace.max_pull_size == 16 * MIB  # every pull threshold clipped to the 16 MiB limit


def test_sm90_tp2_workspace_is_sixteen_mib_per_slot(tables: dict[str, dict[int, Any]]) -> None:
    workspace = dispatch.size_workspace(tables["sm90"][2], 2, max_size=16 * MIB)
    assert (workspace.max_push_size, workspace.max_pull_size, workspace.pull_enabled) == (
        16 * MIB,
        16 * MIB,
        True,
    )
    # 2 x TP push slots, the pull buffer, one 128-byte semaphore per pull block (64 on SM90)
    assert workspace.symmetric_bytes(2) == 4 * 16 * MIB + 16 * MIB + 64 * 128


def _mine(config: Any, nbytes: int, graph: bool) -> tuple | None:
    choice = dispatch.pick(config, nbytes, graph=graph)
    return None if choice is None else (choice.algo, choice.use_graph, choice.use_multicast)


def _sglang_answer(pick_config: Any, config: Any, nbytes: int, graph: bool) -> tuple | None:
    answer = pick_config(types.SimpleNamespace(config=config), nbytes, graph)
    return None if answer is None else (answer.algo.algo_name, answer.use_graph, answer.use_multicast)


def _boundaries(config: Any) -> list[int]:
    edges = {0}
    for heuristic in (config.graph, config.eager):
        edges |= {
            heuristic.one_shot_push_threshold, heuristic.two_shot_push_threshold, heuristic.one_shot_pull_threshold,
            heuristic.two_shot_pull_threshold, heuristic.mc.min_bytes, heuristic.mc.max_bytes,
        }  # fmt: skip
    return sorted({max(1, edge + delta) for edge in edges for delta in (-16, -1, 0, 1, 16)})


def test_pick_is_sglangs_pick_config_at_every_threshold(
    tables: dict[str, dict[int, Any]], pick_config: Any
) -> None:
    compared = 0
    for table in tables.values():
        for world_size, base in table.items():
            for max_size in (16 * MIB, 128 * MIB, 64 * 1024):
                tuned = dispatch.size_workspace(base, world_size, max_size=max_size).config
                for config in (tuned, dispatch.without_multicast(tuned)):
                    for nbytes in _boundaries(config):
                        for graph in (True, False):
                            mine = _mine(config, nbytes, graph)
                            assert mine == _sglang_answer(pick_config, config, nbytes, graph), nbytes
                            compared += 1
    assert compared > 1000


@given(st.integers(1, 256 * MIB), st.booleans(), st.sampled_from(["sm90", "sm100", "sm107"]), st.data())
def test_pick_is_sglangs_pick_config_at_any_size(
    tables: dict[str, dict[int, Any]],
    pick_config: Any,
    nbytes: int,
    graph: bool,
    arch: str,
    data: st.DataObject,
) -> None:
    world_size = data.draw(st.sampled_from(sorted(tables[arch])))
    config = dispatch.size_workspace(tables[arch][world_size], world_size, max_size=16 * MIB).config
    assert _mine(config, nbytes, graph) == _sglang_answer(pick_config, config, nbytes, graph)


def test_forced_sizes_lift_the_thresholds_to_the_forced_workspaces(tables: dict[str, dict[int, Any]]) -> None:
    # SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_{PULL,PUSH}_SIZE_KB: the workspaces are exactly the forced sizes and
    # 1shot_push / 2shot_pull reach them (custom_all_reduce_v2.py:151-169).
    workspace = dispatch.size_workspace(
        tables["sm90"][8], 8, max_size=16 * MIB, force_pull_kb=64 * 1024, force_push_kb=1024
    )
    assert (workspace.max_push_size, workspace.max_pull_size) == (MIB, 64 * MIB)
    config = dispatch.without_multicast(workspace.config)
    assert dispatch.pick(config, MIB, graph=True) == dispatch.Pick(PUSH)
    assert dispatch.pick(config, 64 * MIB, graph=True) == dispatch.Pick(PULL2, use_graph=True)
    assert dispatch.pick(config, 64 * MIB + 16, graph=True) is None


def test_size_admission_on_the_sm90_table(tables: dict[str, dict[int, Any]]) -> None:
    tp8 = dispatch.size_workspace(tables["sm90"][8], 8, max_size=16 * MIB).config
    runtime = dispatch.without_multicast(tp8)

    def reason(nbytes: int, allow_multicast: bool = False) -> str | None:
        return dispatch.v2_size_unavailable(
            nbytes=nbytes, tuned=tp8, runtime=runtime, allow_multicast=allow_multicast
        )

    assert reason(9 * TOKEN_BYTES) is None  # 1shot_push
    assert reason(36 * TOKEN_BYTES) is None  # 2shot_pull over the graph pointer table
    # SGLang's own multicast range starts at 512 KiB (37 tokens)
    assert "over NVLink multicast" in (reason(37 * TOKEN_BYTES) or "")
    assert reason(37 * TOKEN_BYTES, allow_multicast=True) is None
    assert "SGLang sends 16787456 B to NCCL" in (reason(1171 * TOKEN_BYTES) or "")
    assert "16-byte vectors" in (reason(14 * 1024 + 8) or "")
