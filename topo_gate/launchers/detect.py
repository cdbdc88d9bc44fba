"""Which launcher a command line starts (``vllm serve``, ``trtllm-serve``, ``python -m sglang.launch_server``)
and the TP size the launcher reads from it."""

from __future__ import annotations

from collections.abc import Sequence

from topo_gate.launchers.cmdline import CmdlineError, CmdlineFileError, find_entry, tp_size


def detect_launcher(argv: Sequence[str]) -> str | None:
    """The launcher ``argv`` starts, or None when it cannot tell (the user passes ``--launcher``).

    Wrappers in front (``env A=B``, ``numactl ...``, ``uv run``) are skipped by scanning every token.
    """
    entry = find_entry(argv)
    return entry.launcher if entry else None


class TpFlagError(CmdlineError):
    """A TP flag on the command line whose value the launcher would not take as a TP size."""


def tp_from_command(argv: Sequence[str], launcher: str, release: str | None = None) -> int | None:
    """The TP size ``argv`` gives ``launcher``, read as the launcher's own parser reads it
    (abbreviations, ``_`` for ``-``, ``=`` forms, config files, the last one winning), or None if it
    names none. ``TpFlagError`` when the launcher would refuse the line or the size;
    ``CmdlineFileError`` when a config file the line names cannot be read."""
    try:
        return tp_size(launcher, argv, release)
    except CmdlineFileError:
        raise
    except CmdlineError as error:
        raise TpFlagError(str(error)) from None
