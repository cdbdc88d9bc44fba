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

or the same as JSON, ``{"steps": {"1": 10, "8": 30, "64": 40, "8192": 5}}``: a string key is read when it
is a canonical decimal. Two keys YAML reads as one count (``16`` and ``0x10``) are refused, naming both.

Why these presets, number by number (the split between decode and prefill steps is an
*assumption*, not a measurement: a server's real mix is its own, which ``--workload FILE`` gives):

- a decode step all-reduces ``batch x hidden`` activations, a chunked-prefill step ``chunk x hidden``;
- decode batches run 1 .. 256 at TP < 4 and 1 .. 512 at TP >= 4: the largest batch SGLang 0.5.23
  captures in a CUDA graph on 90-160 GB GPUs ("max_bs 256 if tp < 4 else 512",
  ``sglang/srt/arg_groups/memory_hook.py:146-157``; the same rule for 40-90 GB GPUs at 132-144),
  powers of two, equal weights (an assumption);
- 8192 tokens: a full prefill chunk, SGLang's ``chunked_prefill_size`` on those GPUs (same lines) and
  vLLM 0.33.0's ``max_num_batched_tokens`` for ``vllm serve`` on 70-160 GB GPUs
  (``vllm/engine/arg_utils.py:2983-2996``);
- 2048 tokens: not a chunk size but a short prefill step (a prompt that fits in fewer tokens than a
  chunk). It sits exactly on SGLang's FlashInfer fusion workspace cap (``FUSE_ALLREDUCE_MAX_BATCH_SIZE
  = 2048``, ``sglang/srt/layers/layer_boundary/residual/add_norm.py:141``): the largest message that
  buffer holds, so a plan that fills it is priced at its dearest transition. The weight is an
  assumption;
- 90% decode, 5% each prefill size: an assumption (decode dominates the steps of a chat server).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


#: The TP size from which SGLang captures decode graphs up to 512 (``memory_hook.py:146-157``).
WIDE_DECODE_TP = 4


def _serving(largest_batch: int) -> dict[int, float]:
    # 90% decode steps (log-uniform up to the largest captured batch), 10% prefill (2048, 8192).
    batches = _log_uniform(1, largest_batch)
    decode = {t: 0.9 / len(batches) for t in batches}
    return {**decode, 2048: 0.05, 8192: 0.05}


def _serving_workload(largest_batch: int) -> Workload:
    return Workload.from_weights(
        "serving",
        _serving(largest_batch),
        f"an assumed mix: 90% decode steps at batch 1, 2, 4, ..., {largest_batch} (equal weights), 5% "
        "short prefills of 2048 tokens, 5% full 8192-token prefill chunks",
    )


PRESETS: dict[str, Workload] = {
    "serving": _serving_workload(256),
    "decode": Workload.from_weights(
        "decode", _log_uniform(1, 512), "decode steps at batch 1, 2, 4, ..., 512, equal weights"
    ),
    "prefill": Workload.from_weights(
        "prefill",
        _log_uniform(1024, 8192),
        "prefill chunks of 1024, 2048, 4096 and 8192 tokens, equal weights",
    ),
}
#: ``serving`` where the launchers capture decode graphs up to 512 (TP >= 4).
WIDE_SERVING = _serving_workload(512)
DEFAULT_WORKLOAD = "serving"


def lookup_workload(value: str | None, tp: int | None = None) -> Workload:
    """A preset name (``serving`` follows the TP size: decode to 512 at TP >= 4), or the path of a
    workload file (YAML or JSON, see the module docstring)."""
    name = DEFAULT_WORKLOAD if value is None else value
    if name == "serving" and tp is not None and tp >= WIDE_DECODE_TP:
        return WIDE_SERVING
    if name in PRESETS:
        return PRESETS[name]
    if os.sep not in name and not os.path.exists(name):
        raise WorkloadError(f"unknown workload {name!r}: a preset ({', '.join(PRESETS)}) or a file path")
    return load_workload(name)


def load_workload(path: str | os.PathLike[str]) -> Workload:
    """A workload file, read through the guarded reader; ``WorkloadError`` naming the file."""
    from topo_gate._inputs import InputError, read_text
    from topo_gate.profile.yaml_format import parse_yaml

    where = os.fspath(path)
    try:
        text = read_text(path, limit=MAX_WORKLOAD_BYTES, what="a workload file")
        data = parse_yaml(text)
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
        weights = _weights_by_count(name, _step_keys(text), data["steps"])
        return Workload.from_weights(name, weights, str(data.get("description", "")))
    except WorkloadError as error:
        raise WorkloadError(f"{where}: {error}") from None


#: A token count as JSON writes it (keys are strings there): a canonical decimal, as ``str(int)`` spells it.
_DECIMAL_KEY = re.compile(r"[1-9][0-9]*")


def _weights_by_count(
    name: str, keys: list[tuple[object, str]], steps: Mapping[object, Any]
) -> dict[int, float]:
    """``steps`` keyed by token count, ``keys`` being its keys as read and as written, in file order.

    YAML reads ``16``, ``0x10``, ``+16`` and ``1_6`` as one integer and keeps the last of them silently
    (``{16: 1, 0x10: 100}`` is one step of weight 100), so two keys that are one count are refused
    naming both spellings; a string key (JSON has no other) counts when it is the count's canonical
    decimal, and is refused by name otherwise."""
    weights: dict[int, float] = {}
    spelled: dict[int, str] = {}
    for key, spelling in keys:
        count = _count_of(name, key)
        if count in spelled:
            raise WorkloadError(
                f"workload {name!r}: token count {count} is written twice ({spelled[count]} and "
                f"{spelling}): give each count once"
            )
        weights[count] = steps[key]
        spelled[count] = spelling
    return weights


def _count_of(name: str, key: object) -> int:
    """The token count a key stands for (``from_weights`` checks its range): an integer (not a bool:
    ``1.0`` and ``true`` equal 1 as keys, so they would pass for a second spelling of it), or a string
    of the count's canonical decimal."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    if (
        isinstance(key, str)
        and _DECIMAL_KEY.fullmatch(key)
        and len(key) <= len(str(MAX_TOKENS))
        and int(key) <= MAX_TOKENS
    ):
        return int(key)
    raise WorkloadError(f"workload {name!r}: token count {key!r} is not an integer in 1..{MAX_TOKENS}")


def _step_keys(text: str) -> list[tuple[object, str]]:
    """The keys of the ``steps`` mapping in ``text``, in file order: each as the loader reads it and as
    it is written (``0x10``; a string quoted: ``'8'``)."""
    import yaml

    from topo_gate.profile.yaml_format import ProfileLoader

    loader = ProfileLoader(text)  # type: ignore[call-arg]  # the parser mixed in takes the text
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()  # type: ignore[attr-defined]
    constructor = yaml.constructor.SafeConstructor()
    found: list[tuple[object, str]] = []
    for key_node, value_node in root.value if isinstance(root, yaml.MappingNode) else ():
        if key_node.value != "steps" or not isinstance(value_node, yaml.MappingNode):
            continue
        for step_node, _ in value_node.value:
            key = constructor.construct_object(step_node)
            found.append((key, repr(key) if isinstance(key, str) else step_node.value))
    return found
