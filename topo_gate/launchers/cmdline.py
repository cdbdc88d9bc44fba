"""The all-reduce knobs a user's own launcher command line and environment set (exact names only;
the full reading the way each launcher's parser reads argv replaces this)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Knobs


def user_knobs(launcher: str, argv: Sequence[str], environ: Mapping[str, str]) -> Knobs:
    manifest = knobs.manifest(launcher)
    flags = manifest.get("flags", {})
    args: list[str] = []
    index = 0
    while index < len(argv):
        name, eq, _ = argv[index].partition("=")
        takes = flags.get(name, {}).get("takes_value", False) or name in ("--compilation-config", "-cc")
        if name in flags or name in ("--compilation-config", "-cc"):
            args.append(argv[index])
            if takes and not eq and index + 1 < len(argv):
                args.append(argv[index + 1])
                index += 1
        index += 1
    env = {k: v for k, v in environ.items() if k in manifest.get("env", {}) or k == "NCCL_NVLS_ENABLE"}
    return Knobs(args=tuple(args), env=env)
