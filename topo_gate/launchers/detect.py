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
