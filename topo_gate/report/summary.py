"""The end-of-probe summary: per TP and pattern, which backend serves which message sizes, and why.

Shared by ``probe`` (live and ``--replay``) and ``decide``, so a replay of recorded evidence prints
exactly what the live run printed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from topo_gate._terminal import shown
from topo_gate._units import ci_text, human_bytes, speedup_text
from topo_gate.launchers.outlook import Outlooks
from topo_gate.profile.schema import DecisionEntry, Profile, Rule
from topo_gate.report.outlook import terminal as outlook_terminal
from topo_gate.report.preflight import preflight_view
from topo_gate.report.rule_words import CPU_BASELINE, backend_words, is_fast_path, shows_speedup
from topo_gate.report.tables import alternatives_words
from topo_gate.report.text import file_text


def size_range(lower: int, rule: Rule) -> str:
    """``(lower, max_bytes]`` in words: "<= 224 KiB", "224 KiB - 14 MiB", "> 14 MiB", "all sizes"."""
    if rule.max_bytes is None:
        return "all sizes" if lower == 0 else f"> {human_bytes(lower)}"
    if lower == 0:
        return f"<= {human_bytes(rule.max_bytes)}"
    return f"{human_bytes(lower)} - {human_bytes(rule.max_bytes)}"


WIDE_ENOUGH_FOR_REASONS = 120  # columns; below this the reasons would wrap a word per line


def decisions_table(profile: Profile, *, with_reasons: bool = True) -> Table:
    """One row per rule; chosen fast paths stand out; each row says why (when there is room).

    Without reasons it fits 80 columns: TP, group and pattern share one stacked cell, and the
    speed-up sits above its CI. No cell is ever cut short with an ellipsis; text folds instead.
    """
    cpu = profile.cpu_harness
    title = f"Decisions (each backend vs {CPU_BASELINE if cpu else 'NCCL'})"
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("TP / group / pattern", overflow="fold")
    table.add_column("message size", no_wrap=True)
    table.add_column("backend", no_wrap=True)
    table.add_column("speedup (CI)", justify="right", no_wrap=True)
    if with_reasons:
        table.add_column("why", overflow="fold", ratio=1)
    for entry in profile.decisions:
        _add_entry(table, entry, with_reasons, cpu=cpu)
        table.add_section()
    for skipped in profile.skipped:
        # Not a decision: nothing was measured there (a reader answers NCCL, a plan keeps the default).
        if with_reasons:
            table.add_row(f"TP {skipped.tp}", "all sizes", "not measured", "", Text(shown(skipped.reason)))
        else:
            table.add_row(
                Text(f"TP {skipped.tp}\n({shown(skipped.reason)})"), "all sizes", "not measured", ""
            )
    return table


def _add_entry(table: Table, entry: DecisionEntry, with_reasons: bool, *, cpu: bool) -> None:
    lower = 0
    for index, rule in enumerate(entry.rules):
        where = file_text(f"TP {entry.tp} {entry.group_class}").append(
            f"\nGPUs {list(entry.group)}\n{entry.pattern}"
        )
        backend = Text(
            backend_words(rule.backend, cpu=cpu), style="bold green" if is_fast_path(rule.backend) else ""
        )
        speedup = _speedup_cell(rule) if shows_speedup(rule, cpu=cpu) else ""
        table.add_row(
            where if index == 0 else "",
            size_range(lower, rule),
            backend,
            speedup,
            *([file_text(_why(rule))] if with_reasons else []),
        )
        lower = rule.max_bytes or lower


def _why(rule: Rule) -> str:
    also = alternatives_words(rule)
    return "; ".join(part for part in (rule.reason, also) if part)


def _speedup_cell(rule: Rule) -> str:
    """The isolated speedup (CI), and the in-context one beneath it when measured."""
    if rule.speedup is None:
        return ""
    text = speedup_text(rule.speedup)
    if rule.ci is not None:
        text += f"\n(CI {ci_text(rule.ci)})"
    return text if rule.in_context is None else f"{text}\nin context {speedup_text(rule.in_context)}"


@dataclass(frozen=True)
class Summary:
    """The table, then where things were written, then notes a person must read.

    A rich renderable that lays itself out for the terminal it lands on: the reasons column only
    when there is room (``topo-gate show`` or ``--json`` always have them).
    """

    profile: Profile
    profile_path: str | None
    evidence_path: str | None
    notes: Sequence[str] = ()
    #: The preflight rows the evidence records (``report.preflight``): shown after the decisions.
    preflight: Sequence[Mapping[str, Any]] = ()
    #: What each launcher will do with the profile (``launchers.outlook``): shown last, after the
    #: vs-NCCL decisions, because it is what a user acts on.
    outlook: Outlooks | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = options.max_width >= WIDE_ENOUGH_FOR_REASONS
        yield decisions_table(self.profile, with_reasons=wide)
        if self.preflight:
            yield preflight_view(self.preflight)
        yield from _footer(self, wide)
        if self.outlook is not None:
            yield Text("")
            yield outlook_terminal(self.outlook, options.max_width)


def summary(
    profile: Profile,
    *,
    profile_path: str | None,
    evidence_path: str | None,
    notes: Sequence[str] = (),
    preflight: Sequence[Mapping[str, Any]] = (),
    outlook: Outlooks | None = None,
) -> Summary:
    return Summary(profile, profile_path, evidence_path, tuple(notes), tuple(preflight), outlook)


def _footer(summary: Summary, wide: bool) -> list[RenderableType]:
    profile = summary.profile
    parts: list[RenderableType] = []
    opted_in = sum(is_fast_path(rule.backend) for entry in profile.decisions for rule in entry.rules)
    baseline = CPU_BASELINE if profile.cpu_harness else "NCCL"
    headline = (
        f"{opted_in} size range(s) opt into a backend measured faster than {baseline}; {baseline} everywhere else."
        if opted_in
        else f"No backend beat {baseline} by the margin anywhere: the profile keeps {baseline} everywhere."
    )
    parts.append(Text(headline, style="bold"))
    for entry in profile.decisions:
        if entry.failed is not None:
            parts.append(
                Text(
                    f"FAILED plan: TP{entry.tp} {entry.group_class} {entry.pattern}: {entry.failed} "
                    "(recorded as failed; NCCL there is no measurement)",
                    style="bold red",
                )
            )
    if profile.cpu_harness:
        parts.append(
            Text(
                "CPU harness (gloo) profile: a demo of the pipeline, never valid for a GPU node.",
                style="yellow",
            )
        )
    if not wide:
        parts.append(Text("(a wider terminal shows why each range was chosen)", style="dim"))
    if summary.profile_path:
        parts.append(Text(f"profile:  {shown(summary.profile_path)}"))
    if summary.evidence_path:
        parts.append(Text(f"evidence: {shown(summary.evidence_path)}"))
    parts.extend(Text(f"note: {shown(note)}", style="yellow") for note in summary.notes)
    return parts
