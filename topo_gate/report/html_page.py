"""``report.html``: one self-contained page (figures as PNG data URIs, inline CSS, no script, nothing
fetched from a network), with the inputs, the decision tables with reasons, and the figures per
(TP, group class, pattern). Pure text; every value that comes from a file is HTML-escaped."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

from topo_gate._units import ci_text, speedup_text
from topo_gate._version import __version__
from topo_gate.launchers.outlook import Outlooks
from topo_gate.profile.schema import DecisionEntry, Rule
from topo_gate.report.ab_report import AbSource, ab_html
from topo_gate.report.changes import Changes, ranges
from topo_gate.report.figures import FigureSpec, Key
from topo_gate.report.inert import html_text
from topo_gate.report.markdown import node_words
from topo_gate.report.outlook import render as render_outlook
from topo_gate.report.rule_words import (
    backend_words,
    is_fast_path,
    reason_parts,
    shows_speedup,
)
from topo_gate.report.sources import Source
from topo_gate.report.tables import alternatives_words, size_range

_CSS = """
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1180px; padding: 0 1em; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { margin-bottom: 0.3em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #d0d0d0; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; white-space: nowrap; } td.size { white-space: nowrap; }
tr.fast td.backend { font-weight: bold; color: #17632a; } td.why { color: #444; font-size: 0.92em; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
.notes li { color: #7a4b00; } .meta { color: #555; }
"""


def report_html(
    sources: Sequence[Source],
    figures: Sequence[tuple[FigureSpec, bytes]],
    *,
    notes: Sequence[str] = (),
    baseline: tuple[str, Sequence[Changes]] | None = None,
    ab: tuple[Sequence[AbSource], Mapping[str, bytes]] = ((), {}),
    launchers: Sequence[tuple[str, Outlooks]] = (),
) -> str:
    """The whole page. ``launchers``: what each launcher will do with each input (label, outlook),
    after the A/B verdicts and before the vs-NCCL decisions."""
    several = len(sources) > 1
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>topo-gate report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>topo-gate report</h1>",
        f'<p class="meta">{html_text(_inputs_words(sources))} &middot; topo-gate {html_text(__version__)}</p>',
        _inputs_table(sources),
        _notes(notes, sources),
        # What changed comes before the details: it is what a reviewer of a new profile reads first.
        "" if baseline is None else _baseline(baseline, sources),
        ab_html(ab[0], sources, ab[1]),  # the launcher's own benchmark: the verdict that matters most
        *(render_outlook(found, "html", label=label if several else "") for label, found in launchers),
    ]
    for key in _keys(sources, figures):
        parts.append(_section(key, sources, [(spec, png) for spec, png in figures if spec.key == key]))
    parts.append("</body></html>")
    return "\n".join(part for part in parts if part) + "\n"


def _inputs_words(sources: Sequence[Source]) -> str:
    return f"{len(sources)} input{'s' if len(sources) != 1 else ''}: " + ", ".join(s.label for s in sources)


def _inputs_table(sources: Sequence[Source]) -> str:
    rows = []
    for source in sources:
        profile = source.profile
        software = ", ".join(f"{k} {v or 'unknown'}" for k, v in profile.node.software.items())
        trials = profile.trials
        created = (source.evidence or {}).get("created") or profile.created
        rows.append(
            _row(
                source.label,
                f"{source.kind}: {source.path}",
                node_words(profile),
                f"{trials.dtype}, hidden {trials.hidden}, TP {', '.join(map(str, trials.tp))}",
                software,
                created,
            )
        )
    head = _head("input", "file", "node", "trials", "software", "created")
    return f"<table>{head}{''.join(rows)}</table>"


def _notes(notes: Sequence[str], sources: Sequence[Source]) -> str:
    every = [*notes, *(f"{source.label}: {note}" for source in sources for note in source.notes)]
    if not every:
        return ""
    items = "".join(f"<li>{html_text(note)}</li>" for note in every)
    return f'<h2>Notes</h2><ul class="notes">{items}</ul>'


def _keys(sources: Sequence[Source], figures: Sequence[tuple[FigureSpec, bytes]]) -> list[Key]:
    keys = [spec.key for spec, _ in figures]
    keys += [(e.tp, e.group_class, e.pattern) for s in sources for e in s.profile.decisions]
    return list(dict.fromkeys(keys))


def _section(key: Key, sources: Sequence[Source], figures: Sequence[tuple[FigureSpec, bytes]]) -> str:
    tp, group_class, pattern = key
    parts = [f'<h2 id="{html_text(_anchor(key))}">TP{tp} {html_text(pattern)}, {html_text(group_class)}</h2>']
    decided = [(s.label, entry) for s in sources if (entry := s.profile.find(tp, pattern, group_class))]
    for group in _same_ladders(decided):
        labels = ", ".join(label for label, _ in group)
        same = " (the same ranges and backends)" if len(group) > 1 else ""
        cpu = any(source.profile.cpu_harness for source in sources)
        baseline = "gloo" if cpu else "NCCL"  # the CPU harness's baseline is gloo, not NCCL
        parts.append(
            f"<h3>Decisions (each backend vs {baseline}): {html_text(labels)}{same}</h3>"
            f"{_decision_table(group, cpu=cpu)}"
        )
    for spec, png in figures:
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{html_text(spec.title)}"></figure>'
        )
    return "\n".join(parts)


def _same_ladders(decided: Sequence[tuple[str, DecisionEntry]]) -> list[list[tuple[str, DecisionEntry]]]:
    """Inputs grouped by identical ladders (same bounds, same backends), in input order."""
    groups: dict[tuple[tuple[int | None, str], ...], list[tuple[str, DecisionEntry]]] = {}
    for label, entry in decided:
        ladder = tuple((rule.max_bytes, rule.backend) for rule in entry.rules)
        groups.setdefault(ladder, []).append((label, entry))
    return list(groups.values())


def _decision_table(group: Sequence[tuple[str, DecisionEntry]], *, cpu: bool) -> str:
    """One row per rule; a speed-up column per input of the group; the first input's reasons."""
    rows = []
    several = len(group) > 1
    for index, (lower, rule) in enumerate(ranges(group[0][1])):
        speedups = "".join(
            f'<td class="num">{html_text(_speedup_words(entry.rules[index], cpu=cpu))}</td>'
            for _, entry in group
        )
        # The reason's first clause in bold (what decided the range), the detail after it.
        headline, rest = reason_parts(rule.reason)
        detail = "; ".join(part for part in (rest, alternatives_words(rule)) if part)
        why = f"<strong>{html_text(headline)}</strong>" + (f"; {html_text(detail)}" if detail else "")
        css = ' class="fast"' if is_fast_path(rule.backend) else ""
        rows.append(
            f'<tr{css}><td class="size">{html_text(size_range(lower, rule.max_bytes))}</td>'
            f'<td class="backend">{html_text(backend_words(rule.backend, cpu=cpu))}</td>{speedups}'
            f'<td class="why">{why}</td></tr>'
        )
    versus = "gloo" if cpu else "nccl"
    speedup_heads = [
        f"speed-up, {label}" if several else f"speed-up vs {versus} (95% CI)" for label, _ in group
    ]
    why_head = f"why ({group[0][0]})" if several else "why"
    return f"<table>{_head('message size', 'backend', *speedup_heads, why_head)}{''.join(rows)}</table>"


def _speedup_words(rule: Rule, *, cpu: bool) -> str:
    if not shows_speedup(rule, cpu=cpu) or rule.speedup is None or rule.ci is None:
        return ""
    return f"{speedup_text(rule.speedup)} ({ci_text(rule.ci)})"


def _baseline(baseline: tuple[str, Sequence[Changes]], sources: Sequence[Source]) -> str:
    label, per_source = baseline
    parts = [f"<h2>Changes against the baseline {html_text(label)}</h2>"]
    for source, found in zip(sources, per_source, strict=True):
        parts.append(f"<h3>{html_text(source.label)}</h3>")
        if found.none:
            parts.append("<p>No change: same node class, backends, ranges, speed-ups and software.</p>")
            continue
        if not found.same_node_class:
            parts.append("<p><strong>Different node class</strong> (the hardware fingerprints differ).</p>")
        rows = [
            _row(
                f"TP{c.tp} / {c.pattern} / {c.group_class}",
                size_range(c.min_bytes, c.max_bytes),
                f"{c.before} -> {c.after}" + (f" ({c.note})" if c.note else ""),
            )
            for c in found.backends
        ]
        rows += [
            _row(
                f"TP{c.tp} / {c.pattern} / {c.group_class}",
                f"{size_range(*c.before_range)} -> {size_range(*c.after_range)}",
                f"{c.backend}: {_x(c.before)} -> {_x(c.after)}",
            )
            for c in found.speedups
        ]
        rows += [
            _row(f"software: {c.name}", "", f"{c.before or 'unknown'} -> {c.after or 'unknown'}")
            for c in found.software
        ]
        if rows:
            parts.append(f"<table>{_head('what', 'message size', 'before -> after')}{''.join(rows)}</table>")
    return "\n".join(parts)


def _x(value: float | None) -> str:
    return "-" if value is None else speedup_text(value)


def _head(*names: str) -> str:
    return "<tr>" + "".join(f"<th>{html_text(name)}</th>" for name in names) + "</tr>"


def _row(*cells: object) -> str:
    return "<tr>" + "".join(f"<td>{html_text(str(cell))}</td>" for cell in cells) + "</tr>"


def _anchor(key: Key) -> str:
    tp, group_class, pattern = key
    return f"tp{tp}-{group_class}-{pattern}"
