"""A launcher's option table as a parser that reads options the way the launcher's argparse parser does.

The table is the ``all_options`` key of the launcher's knob manifest: every option string the pinned
release's server parser registers, grouped by the action it runs, with how many values that action
takes (``scripts/extract_knobs.py options`` reads it from the parser itself). Prefix matching is what
makes a table of *every* option necessary: argparse takes any unambiguous abbreviation
(``allow_abbrev``, on in both launchers), so ``--tensor-parallel 4`` is vLLM's TP size and ``--tp-siz
4`` SGLang's, while ``--tp`` is vLLM's error ("ambiguous option"). Which abbreviation is unambiguous
depends on every option name, not only the all-reduce ones.

The table is replayed through the standard library's own ``argparse`` (with one recording action per
launcher action), so abbreviations, ``--flag=value``, single-dash options (``-tp=4``), ``--`` and
values that look like options resolve exactly as they do in the launcher, on this interpreter's
argparse -- the one a launcher started by ``topo-gate exec`` runs under.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple, NoReturn

from topo_gate.launchers import knobs


class CmdlineError(ValueError):
    """A command line the launcher's parser would refuse (an ambiguous abbreviation, a missing value,
    a TP size that is no integer), in one line."""


class CmdlineFileError(CmdlineError):
    """A file the command line names (a config or options file) that cannot be read safely."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}")


@dataclass(frozen=True)
class Action:
    """One action of the launcher's parser: its destination, stdlib family, value count, spellings."""

    dest: str
    family: str  # store, store_true, boolean_optional, help, ... (extract_knobs.action_family)
    nargs: int | str | None  # argparse's: None = one value, 0 = a switch, "?", "*", "+"
    options: tuple[str, ...]  # spellings that set it (a switch: to True)
    negative: tuple[str, ...]  # spellings that set a switch to False (``--no-x``, vLLM's inverses)

    @property
    def canonical(self) -> str:
        """The name topo-gate uses for the action: its first long option (``--tp-size``, not ``-tp``)."""
        return _first_long(self.options or self.negative)

    def spelled(self, option: str) -> str:
        """The canonical spelling of ``option``'s polarity: ``--no-<canonical>`` for a negative one
        where the parser has it (every BooleanOptionalAction does), else its first long negative."""
        if option not in self.negative:
            return self.canonical
        preferred = "--no-" + self.canonical[2:]
        return preferred if preferred in self.negative else _first_long(self.negative)


def _first_long(options: Sequence[str]) -> str:
    return next((option for option in options if option.startswith("--")), options[0])


#: One option as the parser saw it: the action, the canonical spelling, its values (none for a switch).
Occurrence = tuple[Action, str, tuple[str, ...]]


class _Recorder(argparse.Action):
    """Stands in for every launcher action: records what argparse hands the real one."""

    entry: Action

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        got = () if values is None else (values,) if isinstance(values, str) else tuple(values)
        namespace.seen.append((self.entry, self.entry.spelled(str(option)), got))


class Reading(NamedTuple):
    """One reading of a line: the options it sets, in order; the tokens the parser does not recognize
    (the pinned release would refuse the line with them; another release may know them); and the
    positionals it fills (destination -> value; vLLM's ``model_tag``)."""

    seen: list[Occurrence]
    unrecognized: list[str]
    positionals: dict[str, Any]


#: How the replica names a positional's destination, apart from the launcher actions' ``action_N``.
_POSITIONAL = "positional_"


class _Replica(argparse.ArgumentParser):
    """argparse, refusing in one line where the launcher's parser would print usage and exit 2."""

    def error(self, message: str) -> NoReturn:
        raise CmdlineError(" ".join(message.split()))


@dataclass(frozen=True)
class Table:
    """The launcher's option table and the parser that replays it."""

    launcher: str
    actions: tuple[Action, ...]
    by_option: Mapping[str, Action]
    parser: argparse.ArgumentParser

    def read(self, args: Sequence[str]) -> Reading:
        """What the parser reads in ``args`` (``Reading``)."""
        namespace = argparse.Namespace(seen=[])
        try:
            _, extras = self.parser.parse_known_args(list(args), namespace)
        except RecursionError:  # pragma: no cover - argparse recursion needs absurd nesting
            raise CmdlineError("command line too deeply nested to read") from None
        positionals = {
            name.removeprefix(_POSITIONAL): value
            for name, value in vars(namespace).items()
            if name.startswith(_POSITIONAL)
        }
        return Reading(list(namespace.seen), list(extras), positionals)

    def resolve(self, option: str) -> Action | None:
        """The action one option token means here (exactly or as an abbreviation), else None."""
        try:
            seen = self.read([option, "0"]).seen  # a value for it to take, if it takes one
        except CmdlineError:
            return None
        return seen[0][0] if seen else None


@cache
def table(launcher: str, release: str | None = None) -> Table:
    """``launcher``'s option table in ``release`` (None: the newest modelled), the ``all_options`` of
    its manifest (argparse launchers): releases add options, and an abbreviation unique in one can be
    ambiguous in the next."""
    spec = knobs.manifest(launcher, release).get("all_options")
    if spec is None:
        raise KeyError(f"the {launcher} manifest has no all_options table")
    actions = tuple(
        Action(
            dest=row["dest"],
            family=row["action"],
            nargs=row["nargs"],
            options=tuple(row["options"]),
            negative=tuple(row["negative"]),
        )
        for row in spec["actions"]
    )
    parser = _Replica(
        prog=launcher,
        add_help=False,
        allow_abbrev=bool(spec["allow_abbrev"]),
        prefix_chars=str(spec["prefix_chars"]),
    )
    for position in spec.get("positionals", ()):
        # Positionals take the tokens no option does (vLLM's model_tag): without them those tokens
        # would read as unrecognized, as if the launcher refused them.
        parser.add_argument(
            f"{_POSITIONAL}{position['dest']}", nargs=position["nargs"], default=argparse.SUPPRESS
        )
    by_option: dict[str, Action] = {}
    for index, action in enumerate(actions):
        recorder = parser.add_argument(
            *action.options,
            *action.negative,
            dest=f"action_{index}",
            nargs=action.nargs,
            action=_Recorder,
            default=argparse.SUPPRESS,
        )
        recorder.entry = action  # type: ignore[attr-defined]  # _Recorder's slot, set once here
        by_option.update(dict.fromkeys((*action.options, *action.negative), action))
    return Table(launcher, actions, by_option, parser)
