"""TensorRT-LLM's ``AUTO`` lookup table: which strategy ``selectStrategyLookUpTable`` returns for a
message of ``tokens`` x ``hidden`` at a TP size, SM version and fusion op -- its preference, nothing
about whether the kernel may run (``trtllm.py`` keeps that admission apart).

The table itself is in the manifest (``tables.allreduce_auto_table``), extracted by
``scripts/extract_knobs.py`` from ``cpp/tensorrt_llm/common/customAllReduceUtils.h`` at the pin; this
module only does what the C++ does with its indices (pinned header, lines 89-124):

- ``sm_version < 100`` -> the SM90 table, ``>= 100`` -> the SM100 table: SM 12.0 reads SM100's.
- ``tp_index = static_cast<size_t>(std::log2(tp) - 1)``: the conversion truncates toward zero, so
  TP 3 reads the TP2 rows, TP 5-7 the TP4 rows, TP 9-15 the TP8 rows; TP 16 is past the table.
- ``num_token_index = static_cast<size_t>(std::log2(num_tokens))``: floor(log2), so tokens in
  [2^i, 2^(i+1)) share entry i; 32768 tokens and more are past the table.
- ``hidden_size_index = static_cast<size_t>(std::log2(hidden) - 7)``: floor(log2(hidden)) - 7, so a
  served hidden between buckets reads the bucket below (5120 and 7168 read 4096's); 16384 and more are
  past the table. Below 128 the double is negative: in (-1, 0) it truncates to 0 (hidden 65-127 read
  the 128 bucket); at -1 or below the conversion is undefined behaviour, modelled as past the table.
- Any index past the table returns the header's fallback (``NCCL_SYMMETRIC`` at the pin).

Integer floor(log2) is used (``int.bit_length``): it equals the C++ double ``log2`` for every count
the table can index (below 2^15 tokens, 2^14 hidden).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from topo_gate.launchers import knobs

LAUNCHER = "trtllm"
#: ``selectStrategyLookUpTable`` folds every SM below 100 into the SM90 table, every SM from 100 on
#: into the SM100 table (pinned header lines 98-108).
SM100_FROM = 100
#: ``hidden_size_index = log2(hidden) - 7``: the first bucket is 2^7 = 128 (pinned header line 94).
HIDDEN_FIRST_LOG2 = 7
#: ``tp_index = log2(tp) - 1``: the first TP row is 2^1 = 2 (pinned header line 91).
TP_FIRST_LOG2 = 1


@dataclass(frozen=True)
class Table:
    """The extracted table and what its integers mean."""

    rows: dict[int, list[list[list[list[int]]]]]  # sm -> [tp][fusion][hidden][tokens] -> strategy int
    fusion_index: dict[str, int]  # AllReduceFusionOp name -> fusion index
    strategy_names: dict[int, str]  # AllReduceStrategyType value -> name
    out_of_range: str  # the strategy name returned past the table


@cache
def table() -> Table:
    """The pinned release's table, from the manifest."""
    values = knobs.table(LAUNCHER, "allreduce_strategy_values")
    return Table(
        rows={int(sm): rows for sm, rows in knobs.table(LAUNCHER, "allreduce_auto_table").items()},
        fusion_index=dict(knobs.table(LAUNCHER, "allreduce_auto_table_fusion_index")),
        strategy_names={int(v): name for name, v in values.items()},
        out_of_range=knobs.table(LAUNCHER, "allreduce_auto_table_out_of_range"),
    )


def sm_table(capability: tuple[int, int]) -> int:
    """The table an SM reads: ``getSMVersion()`` is ``major * 10 + minor``."""
    major, minor = capability
    return 90 if major * 10 + minor < SM100_FROM else 100


def _truncated_log2_index(value: int, first_log2: int) -> int | None:
    """``static_cast<size_t>(std::log2(value) - first_log2)``; None where that is undefined (<= -1)."""
    floor_log2 = value.bit_length() - 1
    if floor_log2 >= first_log2:
        return floor_log2 - first_log2
    # log2(value) - first_log2 is negative: in (-1, 0) it truncates to 0, below it is undefined.
    return 0 if floor_log2 == first_log2 - 1 and value & (value - 1) else None


def tp_index(tp: int) -> int | None:
    return _truncated_log2_index(tp, TP_FIRST_LOG2)


def hidden_index(hidden: int) -> int | None:
    return _truncated_log2_index(hidden, HIDDEN_FIRST_LOG2)


def token_index(tokens: int) -> int:
    return tokens.bit_length() - 1


def strategy(*, capability: tuple[int, int], tp: int, fusion_op: str, hidden: int, tokens: int) -> str:
    """The strategy name ``selectStrategyLookUpTable`` returns (``ONESHOT``, ``TWOSHOT``, ``NCCL``, ...)."""
    t = table()
    sm_rows = t.rows.get(sm_table(capability))
    indices = (tp_index(tp), t.fusion_index[fusion_op], hidden_index(hidden), token_index(tokens))
    node: object = sm_rows
    for index in indices:
        if index is None or not isinstance(node, list) or index >= len(node):
            return t.out_of_range
        node = node[index]
    assert isinstance(node, int)
    return t.strategy_names[node]


def token_buckets(max_tokens: int) -> list[tuple[int, int]]:
    """``[first, last]`` token counts (inclusive) sharing one table entry, covering 1..max_tokens."""
    buckets = []
    first = 1
    while first <= max_tokens:
        last = min(2 * first - 1, max_tokens)
        buckets.append((first, last))
        first *= 2
    return buckets
