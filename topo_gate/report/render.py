"""Draw a ``FigureSpec`` as a PNG with matplotlib: the only module of topo-gate that imports it.

matplotlib is the optional ``[report]`` extra, imported on first use (``require_matplotlib``), so
``import topo_gate`` and every other command work without it.  Each figure is its own
``matplotlib.figure.Figure`` on an Agg canvas (no pyplot and its global state), drawn under a fixed
``rc_context`` (style, font, sizes), and saved without the "Software" stamp, so the same evidence
gives the same bytes on every run with the same matplotlib: PNGs diff cleanly in a repository.
"""

from __future__ import annotations

import io
import math
import textwrap
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from topo_gate._units import human_bytes
from topo_gate.profile.schema import BACKENDS, COMPOSITE_SUFFIX
from topo_gate.report.ab_report import AbFigureSpec
from topo_gate.report.figures import CONTEXT, FigureSpec, Line
from topo_gate.report.inert import figure_text

if TYPE_CHECKING:  # matplotlib (the optional extra) is imported on first use, not with this module
    from matplotlib.typing import RcKeyType

INSTALL_HINT = "pip install 'topo-gate[report]'"
DPI = 100
WIDTH_IN = 11.0
PLOT_HEIGHT_IN = 5.6
NOTE_LINE_IN = 0.2

# One hue per backend *family*, a line style per variant in it (a launcher's own call sequence of the
# same kernel), so a family reads as one at a glance and its variants apart: TRT-LLM one-shot blue
# (TRT-LLM's own solid, vLLM's dashed, SGLang's dotted), two-shot orange, the fused one-shot purple,
# the fused two-shot brown, symmetric memory green, the custom all-reduces red, PCIe IPC pink; NCCL
# (gloo on the CPU harness) black and drawn heavier. A composite (``pcie_ipc+rmsnorm``: the plain
# path + norm) is drawn as its plain path. Names the schema does not know get a hue of their own
# from _SPARE, by a stable hash, solid.
_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("#000000", ("nccl",)),
    ("#000000", ("gloo",)),
    ("#1f77b4", ("trtllm_oneshot", "trtllm_oneshot_vllm", "trtllm_oneshot_sglang")),
    ("#ff7f0e", ("trtllm_twoshot", "trtllm_twoshot_vllm", "trtllm_twoshot_sglang")),
    ("#9467bd", ("trtllm_fused_oneshot", "trtllm_fused_oneshot_vllm", "trtllm_fused_oneshot_sglang")),
    ("#8c564b", ("trtllm_fused_twoshot", "trtllm_fused_twoshot_vllm", "trtllm_fused_twoshot_sglang")),
    ("#2ca02c", ("symm_mem_oneshot", "symm_mem_twoshot", "symm_mem_twoshot_vllm")),
    ("#d62728", ("vllm_custom", "custom_v2_sglang")),
    ("#e377c2", ("pcie_ipc",)),
    ("#17becf", ("gloo_ring",)),
)
_STYLE = {name: (hue, variant) for hue, names in _FAMILIES for variant, name in enumerate(names)}
_SPARE = ("#bcbd22", "#7f7f7f", "#393b79", "#637939", "#843c39", "#7b4173")
_FIXED = {"nccl": "#000000", "gloo": "#000000"}
_LINESTYLES: tuple[Literal["-", "--", ":", "-."], ...] = ("-", "--", ":", "-.")
#: Not measured: one grey cross, as the legend shows it, with the backend's name beside its row.
_MARK_COLOUR = "#555555"
#: Notes under a figure wrap at this many characters (8 pt DejaVu Sans across the 11-inch figure).
NOTE_WRAP = 170
_MARKERS = ("o", "s", "^", "D", "v", "P")
_FILLS: tuple[Literal["full", "none", "bottom", "top"], ...] = (
    "full",
    "none",
    "bottom",
    "top",
)  # the input, on points
_RC: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",  # ships with matplotlib: the same glyphs on every machine
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "savefig.dpi": DPI,
    "path.simplify": False,
}


class MissingExtra(Exception):
    """matplotlib is not installed; the message says how to install it."""


def require_matplotlib() -> None:
    """Raise ``MissingExtra`` (one line, with the install command) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingExtra(f"figures need matplotlib, the report extra: {INSTALL_HINT}") from None


def backend_style(backend: str) -> tuple[str, int]:
    """The backend's hue (its family's) and its variant's index in the family (its line style)."""
    plain = backend.removesuffix(COMPOSITE_SUFFIX)
    if plain in _STYLE:
        return _STYLE[plain]
    return _SPARE[zlib.crc32(plain.encode()) % len(_SPARE)], 0


