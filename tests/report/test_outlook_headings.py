"""The outlook's headings are per TP size *and* served model: two models at one TP size, or one model
at two TP sizes, are two headings, each over its own launchers (``report/outlook.py``)."""

from __future__ import annotations

from topo_gate.launchers.outlook import Outcome, Outlook, Outlooks, Shape
from topo_gate.report.outlook import HEADING, LAUNCHER, layout

# One hidden size, two models: only the model tells them apart.
SMALL, LARGE = Shape("model-a", 4096, "model-a", 32), Shape("model-b", 4096, "model-b", 80)


def _entry(launcher: str, tp: int, shape: Shape) -> Outlook:
    return Outlook(launcher, tp, shape, "serving", Outcome("", f"{launcher} at TP {tp} for {shape.label}"))


def _sections(found: Outlooks) -> list[tuple[str, list[str]]]:
    """Each heading's words and the launcher lines under it."""
    sections: list[tuple[str, list[str]]] = []
    for block in layout(found):
        words = "".join(segment.text for segment in block.segments)
        if block.kind == HEADING:
            sections.append((words, []))
        elif block.kind == LAUNCHER:
            sections[-1][1].append(words)
    return sections


def test_two_models_at_one_tp_size_are_two_headings() -> None:
    found = Outlooks(
        tuple(_entry(launcher, 2, shape) for shape in (SMALL, LARGE) for launcher in ("sglang", "vllm"))
    )
    sections = _sections(found)
    assert [heading for heading, _ in sections] == [
        "TP 2, model-a: hidden 4096, 32 layers, workload 'serving'",
        "TP 2, model-b: hidden 4096, 80 layers, workload 'serving'",
    ]
    for (_, lines), shape in zip(sections, (SMALL, LARGE), strict=True):
        assert len(lines) == 2 and all(shape.label in line for line in lines)


def test_one_model_at_two_tp_sizes_is_two_headings() -> None:
    found = Outlooks(tuple(_entry("vllm", tp, SMALL) for tp in (2, 4)))
    assert [heading.split(",")[0] for heading, _ in _sections(found)] == ["TP 2", "TP 4"]
