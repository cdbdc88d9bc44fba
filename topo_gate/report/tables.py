"""Rich rendering of a profile's decisions and of a diff between two profiles.

The only module of the profile area that imports rich: the reader and ``import topo_gate`` never
reach it. Functions return renderables; the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from topo_gate._terminal import shown
from topo_gate._units import human_bytes, percent_text, speedup_ci_text, speedup_text
from topo_gate.profile.compare import BackendChange, PriceChange
from topo_gate.profile.schema import NCCL, DecisionEntry, Measurement, Profile, Rule
from topo_gate.report.rule_words import backend_words, is_fast_path, shows_speedup
from topo_gate.report.text import file_text


def size_range(min_bytes: int, max_bytes: int | None) -> str:
    """The sizes ``(min_bytes, max_bytes]`` in words: ``<= 448 KiB``, ``448 KiB - 7 MiB``, ``> 28 MiB``."""
    if max_bytes is None:
        return "all sizes" if min_bytes == 0 else f"> {human_bytes(min_bytes)}"
    if min_bytes == 0:
        return f"<= {human_bytes(max_bytes)}"
    return f"> {human_bytes(min_bytes)}, <= {human_bytes(max_bytes)}"


def profile_header(
    profile: Profile, *, path: str, digest_problem: str | None = None, measured: str | None = None
) -> Table:
    """Where the profile comes from: node class, GPUs, software, creation; loud when not usable."""
    node = profile.node
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    grid.add_row("Profile", file_text(path))
    if node.provenance.get("synthetic") is True:
        grid.add_row("", Text("SYNTHETIC: made-up numbers, not measured on any node", style="bold yellow"))
    if digest_problem:
        grid.add_row(
            "Digest",
            Text(f"{shown(digest_problem)} -- launchers will ignore this profile", style="bold red"),
        )
    grid.add_row("Node", file_text(_node_words(node.hardware)))
    grid.add_row("Fingerprint", Text(node.fingerprint, overflow="fold"))
    grid.add_row("Software", file_text(_software_words(node.software)))
    created = f"{profile.created} by {profile.tool.name} {profile.tool.version}"
    if measured is not None and measured != profile.created:
        # A replay (probe --replay, decide) writes the profile long after the trials: the date that
        # matters is the measurement's.
        grid.add_row("Measured", file_text(f"{measured} (its evidence)"))
        grid.add_row("Written", file_text(created))
    else:
        grid.add_row("Created", file_text(created))
    trials = profile.trials
    trials_words = f"{trials.dtype}, hidden {trials.hidden}, TP {', '.join(map(str, trials.tp))}"
    grid.add_row("Trials", file_text(trials_words))
    for skipped in profile.skipped:
        grid.add_row("Not measured", Text(f"TP {skipped.tp}: {shown(skipped.reason)}"))
    return grid


def decision_table(entry: DecisionEntry, *, cpu: bool = False, verbose: bool = False) -> Table:
    """One (tp, pattern, group class): size range | speedup (CI), in context | backend and its reason.

    A reason runs to 40 lines at 80 columns: without ``verbose`` a cell holds its first clause (what
    decided the range), and the other backends faster than the baseline and the rest of the reason
    (weakest size, transitions, in context) are ``show --verbose``'s."""
    baseline = "gloo" if cpu else "NCCL"
    ranks = "gloo ranks" if cpu else "GPUs"  # the CPU harness runs processes, no GPU
    title = file_text(
        f"TP {entry.tp} / {entry.pattern} / {entry.group_class} (measured on {ranks} {list(entry.group)}), "
        f"each backend vs {baseline}"
    )
    if entry.failed is not None:
        title += file_text(f"\n  FAILED: {entry.failed} (NCCL here is not a measurement)")
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("Message size", no_wrap=True)
    # The in-context figure is stacked under the isolated one: a column of its own would take the
    # width the backend's name needs at 80 columns.
    with_context = any(rule.in_context is not None for rule in entry.rules)
    table.add_column("Speedup (CI)\nIn context" if with_context else "Speedup (CI)", no_wrap=True)
    # The reason shares the backend's cell: a column of its own is unreadably narrow in 80 columns.
    # The column is never narrower than the longest backend name: a name folded mid-word is lost.
    widest_backend = max(len(backend_words(rule.backend, cpu=cpu)) for rule in entry.rules)
    table.add_column("Backend and why", ratio=1, overflow="fold", min_width=widest_backend)
    lower = 0
    for rule in entry.rules:
        fast = is_fast_path(rule.backend)
        cell = Text(backend_words(rule.backend, cpu=cpu), style="bold green" if fast else "dim")
        if rule.alternatives and verbose:
            cell.append(f"\n{alternatives_words(rule)}", style="green")
        if rule.reason:
            cell.append(f"\n{shown(rule.reason if verbose else first_clause(rule.reason))}", style="default")
        speedup = _speedup_words(rule) if shows_speedup(rule, cpu=cpu) else ""
        table.add_row(size_range(lower, rule.max_bytes), speedup, cell)
        lower = rule.max_bytes or lower
    return table


def first_clause(reason: str) -> str:
    """A rule's reason up to its first ``; ``: the clause that says what decided the range."""
    return reason.partition("; ")[0]


def alternatives_words(rule: Rule) -> str:
    """``also faster than nccl across the range: vllm_custom 1.52x`` (schema v1.1); "" when none."""
    if not rule.alternatives:
        return ""
    listed = ", ".join(f"{a.backend} {speedup_text(a.speedup)}" for a in rule.alternatives)
    return f"also faster than {NCCL} across the range: {listed}"


