"""Helpers for the trial-harness tests (a plain module: conftest names collide across test folders)."""

from __future__ import annotations

import os
from pathlib import Path

from topo_gate.trials.plan import TrialPlan, default_backends, token_ladder


def gloo_plan(tp: int = 2, pattern: str = "allreduce", **overrides: object) -> TrialPlan:
    """A tiny CPU plan: hidden 32, sizes 1..4 tokens, 3 rounds (the harness, not the numbers, is tested)."""
    fields: dict[str, object] = dict(
        tp=tp,
        group=tuple(range(tp)),
        group_class="cpu",
        pattern=pattern,
        dtype="bfloat16",
        hidden=32,
        tokens=token_ladder(4),
        backends=default_backends(pattern, "cpu"),
        graph_calls=4,
        rounds=3,
        warmup=1,
    )
    fields.update(overrides)
    return TrialPlan(**fields)  # type: ignore[arg-type]


def processes_mentioning(text: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # exited while we looked
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found
