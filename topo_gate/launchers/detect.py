"""Which launcher a command line starts: ``vllm serve``, ``trtllm-serve``, ``python -m sglang.launch_server``."""

from __future__ import annotations

import os
from collections.abc import Sequence

# Console scripts (basename of a token) and the subcommand that must follow, if any.
_SCRIPTS = {("vllm", "serve"): "vllm", ("sglang", "serve"): "sglang", ("trtllm-serve", None): "trtllm"}
# ``python -m MODULE``: the module's top package names the launcher.
_PACKAGES = {"sglang": "sglang", "vllm": "vllm", "tensorrt_llm": "trtllm"}


def detect_launcher(argv: Sequence[str]) -> str | None:
    """The launcher ``argv`` starts, or None when it cannot tell (the user passes ``--launcher``).

    Wrappers in front (``env A=B``, ``numactl ...``, ``uv run``) are skipped by scanning every token.
    """
    for index, token in enumerate(argv):
        name = os.path.basename(token)
        following = argv[index + 1] if index + 1 < len(argv) else None
        for (script, subcommand), launcher in _SCRIPTS.items():
            if name == script and (subcommand is None or following == subcommand):
                return launcher
        if token == "-m" and following:
            by_package = _PACKAGES.get(following.split(".", 1)[0])
            if by_package and "." in following:
                return by_package
    return None


#: The flags that set the tensor-parallel size on each launcher's command line: SGLang's ServerArgs
#: (``--tp-size`` with alias ``--tensor-parallel-size``; argparse also takes the prefix ``--tp``),
#: vLLM's EngineArgs (``--tensor-parallel-size``, ``-tp``; its parser accepts ``_`` for ``-``),
#: ``trtllm-serve --tp_size``.
TP_FLAGS: dict[str, tuple[str, ...]] = {
    "sglang": ("--tp-size", "--tensor-parallel-size", "--tp"),
    "vllm": ("--tensor-parallel-size", "--tensor_parallel_size", "-tp"),
    "trtllm": ("--tp_size", "--tp-size", "--tensor_parallel_size"),
}


class TpFlagError(ValueError):
    """A TP flag on the command line whose value is not a positive integer."""


def tp_from_command(argv: Sequence[str], launcher: str) -> int | None:
    """The TP size ``argv`` gives ``launcher`` (the last one wins, as in argparse), or None if it names none."""
    found: int | None = None
    flags = TP_FLAGS[launcher]
    for index, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if name not in flags:
            continue
        text = value if eq else (argv[index + 1] if index + 1 < len(argv) else "")
        if not text.isdigit() or int(text) < 1:
            raise TpFlagError(f"{name} {text!r} is not a TP size")
        found = int(text)
    return found