def backend_colour(backend: str) -> str:
    return backend_style(backend)[0]


def wrapped_notes(notes: Sequence[str]) -> list[str]:
    """Each note in lines of at most NOTE_WRAP characters, so none runs off the figure's edge."""
    return [line for note in notes for line in textwrap.wrap(figure_text(note), NOTE_WRAP) or [""]]


def render_png(spec: FigureSpec) -> bytes:
    """The figure as PNG bytes."""
    require_matplotlib()
    import matplotlib

    with matplotlib.rc_context(_RC):
        figure = build_figure(spec)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def build_figure(spec: FigureSpec) -> Any:
    """The matplotlib ``Figure`` of ``spec`` on an Agg canvas (call under ``rc_context(_RC)``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    notes = wrapped_notes(spec.notes)
    height = PLOT_HEIGHT_IN + NOTE_LINE_IN * len(notes)
    figure = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    FigureCanvasAgg(figure)
    bottom = (0.55 + NOTE_LINE_IN * len(notes)) / height
    figure.subplots_adjust(left=0.07, right=0.74, top=1 - 0.45 / height, bottom=bottom)
    axes = figure.add_subplot()
    _draw(axes, spec)
    for index, note in enumerate(notes):
        y = (NOTE_LINE_IN * (len(notes) - index) - 0.05) / height
        figure.text(0.01, y, note, fontsize=8, color="#444444", va="bottom")
    return figure


def _draw(axes: Any, spec: FigureSpec) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    low, high = _x_limits(spec)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")  # latencies span 1000x, speed-ups 0.05x-3x: both read as ratios
    axes.set_xlim(low, high)
    ticks = [2.0**e for e in range(math.ceil(math.log2(low)), math.floor(math.log2(high)) + 1)]
    axes.xaxis.set_major_locator(FixedLocator(ticks[:: max(1, len(ticks) // 8)]))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: human_bytes(round(x))))
    axes.set_title(figure_text(spec.title), loc="left")
    axes.set_xlabel(figure_text(spec.xlabel))
    axes.set_ylabel(figure_text(spec.ylabel))
    _draw_shades(axes, spec, low, high)
    for line in spec.lines:
        _draw_line(axes, line, spec)
    for index, ref in enumerate(spec.ref_lines):
        axes.axhline(ref.value, color="#555555", linewidth=1.0, linestyle=(0, (6, 3)), zorder=1)
        # The first label below its line, the others above: 1x and the margin line lie close together.
        below = index == 0 and len(spec.ref_lines) > 1
        axes.annotate(
            figure_text(ref.label),
            (1.0, ref.value),
            xycoords=("axes fraction", "data"),
            xytext=(-4, -3 if below else 3),
            textcoords="offset points",
            ha="right",
            va="top" if below else "bottom",
            fontsize=7.5,
            color="#333333",
            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "linewidth": 0},
            zorder=5,
        )
    _draw_marks(axes, spec)
    _legend(axes, spec)
    axes.yaxis.set_major_locator(FixedLocator(_log_ticks(*axes.get_ylim())))
    axes.yaxis.set_minor_locator(NullLocator())
    axes.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))


def _draw_shades(axes: Any, spec: FigureSpec, low: float, high: float) -> None:
    from matplotlib.transforms import blended_transform_factory

    text_transform = blended_transform_factory(axes.transData, axes.transAxes)
    for index, shade in enumerate(spec.shades):
        left = max(low, shade.min_bytes) if shade.min_bytes else low
        right = high if shade.max_bytes is None else min(high, shade.max_bytes)
        if right <= left:
            continue
        colour = "#d9d9d9" if shade.backend in _FIXED else backend_colour(shade.backend)
        axes.axvspan(left, right, color=colour, alpha=0.12, linewidth=0, zorder=0)
        axes.axvline(right, color="#999999", linewidth=0.6, zorder=0.5)
        middle = math.sqrt(left * right)
        axes.text(
            middle,
            0.985 - 0.055 * (index % 2),
            figure_text(shade.label),
            transform=text_transform,
            ha="center",
            va="top",
            fontsize=7.5,
            fontweight="bold",
            color="#222222" if shade.backend in _FIXED else backend_colour(shade.backend),
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.75, "linewidth": 0},
            zorder=5,
        )


def _draw_line(axes: Any, line: Line, spec: FigureSpec) -> None:
    """Hue: the family; line style: the variant; marker: the input (several runs overlaid). Points
    without a line (transitions) show the variant by marker and the input by its fill. In the
    in-context figure, the isolated line is the faint, hollow one."""
    colour, variant = backend_style(line.backend)
    isolated = spec.kind == CONTEXT and line.variant == "isolated"
    linestyle: str = _LINESTYLES[variant % len(_LINESTYLES)] if line.connect else "none"
    if line.connect:
        marker, fill = _MARKERS[line.source_index % len(_MARKERS)], "none" if isolated else "full"
    else:
        marker, fill = _MARKERS[variant % len(_MARKERS)], _FILLS[line.source_index % len(_FILLS)]
    xs = [p.nbytes for p in line.points]
    ys = [p.value for p in line.points]
    axes.plot(
        xs,
        ys,
        color=colour,
        linestyle=linestyle,
        marker=marker,
        fillstyle=fill,
        markersize=4.5 if line.emphasis or not line.connect else 3.5,
        linewidth=2.6 if line.emphasis else (1.0 if isolated else 1.4),
        zorder=4 if line.emphasis else 3,
        alpha=0.55 if isolated else 1.0,
    )
    if line.connect and any(p.low != p.high for p in line.points):
        axes.fill_between(
            xs,
            [p.low for p in line.points],
            [p.high for p in line.points],
            color=colour,
            alpha=0.18,
            linewidth=0,
        )


def _draw_marks(axes: Any, spec: FigureSpec) -> None:
    """Each cell with no value: a grey cross at its size in a row of its backend's, at the bottom,
    the row named beside the axes (the legend's one "not measured" entry is the same grey cross)."""
    from matplotlib.transforms import blended_transform_factory

    transform = blended_transform_factory(axes.transData, axes.transAxes)
    rows = {backend: index for index, backend in enumerate(sorted({m.backend for m in spec.marks}))}
    for mark in spec.marks:
        axes.plot(
            [mark.nbytes],
            [0.03 + 0.035 * rows[mark.backend]],
            transform=transform,
            marker="x",
            markersize=7,
            markeredgewidth=1.8,
            color=_MARK_COLOUR,
            linestyle="none",
            zorder=6,
            clip_on=False,
        )
    for backend, row in rows.items():  # named in the right margin, below the legend, beside its row
        axes.annotate(
            figure_text(backend),
            (1.0, 0.03 + 0.035 * row),
            xycoords="axes fraction",
            xytext=(5, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize=7,
            color=_MARK_COLOUR,
            annotation_clip=False,
        )


def _legend(axes: Any, spec: FigureSpec) -> None:
    from matplotlib.lines import Line2D

    handles = []
    points_only = bool(spec.lines) and not any(line.connect for line in spec.lines)
    plotted = {line.backend for line in spec.lines}
    for backend in _ordered([name for name in spec.backends if name in plotted] or sorted(plotted)):
        colour, variant = backend_style(backend)
        emphasis = any(line.emphasis and line.backend == backend for line in spec.lines)
        handles.append(
            Line2D(
                [],
                [],
                color=colour,
                linewidth=2.6 if emphasis else 1.4,
                linestyle="none" if points_only else _LINESTYLES[variant % len(_LINESTYLES)],
                marker=_MARKERS[variant % len(_MARKERS)] if points_only else "",
                label=figure_text(backend),
            )
        )
    sources = _source_styles(spec)
    if len(sources) > 1:
        for index, source in sources:
            handles.append(
                Line2D(
                    [],
                    [],
                    color="#555555",
                    linestyle="none",
                    marker=_MARKERS[0] if points_only else _MARKERS[index % len(_MARKERS)],
                    fillstyle=_FILLS[index % len(_FILLS)] if points_only else "full",
                    label=figure_text(source),
                )
            )
    if spec.kind == CONTEXT:
        handles.append(Line2D([], [], color="#555555", linewidth=1.4, marker="o", label="in context"))
        handles.append(
            Line2D(
                [],
                [],
                color="#555555",
                linewidth=1.0,
                alpha=0.55,
                marker="o",
                fillstyle="none",
                label="isolated",
            )
        )
    if spec.marks:
        handles.append(
            Line2D([], [], color=_MARK_COLOUR, marker="x", markeredgewidth=1.8, linestyle="none",
                   label="not measured (see notes)")
        )  # fmt: skip
    if any(line.points and line.connect and line.points[0].low != line.points[0].high for line in spec.lines):
        handles.append(_band_handle())
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _band_handle() -> Any:
    from matplotlib.patches import Patch

    return Patch(color="#555555", alpha=0.18, label="95% CI")


def _source_styles(spec: FigureSpec) -> list[tuple[int, str]]:
    seen: dict[str, int] = {}
    for line in spec.lines:
        seen.setdefault(line.source, line.source_index)
    return [(index, source) for source, index in seen.items()]


def _ordered(backends: Sequence[str]) -> list[str]:
    """The baseline first, then the schema's order, then any other names alphabetically."""
    rank = {name: index for index, name in enumerate(BACKENDS)}
    return sorted(backends, key=lambda name: (name not in _FIXED, rank.get(name, len(rank)), name))


def _x_limits(spec: FigureSpec) -> tuple[float, float]:
    sizes = [p.nbytes for line in spec.lines for p in line.points] + [m.nbytes for m in spec.marks]
    if not sizes:
        sizes = [s.max_bytes for s in spec.shades if s.max_bytes] or [1024, 1 << 20]
    low, high = min(sizes) / 1.5, max(sizes) * 1.5
    if high / low < 16:  # a few sizes only: keep a readable span with size ticks on both sides
        middle = math.sqrt(low * high)
        low, high = middle / 4, middle * 4
    return low, high


def _log_ticks(low: float, high: float) -> list[float]:
    """Readable ticks for a log axis: 1-2-5 per decade, or finer steps when it spans under a decade."""
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7)):
        ticks = [round(m * 10.0**d, 10) for d in decades for m in mantissas]
        inside = [t for t in ticks if low <= t <= high]
        if len(inside) >= 4:
            return inside
    return inside


