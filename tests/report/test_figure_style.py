"""How the figures tell backends apart, and that nothing runs off them: one hue per backend family
with a line style per variant (TRT-LLM's, vLLM's, SGLang's call sequence of one kernel), a
composite drawn as its plain path, "not measured" crosses in the one grey of their legend entry,
and notes wrapped inside the figure. Rendered with the real matplotlib on the bundled H200 runs."""

from __future__ import annotations

import dataclasses

import pytest

from topo_gate.profile import BACKENDS
from topo_gate.report import render
from topo_gate.report.render import NOTE_WRAP, backend_colour, backend_style, build_figure, wrapped_notes

pytestmark = pytest.mark.slow  # renders every figure of the bundled runs

ONE_SHOTS = ("trtllm_oneshot", "trtllm_oneshot_vllm", "trtllm_oneshot_sglang")


def _rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def _family(name: str) -> str:
    return name.removesuffix("_vllm").removesuffix("_sglang")


def test_every_known_backend_has_a_hue_and_style_of_its_own() -> None:
    styles = [backend_style(name) for name in BACKENDS]
    assert len(set(styles)) == len(BACKENDS) - 1  # nccl and gloo share solid black: each is the baseline


def test_a_family_shares_one_hue_and_families_differ() -> None:
    hues: dict[str, set[str]] = {}
    for name in BACKENDS:
        if not name.startswith("symm_mem") and name not in ("vllm_custom", "custom_v2_sglang"):
            hues.setdefault(_family(name), set()).add(backend_colour(name))
    assert all(len(found) == 1 for found in hues.values()), hues
    colours = [next(iter(found)) for name, found in hues.items() if name not in ("nccl", "gloo")]
    assert len(set(colours)) == len(colours)
    assert (
        len({backend_colour(n) for n in ("symm_mem_oneshot", "symm_mem_twoshot", "symm_mem_twoshot_vllm")})
        == 1
    )
    assert backend_colour("vllm_custom") == backend_colour("custom_v2_sglang")


def test_pcie_ipc_is_no_shade_of_the_one_shot_blue() -> None:
    # The complaint: four one-shot variants and pcie_ipc in near-identical blues.
    pcie = _rgb(backend_colour("pcie_ipc"))
    for name in ONE_SHOTS:
        other = _rgb(backend_colour(name))
        assert sum((a - b) ** 2 for a, b in zip(pcie, other, strict=True)) ** 0.5 > 150
    assert sorted(backend_style(name)[1] for name in ONE_SHOTS) == [0, 1, 2]


def test_a_composite_is_drawn_as_its_plain_path() -> None:
    assert backend_style("pcie_ipc+rmsnorm") == backend_style("pcie_ipc")
    assert backend_style("trtllm_oneshot_vllm+rmsnorm") == backend_style("trtllm_oneshot_vllm")
    assert backend_style("made_up") == backend_style("made_up+rmsnorm")  # a stable spare hue


@pytest.mark.parametrize(
    "name", ["transition-tp2-nvswitch-allreduce_rmsnorm", "latency-tp2-nvswitch-allreduce"]
)
def test_no_two_backends_of_a_figure_look_alike(name, both_specs) -> None:
    backends = {line.backend for line in both_specs[name].lines}
    assert len({backend_style(b) for b in backends}) == len(backends)


def _drawn(spec):
    matplotlib = pytest.importorskip("matplotlib")  # the report extra; render.py is its only importer
    with matplotlib.rc_context(render._RC):
        figure = build_figure(spec)
        figure.canvas.draw()
    return figure


def test_not_measured_crosses_are_the_grey_of_their_legend_entry(both_specs) -> None:
    spec = both_specs["speedup-tp2-nvswitch-allreduce"]
    assert spec.marks
    (axes,) = _drawn(spec).axes
    crosses = [line for line in axes.get_lines() if line.get_marker() == "x"]
    assert crosses and {line.get_color() for line in crosses} == {render._MARK_COLOUR}
    legend = {
        text.get_text(): handle
        for text, handle in zip(axes.get_legend().get_texts(), axes.get_legend().legend_handles, strict=True)
    }
    assert legend["not measured (see notes)"].get_color() == render._MARK_COLOUR
    named = {text.get_text() for text in axes.texts}
    assert {mark.backend for mark in spec.marks} <= named  # each row of crosses is named


def test_every_note_and_label_stays_inside_the_figure(both_specs) -> None:
    long = "trtllm_twoshot_sglang unavailable at " + ", ".join(f"{n} MiB" for n in range(40)) + ": why"
    spec = dataclasses.replace(both_specs["speedup-tp2-nvswitch-allreduce"], notes=(long, "short"))
    assert all(len(line) <= NOTE_WRAP for line in wrapped_notes(spec.notes))
    lines = wrapped_notes(spec.notes)
    assert len(lines) >= 3 and lines[-1] == "short" and " ".join(lines[:-1]) == long
    figure = _drawn(spec)
    renderer = figure.canvas.get_renderer()
    width = figure.get_figwidth() * figure.dpi
    texts = [*figure.texts, *figure.axes[0].texts]
    assert texts and all(text.get_window_extent(renderer).x1 <= width for text in texts)
