"""Profiles for launcher tests, built through the real profile API and sealed with a real digest."""

from __future__ import annotations

from topo_gate.profile import Alternative, DecisionEntry, Node, Profile, Rule, Tool, Trials

FINGERPRINT = "sha256:" + "ab" * 32
OTHER_NODE = "sha256:" + "cd" * 32
SPEEDUP = {"speedup": 1.5, "ci": (1.3, 1.7)}


def build_profile(
    ladders: dict,
    *,
    tp: int = 2,
    sm: str | None = "9.0",
    hidden: int = 4096,
    dtype: str = "bfloat16",
    group_class: str = "nvswitch",
    schema: str = "topo-gate/profile/v1.1",
) -> Profile:
    """``ladders``: {pattern: [[max_bytes|None, backend, (alternatives)], ...]} for one TP size on a
    group of ``group_class``; the optional third item lists other backends measured faster than NCCL
    there (schema v1.1; a ``topo-gate/profile/v1`` profile has none)."""
    gpus = [{"index": i, "model": "NVIDIA H100 80GB HBM3", "sm": sm} for i in range(8)]
    decisions = tuple(
        DecisionEntry(
            tp=tp,
            group=tuple(range(tp)),
            group_class=group_class,
            pattern=pattern,
            rules=tuple(_rule(*rung) for rung in rungs),
        )
        for pattern, rungs in ladders.items()
    )
    return Profile(
        schema=schema,
        created="2026-11-30T08:00:00Z",
        tool=Tool(name="topo-gate", version="0.1.0"),
        node=Node(
            fingerprint=FINGERPRINT,
            software={},
            hardware={
                "gpus": gpus,
                "tp_groups": {str(tp): [{"gpus": list(range(tp)), "class": group_class}]},
            },
        ),
        trials=Trials(dtype=dtype, hidden=hidden, tp=(tp,), patterns=tuple(ladders)),
        decisions=decisions,
    ).with_digest()


def _rule(max_bytes: int | None, backend: str, alternatives: list[str] = ()) -> Rule:
    return Rule(
        max_bytes=max_bytes,
        backend=backend,
        **({} if backend == "nccl" else SPEEDUP),
        alternatives=tuple(Alternative(name, 1.2, (1.1, 1.3)) for name in alternatives),
    )