#: A/B arms: the default black (the reference, as NCCL is in the size figures), the plan blue.
_ARM_COLOURS = {"default": "#000000", "plan": "#1f77b4", "nccl": "#7f7f7f"}


def render_ab_png(spec: AbFigureSpec) -> bytes:
    """An A/B record's figure: each arm's measured runs as points (a faint line joins each to the
    default's run of its round: the pairs its ratio rests on), its median as a bar, failed runs as
    crosses below. The first arm is the default (the record's order)."""
    require_matplotlib()
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.transforms import blended_transform_factory

    with matplotlib.rc_context(_RC):
        notes = wrapped_notes(spec.notes)
        height = 4.6 + NOTE_LINE_IN * len(notes)
        figure = Figure(figsize=(8.0, height), dpi=DPI)
        FigureCanvasAgg(figure)
        figure.subplots_adjust(
            left=0.12,
            right=0.97,
            top=1 - 0.45 / height,
            bottom=(0.6 + NOTE_LINE_IN * len(notes)) / height,
        )
        axes = figure.add_subplot()
        rounds = sorted({r for arm in spec.arms for r, _ in (*arm.points, *arm.failed)})
        offset = {
            r: (i - (len(rounds) - 1) / 2) * min(0.08, 0.5 / max(1, len(rounds)))
            for i, r in enumerate(rounds)
        }
        reference = dict(spec.arms[0].points) if spec.arms else {}
        for index, arm in enumerate(spec.arms[1:], start=1):
            for r, value in arm.points:
                if r in reference:  # the pair this arm's ratio rests on: the default's run of the round
                    xs = [offset[r], index + offset[r]]
                    axes.plot(xs, [reference[r], value], color="#bbbbbb", linewidth=0.7, zorder=1)
        below = blended_transform_factory(axes.transData, axes.transAxes)
        for index, arm in enumerate(spec.arms):
            colour = _ARM_COLOURS.get(arm.arm, backend_colour(arm.arm))
            axes.plot(
                [index + offset[r] for r, _ in arm.points],
                [v for _, v in arm.points],
                "o",
                color=colour,
                markersize=5,
                zorder=3,
            )
            if arm.median is not None:
                axes.plot(
                    [index - 0.3, index + 0.3],
                    [arm.median, arm.median],
                    color=colour,
                    linewidth=2.4,
                    zorder=2,
                )
            if arm.failed:
                axes.plot(
                    [index + offset[r] for r, _ in arm.failed],
                    [0.03] * len(arm.failed),
                    "x",
                    color="#d62728",
                    markersize=7,
                    markeredgewidth=1.8,
                    transform=below,
                    clip_on=False,
                    zorder=4,
                )
        axes.set_xticks(range(len(spec.arms)), [figure_text(arm.arm) for arm in spec.arms])
        axes.set_xlim(-0.6, len(spec.arms) - 0.4)
        axes.set_title(figure_text(spec.title), loc="left")
        axes.set_ylabel(figure_text(spec.ylabel))
        for index, note in enumerate(notes):
            y = (NOTE_LINE_IN * (len(notes) - index) - 0.05) / height
            figure.text(0.01, y, note, fontsize=8, color="#444444", va="bottom")
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