def _speedup_words(rule: Rule) -> str:
    isolated = "" if rule.speedup is None else speedup_ci_text(rule.speedup, rule.ci)
    if rule.in_context is None:
        return isolated
    return f"{isolated}\nin context {speedup_text(rule.in_context)}"


def profile_view(
    profile: Profile,
    *,
    path: str,
    digest_problem: str | None = None,
    verbose: bool = False,
    measured: str | None = None,
) -> RenderableType:
    """The header followed by one table per decision, in profile order (``verbose``: whole reasons;
    ``measured``: when its evidence was measured, where known)."""
    parts: list[RenderableType] = [
        profile_header(profile, path=path, digest_problem=digest_problem, measured=measured)
    ]
    if not profile.decisions:
        parts.append(Text("\nNo decisions: NCCL for every TP size and message size.", style="yellow"))
    for entry in profile.decisions:
        parts.append(decision_table(entry, cpu=profile.cpu_harness, verbose=verbose))
        table = profile.measurement(entry.tp, entry.group_class, entry.pattern)
        if table is not None:
            parts.append(Text(price_line(table), style="dim"))
    cut = any(
        "; " in (rule.reason or "") or rule.alternatives
        for entry in profile.decisions
        for rule in entry.rules
    )
    if cut and not verbose:
        parts.append(Text(CUT_NOTE, style="dim"))
    return Group(*parts)


#: Said once under the tables whose reasons were cut to their first clause.
CUT_NOTE = (
    "Each reason above is its first clause: show --verbose prints it whole, with the other fast backends."
)


def price_line(table: Measurement) -> str:
    """One short line per price table (v1.3): backends and sizes, the cells with a price, and the
    backends priced at no size (with their status)."""
    prices = table.backends.values()
    cells = sum(value is not None for p in prices for value in p.median_us)
    unpriced = [
        f"{name} ({'/'.join(sorted(set(p.status)))})"
        for name, p in table.backends.items()
        if all(value is None for value in p.median_us)
    ]
    line = (
        f"Price table: {len(table.backends)} backends x {len(table.sizes)} sizes "
        f"({human_bytes(table.sizes[0])} - {human_bytes(table.sizes[-1])}), {cells} cells priced, "
        f"{sum(p.in_context_us is not None for p in prices)} backends in context, "
        f"{sum(p.transition is not None for p in prices)} with size transitions"
    )
    return line + (f"; no price: {', '.join(unpriced)}" if unpriced else "")


def diff_table(changes: Sequence[BackendChange], *, before: str, after: str) -> Table:
    """The size ranges whose backend changed between ``before`` and ``after``."""
    title = Text(f"Backend changes\n  before: {shown(before)}\n  after:  {shown(after)}")
    table = Table(title=title, title_justify="left")
    table.add_column("TP / pattern / group class", overflow="fold")
    table.add_column("Message size", no_wrap=True)
    table.add_column("Before -> after", overflow="fold")
    for change in changes:
        cell = Text(f"{change.before} -> ")
        cell.append(change.after, style="bold")
        if change.note:
            cell.append(f"\n({shown(change.note)})", style="dim")
        table.add_row(
            Text(f"TP {change.tp} / {change.pattern} / {shown(change.group_class)}"),
            size_range(change.min_bytes, change.max_bytes),
            cell,
        )
    return table


def price_changes_lines(changes: Sequence[PriceChange]) -> list[str]:
    """One line per price table that differs: what was added or removed, how far the medians moved."""
    lines = []
    for change in changes:
        where = f"TP {change.tp} / {change.pattern} / {shown(change.group_class)}"
        if change.change != "changed":
            lines.append(f"Price table {where}: {change.change}")
            continue
        parts = [f"{label} {', '.join(map(str, values))}" for label, values in (
            ("backends added", change.backends_added), ("backends removed", change.backends_removed),
            ("sizes added", [human_bytes(n) for n in change.sizes_added]),
            ("sizes removed", [human_bytes(n) for n in change.sizes_removed]),
        ) if values]  # fmt: skip
        if change.status_changes:
            parts.append(f"{change.status_changes} cells changed status")
        if change.largest_move is not None:
            backend, nbytes, was, now = change.largest_move
            parts.append(
                f"{change.beyond_ci} cells moved beyond their CIs; largest: {backend} at {human_bytes(nbytes)} "
                f"{was:g} -> {now:g} us ({percent_text(now / was - 1, signed=True)})"
            )
        lines.append(f"Price table {where}: {'; '.join(parts)}")
    return lines


def _node_words(hardware: Mapping[str, object]) -> str:
    if hardware.get("device") == "cpu":
        return "CPU harness (gloo processes, no GPU)"
    gpus = hardware.get("gpus")
    # topology.model writes "model" (and the SM as "sm"); see Node.to_hardware_dict.
    names = [g.get("model") for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []
    models = ", ".join(sorted({str(name) for name in names if name})) or "GPU model not recorded"
    count = f"{len(gpus)}x " if isinstance(gpus, list) else ""
    interconnect = hardware.get("interconnect") or "interconnect not recorded"
    return f"{count}{models}, {interconnect}"


def _software_words(software: Mapping[str, str | None]) -> str:
    return ", ".join(f"{name} {version or 'unknown'}" for name, version in software.items()) or "not recorded"
