"""The preflight table (``probe/preflight.py``): per TP group and launcher, the default path at each
token range, whether this run times it, and if not why and what would.

Rendered from the rows as the evidence records them (plain mappings), so ``probe`` before its trials,
its closing summary and ``probe --replay`` print the same table. Text from the evidence is shown
literally (``file_text``). At 80 columns the why and the action fold under each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN
from topo_gate.report.text import file_text

LAUNCHER_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}
PATTERN_WORDS = {PLAIN_PATTERN: "plain", FUSED_PATTERN: "norm"}
TITLE = "Preflight: each launcher's default path here, and whether this run times it"


NO_ROWS = "No launcher default path to compare on this run: none is timed."


def preflight_view(rows: Sequence[Mapping[str, Any]]) -> Group:
    """The table, a numbered note per distinct reason a path is not timed (why, then what makes it
    timed), and a line saying how many ranges are not timed. The notes stay out of the table so it
    fits 80 columns. No rows (no launcher default to compare, as on the CPU harness): one line
    saying so, and no claim about a table that is not there."""
    if not rows:
        return Group(Text(TITLE, style="bold"), Text(NO_ROWS))
    reasons: dict[tuple[str, str | None], int] = {}
    for row in rows:
        if not row["timed"]:
            reasons.setdefault((row["why"] or "", row["action"]), len(reasons) + 1)
    notes = Table.grid(padding=(0, 1))
    notes.add_column(no_wrap=True)
    notes.add_column(overflow="fold")
    for (why, action), number in reasons.items():
        notes.add_row(Text(f"[{number}]", style="bold yellow"), file_text(why))
        if action:
            notes.add_row(Text(" ->", style="bold"), file_text(action))
    title = Text(TITLE, style="bold")  # above the table, not its title: a narrow table would wrap it
    return Group(title, preflight_table(rows, reasons), notes, Text(untimed_count(rows), style="bold"))


def preflight_table(
    rows: Sequence[Mapping[str, Any]], reasons: Mapping[tuple[str, str | None], int]
) -> Table:
    """One section per (TP, group class, launcher, served architectures); one row per token range;
    an untimed row points at its note in ``reasons``."""
    table = Table(expand=False)
    table.add_column("TP / launcher", overflow="fold")
    table.add_column("site", no_wrap=True)
    table.add_column("tokens", no_wrap=True, justify="right")
    table.add_column("default path", no_wrap=True)
    table.add_column("timed", no_wrap=True)
    previous: tuple[Any, ...] | None = None
    for row in rows:
        key = (row["tp"], row["group_class"], row["launcher"], row["release"], tuple(row["variants"]))
        if previous is not None and key != previous:
            table.add_section()
        timed = (
            Text("yes", style="green")
            if row["timed"]
            else Text(f"no [{reasons[(row['why'] or '', row['action'])]}]", style="bold yellow")
        )
        table.add_row(
            _who(row) if key != previous else "",
            PATTERN_WORDS.get(row["pattern"], row["pattern"]),
            token_range(row["min_tokens"], row["max_tokens"]),
            file_text(row["path"]),
            timed,
        )
        previous = key
    return table


def token_range(low: int, high: int | None) -> str:
    if high is None:
        return f">= {low}"
    return str(low) if low == high else f"{low}-{high}"


def untimed_count(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line under the notes: how many default ranges this run will not time."""
    missing = sum(not row["timed"] for row in rows)
    if not missing:
        return "This run times every launcher default path above."
    return (
        f"{missing} of {len(rows)} default ranges are not timed: a plan leaves them as the launcher "
        "runs them."
    )


def _who(row: Mapping[str, Any]) -> Text:
    name = LAUNCHER_NAMES.get(row["launcher"], row["launcher"])
    release = "" if row["release"] == "-" else f" {row['release']}"
    text = (
        file_text(f"TP{row['tp']} {row['group_class']}")
        .append("\n")
        .append_text(file_text(f"{name}{release}"))
    )
    if row["variants"]:
        variants = file_text(", ".join(_short(name) for name in row["variants"]))
        variants.stylize("dim")
        text.append("\n").append_text(variants)
    return text


#: HF architecture names end in the task head; the table shows the model family (the evidence keeps
#: the whole name): "LlamaForCausalLM" -> "Llama".
_HEADS = ("ForCausalLM", "ForConditionalGeneration")


def _short(architecture: str) -> str:
    return next((architecture[: -len(head)] for head in _HEADS if architecture.endswith(head)), architecture)
