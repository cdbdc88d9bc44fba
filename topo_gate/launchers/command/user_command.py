"""The user's launcher command line, read once where it comes in, and what a plan takes from it.

``exec`` needs five things from CMD: the launcher, its TP size, the model it serves, the release that
will run it, and the knobs the user already set (which a plan prices the default with and never
overrides); then it merges the plan into the same line. Each is a question about one reading of the
line by the release's own parser (``parse.read``), so the line is read once, into ``UserCommand``,
and every answer and the merge come from that reading. ``PlanRequest.command`` carries it into the
planner, which then reads no command line at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from topo_gate.launchers.command.parse import ParsedCommand, UserKnobs, named_tp, read, user_knobs_of
from topo_gate.launchers.command.releases import Installed, Resolution, resolve
from topo_gate.launchers.command.served_model import ServedModel, served_model_of


@dataclass(frozen=True)
class UserCommand:
    """A launcher command line and its environment, read once (``read_command``).

    ``line``: the line as ``release``'s parser reads it (the launcher is ``line.entry.launcher``).
    ``environ``: the environment the launcher will run with (its env knobs are the user's too).
    ``installed``: the releases read for the line (None: not read, the newest modelled is planned
    for); ``release``: how ``releases.resolve`` maps them onto a modelled release.
    """

    line: ParsedCommand
    environ: Mapping[str, str]
    installed: Installed | None
    release: Resolution

    @property
    def launcher(self) -> str:
        return self.line.entry.launcher

    @property
    def argv(self) -> tuple[str, ...]:
        return self.line.argv

    def tp(self) -> int | None:
        """The TP size the line gives the launcher (None: it names none); ``CmdlineError`` for a size
        the launcher would refuse, ``CmdlineFileError`` for an options file that cannot be read."""
        return named_tp(self.line)

    @cached_property
    def served(self) -> ServedModel:
        """The model the line serves and its shape (``served_model``; never raises)."""
        return served_model_of(self.line)

    @cached_property
    def knobs(self) -> UserKnobs:
        """The knobs the user set, for the modelled release (``parse.user_knobs_of``); ``CmdlineError``
        where they cannot be read (a compilation config that is no JSON, an unreadable options file)."""
        return user_knobs_of(self.line, self.environ, self.release.release)


def read_command(
    launcher: str, argv: Sequence[str], environ: Mapping[str, str], installed: Installed | None
) -> UserCommand:
    """``argv`` read once for ``launcher``, as the release ``installed`` resolves to reads it (the
    newest modelled where none can plan); ``CmdlineError`` where that parser would refuse the line."""
    release = resolve(launcher, installed)
    return UserCommand(read(launcher, argv, release.modelled), environ, installed, release)
