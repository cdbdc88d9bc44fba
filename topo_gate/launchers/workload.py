"""What a plan is priced over: how often a serving step carries each token count.

A *workload* is a set of token counts per forward step with weights (the share of steps of that
size). A plan's objective is the expected all-reduce time per step over it (``costmodel``). The
presets below are documented assumptions, not measurements; ``--workload FILE`` replaces them with
the user's own mix:

```yaml
# workload.yaml: tokens per step -> weight (any positive numbers; normalised)
name: chat-a100-rps   # optional
steps: {1: 10, 8: 30, 64: 40, 8192: 5}
```

Why these presets: a decode step all-reduces ``batch x hidden`` activations, a chunked-prefill step
``chunk x hidden``. On an H200 SGLang 0.5.23 caps a prefill chunk at 8192 tokens
(``sglang/srt/arg_groups/memory_hook.py:144-157``, ``chunked_prefill_size=8192`` for 90-160 GB GPUs)
and captures decode graphs up to batch 256 at TP < 4 (same lines); vLLM 0.33.0 ``vllm serve``
batches up to 8192 tokens per step on 70-160 GB GPUs (``vllm/engine/arg_utils.py:2983-2996``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

#: Workload files are small: a few hundred token counts at most.
MAX_WORKLOAD_BYTES = 64 * 1024
MAX_STEPS = 4096
#: No step carries more tokens than this (a million-token prefill chunk is no serving step).
MAX_TOKENS = 1 << 20


class WorkloadError(ValueError):
    """A workload that cannot be used; ``str()`` is one line naming the problem."""


@dataclass(frozen=True)
class Workload:
    """Token counts per step and their weights (normalised to sum to 1), ascending by tokens."""

    name: str
    steps: tuple[tuple[int, float], ...]
    description: str = ""

    def __post_init__(self) -> None:
        if not self.steps:
            raise WorkloadError(f"workload {self.name!r}: no steps")
        tokens = [t for t, _ in self.steps]
        if tokens != sorted(set(tokens)):
            raise WorkloadError(f"workload {self.name!r}: token counts must be distinct and ascending")
        total = sum(w for _, w in self.steps)
        if abs(total - 1.0) > 1e-9:
            raise WorkloadError(f"workload {self.name!r}: weights must sum to 1 (got {total})")

    @classmethod
    def from_weights(cls, name: str, weights: Mapping[int, float], description: str = "") -> Workload:
        """From any positive weights; normalised."""
        if len(weights) > MAX_STEPS:
            raise WorkloadError(f"workload {name!r}: more than {MAX_STEPS} token counts")
        for tokens, weight in weights.items():
            if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS:
                raise WorkloadError(
                    f"workload {name!r}: token count {tokens!r} is not an integer in 1..{MAX_TOKENS}"
                )
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise WorkloadError(
                    f"workload {name!r}: weight {weight!r} of {tokens} tokens is not a finite number"
                )
            if weight <= 0:
                raise WorkloadError(f"workload {name!r}: weight of {tokens} tokens must be > 0, got {weight}")
        total = float(sum(weights.values()))
        steps = tuple((t, weights[t] / total) for t in sorted(weights))
        return cls(name, steps, description)

    @property
    def max_tokens(self) -> int:
        return self.steps[-1][0]


def _log_uniform(low: int, high: int) -> dict[int, float]:
    """Powers of two from ``low`` to ``high``, equal weights."""
    out, tokens = {}, low
    while tokens <= high:
        out[tokens] = 1.0
        tokens *= 2
    return out


def _serving() -> dict[int, float]:
    # 90% decode steps (batch 1..256, log-uniform), 10% steps carrying a prefill chunk (2048, 8192).
    decode = {t: 0.9 / 9 for t in _log_uniform(1, 256)}
    return {**decode, 2048: 0.05, 8192: 0.05}


PRESETS: dict[str, Workload] = {
    "serving": Workload.from_weights(
        "serving",
        _serving(),
        "90% decode steps at batch 1, 2, 4, ..., 256 (equal weights), 10% steps with a prefill chunk of "
        "2048 or 8192 tokens (5% each)",
    ),
    "decode": Workload.from_weights(
        "decode", _log_uniform(1, 512), "decode steps at batch 1, 2, 4, ..., 512, equal weights"
    ),
    "prefill": Workload.from_weights(
        "prefill",
        _log_uniform(1024, 8192),
        "prefill chunks of 1024, 2048, 4096 and 8192 tokens, equal weights",
    ),
}
DEFAULT_WORKLOAD = "serving"


def lookup_workload(value: str | None) -> Workload:
    """A preset name, or the path of a workload file (YAML or JSON, see the module docstring)."""
    if value is None:
        return PRESETS[DEFAULT_WORKLOAD]
    if value in PRESETS:
        return PRESETS[value]
    if os.sep not in value and not os.path.exists(value):
        raise WorkloadError(f"unknown workload {value!r}: a preset ({', '.join(PRESETS)}) or a file path")
    return load_workload(value)


def load_workload(path: str | os.PathLike[str]) -> Workload:
    """A workload file, read through the guarded reader; ``WorkloadError`` naming the file."""
    from topo_gate._inputs import InputError, read_text
    from topo_gate.profile.yaml_format import parse_yaml

    where = os.fspath(path)
    try:
        data = parse_yaml(read_text(path, limit=MAX_WORKLOAD_BYTES, what="a workload file"))
    except InputError as error:
        raise WorkloadError(f"{where}: {error}") from None
    except Exception as error:  # noqa: BLE001 -- the YAML layer's own errors: garbled input
        raise WorkloadError(f"{where}: not YAML/JSON: {' '.join(str(error).split())}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("steps"), Mapping):
        raise WorkloadError(f"{where}: expected a mapping with 'steps: {{tokens: weight, ...}}'")
    unknown = sorted(set(data) - {"name", "steps", "description"})
    if unknown:
        raise WorkloadError(
            f"{where}: unknown key(s) {', '.join(map(str, unknown))} (known: name, steps, description)"
        )
    name = data.get("name", os.path.basename(where))
    if not isinstance(name, str):
        raise WorkloadError(f"{where}: name must be text")
    try:
        return Workload.from_weights(name, dict(data["steps"]), str(data.get("description", "")))
    except WorkloadError as error:
        raise WorkloadError(f"{where}: {error}") from None
