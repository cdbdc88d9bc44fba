"""``recommend --explain``: the price of a plan against the launcher's default, size range by size range.

Pure over a priced choice (``planning.Choice``). Each row is one pattern's range of token counts of
the served model over which neither the plan's route nor the default's changes kernel and which
lies between the same two measured sizes; its prices are those of the measured size at the top of
the range (``costmodel``: median per call plus the expected size-transition cost spread over the
step's calls, in context where every compared path was timed there). The saving per step is the
saving per call times that pattern's all-reduce sites per step. Ranges whose default path was not
measured say so: the plan leaves them as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from topo_gate.launchers.costmodel import Piece, Side, pieces, price_at
from topo_gate.launchers.planning import Choice, Variant
from topo_gate.launchers.pricing import PriceTable, bracket
from topo_gate.launchers.workload import Workload


@dataclass(frozen=True)
class Row:
    pattern: str
    first_tokens: int
    last_tokens: int | None  # None: every larger count
    default: str
    plan: str
    default_us: float | None  # per call; None: not measured
    plan_us: float | None
    sites: int
    source: str
    note: str

    @property
    def saving_us(self) -> float | None:
        if self.default_us is None or self.plan_us is None:
            return None
        return self.default_us - self.plan_us

    @property
    def tokens(self) -> str:
        if self.last_tokens is None:
            return f"{self.first_tokens}+"
        return (
            str(self.first_tokens)
            if self.first_tokens == self.last_tokens
            else f"{self.first_tokens}-{self.last_tokens}"
        )

    def to_dict(self) -> dict[str, Any]:
        saving = self.saving_us
        return {
            "pattern": self.pattern,
            "tokens": [self.first_tokens, self.last_tokens],
            "default": self.default,
            "plan": self.plan,
            "default_us_per_call": _round(self.default_us),
            "plan_us_per_call": _round(self.plan_us),
            "saving_us_per_call": _round(saving),
            "saving_us_per_step": _round(None if saving is None else saving * self.sites),
            "source": self.source,
            "note": self.note,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def rows(choice: Choice) -> list[Row]:
    """The rows for the variant the plan was scored by (its worst)."""
    variant = choice.worst
    out = []
    for pattern in sorted(variant.plan.routes):
        table = variant.pricing.tables[pattern]
        for piece in pieces(variant.plan, variant.default, pattern, variant.pricing.row_bytes):
            out += _piece_rows(piece, table, variant)
    return out


def _piece_rows(piece: Piece, table: PriceTable, variant: Variant) -> list[Row]:
    """The piece cut at each measured size, each part priced at its largest message."""
    row_bytes = variant.pricing.row_bytes
    sites = variant.pricing.step.sites[piece.pattern]
    out = []
    first = piece.first
    while piece.last is None or first <= piece.last:
        around = bracket(table.sizes, first)
        if around is None:
            out.append(
                _row(
                    piece,
                    first,
                    piece.last,
                    None,
                    None,
                    sites,
                    "-",
                    "beyond the largest measured size: unchanged",
                    row_bytes,
                )
            )
            break
        top = max(table.sizes[around[1]] // row_bytes * row_bytes, first)
        last = top if piece.last is None else min(piece.last, top)
        theirs = _price(piece.pattern, piece.default, last, variant.default, variant, pessimistic=False)
        if piece.plan == piece.default and variant.plan.priors_of(piece.plan) == variant.default.priors_of(
            piece.default
        ):
            mine = theirs
        else:
            mine = _price(piece.pattern, piece.plan, last, variant.plan, variant, pessimistic=True)
        source = variant.pricing.source(piece.pattern, around[1])
        out.append(
            _row(
                piece,
                first,
                last,
                theirs if isinstance(theirs, float) else None,
                mine if isinstance(mine, float) else None,
                sites,
                source,
                _note(piece, theirs, mine),
                row_bytes,
            )
        )
        first = last + row_bytes
    return out


def _price(
    pattern: str, name: str, nbytes: int, side: Side, variant: Variant, *, pessimistic: bool
) -> float | str:
    price = price_at(pattern, name, nbytes, side, variant.pricing, pessimistic=pessimistic)
    return price if isinstance(price, str) else price.per_call(variant.pricing.step.calls)


def _note(piece: Piece, theirs: float | str, mine: float | str) -> str:
    if isinstance(theirs, str):
        return f"default not measured ({theirs}): left as it is"
    if piece.plan == piece.default:
        return "same path"
    if isinstance(mine, str):
        return f"plan path not measured ({mine})"
    return "plan measured faster" if mine < theirs else "within the default's noise"


def _row(
    piece: Piece,
    first: int,
    last: int | None,
    default_us: float | None,
    plan_us: float | None,
    sites: int,
    source: str,
    note: str,
    row_bytes: int,
) -> Row:
    return Row(
        piece.pattern,
        first // row_bytes,
        None if last is None else last // row_bytes,
        piece.default,
        piece.plan,
        default_us,
        plan_us,
        sites,
        source,
        note,
    )


def totals(choice: Choice, workload: Workload) -> dict[str, Any]:
    """The workload totals of the scored variant, as plain data."""
    variant = choice.worst
    total = variant.total
    step = variant.pricing.step
    default_us, plan_us = total.default_us, total.plan_us
    return {
        "workload": workload.name,
        "workload_description": workload.description,
        "layers": step.layers,
        "layers_known": step.layers_known,
        "calls_per_step": step.calls,
        "measured_share": round(total.measured_weight, 6),
        "default_us_per_step": _round(default_us),
        "plan_us_per_step": _round(plan_us),
        "saving": None if not default_us or plan_us is None else round(1 - plan_us / default_us, 6),
        "per_call": {
            pattern: {
                "default_us": _round(total.per_call(pattern, 0)),
                "plan_us": _round(total.per_call(pattern, 1)),
            }
            for pattern in step.sites
        },
    }


def estimate_line(choice: Choice, workload: Workload) -> str:
    """The one-line price ``exec`` and the plugins log."""
    data = totals(choice, workload)
    default_us, plan_us = data["default_us_per_step"], data["plan_us_per_step"]
    if default_us is None:
        return f"nothing measured at the workload '{workload.name}' sizes for the launcher's default paths: nothing changed"
    share = (
        "" if data["measured_share"] >= 0.999 else f", over the {data['measured_share']:.0%} of it measured"
    )
    layers = f"{data['layers']} layers" + ("" if data["layers_known"] else " assumed")
    if (
        not choice.candidate.knobs.args
        and not choice.candidate.knobs.env
        and not choice.candidate.knobs.config
    ):
        return (
            f"no knobs: nothing measured beats the launcher's default by more than noise over the workload "
            f"'{workload.name}' ({default_us:.1f} us of all-reduce per step, {layers}{share})"
        )
    return (
        f"est. {-data['saving']:+.1%} all-reduce time vs default over the workload '{workload.name}' "
        f"({default_us:.1f} -> {plan_us:.1f} us per step, {layers}{share})"
    )


def render(table_rows: Sequence[Row], data: dict[str, Any]) -> str:
    """A plain-text table, one line per range, then the workload total."""
    head = (
        "pattern",
        "tokens",
        "default runs",
        "us/call",
        "plan runs",
        "us/call",
        "saving/call",
        "saving/step",
        "priced",
        "note",
    )
    lines = [head]
    for row in table_rows:
        saving = row.saving_us
        lines.append(
            (
                row.pattern,
                row.tokens,
                row.default,
                _us(row.default_us),
                row.plan,
                _us(row.plan_us),
                _us(saving, signed=True),
                _us(None if saving is None else saving * row.sites, signed=True),
                row.source,
                row.note,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    text.append(_total_words(data))
    return "\n".join(text)


def _us(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _total_words(data: dict[str, Any]) -> str:
    default_us, plan_us = data["default_us_per_step"], data["plan_us_per_step"]
    if default_us is None:
        return f"workload '{data['workload']}': the default's paths were not measured at its sizes; nothing changed"
    per_call = ", ".join(
        f"{pattern} {values['default_us']:.2f} -> {values['plan_us']:.2f} us/call"
        for pattern, values in data["per_call"].items()
        if values["default_us"] is not None
    )
    return (
        f"workload '{data['workload']}' ({data['workload_description']}; {data['layers']} layers"
        f"{'' if data['layers_known'] else ' assumed'}, {data['calls_per_step']} all-reduces per step, "
        f"{data['measured_share']:.0%} of it measured): default {default_us:.1f} -> plan {plan_us:.1f} us per step "
        f"({-data['saving']:+.1%}); {per_call}"
    )
