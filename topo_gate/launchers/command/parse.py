"""Reading a launcher's command line the way the pinned release's own parser reads it.

``exec`` plans for the TP size the launcher will run with and must never override a knob the user
set, and the planner prices the launcher's default route *with the user's own flags and env*; all
three need the command line read exactly as the launcher reads it, not by exact flag names:

- SGLang and vLLM parse with argparse, which takes any unambiguous abbreviation of any option
  (``--tensor-parallel 4``, ``--tp-siz 4``): the option table is every option of the pinned parser
  (``cmdline_table``), replayed through argparse itself;
- vLLM rewrites its line first (``_`` for ``-``, ``-O3``, dotted ``-cc.pass_config.k=v``, ``--config
  FILE``) and SGLang inlines ``--config FILE`` (``cmdline_forms``, each step cited there);
- TensorRT-LLM's ``trtllm-serve`` is click (exact names) and reads an ``--extra_llm_api_options`` YAML
  file whose keys override its flags.

A command line with no launcher entry point in it (``vllm serve``, ``python -m sglang.launch_server``,
``trtllm-serve``) is read as the launcher's arguments alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from topo_gate.launchers import knobs
from topo_gate.launchers.command import forms
from topo_gate.launchers.command.options import CmdlineError, CmdlineFileError, Reading, table
from topo_gate.launchers.routes.base import Knobs

__all__ = [
    "CmdlineError",
    "CmdlineFileError",
    "Entry",
    "LauncherArgs",
    "ParsedCommand",
    "TpFlagError",
    "UserKnobs",
    "detect_launcher",
    "find_entry",
    "named_tp",
    "options_file",
    "parse",
    "read",
    "read_knobs",
    "tp_disagreement",
    "tp_from_command",
    "tp_size",
    "user_knobs",
    "user_knobs_of",
]

# Console scripts (basename of a token) and the subcommand that must follow, if any.
_SCRIPTS = {("vllm", "serve"): "vllm", ("sglang", "serve"): "sglang", ("trtllm-serve", None): "trtllm"}
# ``python -m MODULE``: the module's top package names the launcher.
_PACKAGES = {"sglang": "sglang", "vllm": "vllm", "tensorrt_llm": "trtllm"}
#: The canonical TP option of each launcher (its parser's first long spelling of the TP size).
TP_OPTION = {"sglang": "--tp-size", "vllm": "--tensor-parallel-size", "trtllm": "--tp_size"}
#: The key in TensorRT-LLM's options file (``forms.TRTLLM_OPTIONS``) that overrides the TP flag: ``llm_args |
#: llm_args_dict`` (tensorrt_llm/llmapi/llm_args.py ``update_llm_args_with_extra_dict``).
TRTLLM_TP_KEY = "tensor_parallel_size"


class Entry(NamedTuple):
    """Where a launcher starts in a command line: ``args`` are what its parser is handed (for
    ``vllm serve``, ``serve`` first: vLLM rewrites the line with it in view); ``at`` is the index in
    the command line of ``args[0]``."""

    launcher: str
    form: str  # "serve": a console script's subcommand; "module": ``python -m`` or bare arguments
    args: tuple[str, ...]
    at: int


def find_entry(argv: Sequence[str]) -> Entry | None:
    """The first launcher entry point in ``argv`` (wrappers in front are skipped), or None."""
    for index, token in enumerate(argv):
        name = os.path.basename(token)
        following = argv[index + 1] if index + 1 < len(argv) else None
        for (script, subcommand), launcher in _SCRIPTS.items():
            if name == script and (subcommand is None or following == subcommand):
                start = index + 1 if subcommand is None or launcher == "vllm" else index + 2
                return Entry(launcher, "serve", tuple(argv[start:]), start)
        if token == "-m" and following:
            by_package = _PACKAGES.get(following.split(".", 1)[0])
            if by_package and "." in following:
                return Entry(by_package, "module", tuple(argv[index + 2 :]), index + 2)
    return None


@dataclass(frozen=True)
class LauncherArgs:
    """The options a command line sets, as the launcher reads them.

    ``options``: canonical long option -> its values in order (None: a switch, or an optional value
    not given; an option taking several values contributes each). A switch's two polarities are two
    keys (``--disable-custom-all-reduce`` / ``--no-disable-custom-all-reduce``); only the one given
    last is kept, as the parser keeps only the last.
    """

    options: Mapping[str, tuple[str | None, ...]]
    dests: Mapping[str, str] = field(default_factory=dict)  # canonical option -> parser destination
    #: Tokens the pinned parser does not recognize: it refuses the line with them ("unrecognized
    #: arguments"); another release may know them. (TensorRT-LLM: not checked, always empty.)
    unrecognized: tuple[str, ...] = ()
    #: The positionals the line fills, by destination (vLLM's ``model_tag``: ``vllm serve M``'s model).
    positionals: Mapping[str, Any] = field(default_factory=dict)

    def last(self, option: str) -> str | None:
        """The value the launcher keeps for ``option`` (the last one given); KeyError if not given."""
        return self.options[option][-1]


class ParsedCommand(NamedTuple):
    """A command line as ``read`` parsed it: the line itself, the options it sets, and where they are,
    for a merge to edit (``merge.merge_onto``) without reading it again."""

    argv: tuple[str, ...]
    args: LauncherArgs
    entry: Entry
    dotted: tuple[str, ...]  # vLLM: the ``-x`` of each dotted group, in the order vLLM appends them
    clicks: tuple[forms.ClickOption, ...]  # TensorRT-LLM: the options with where their values are


def parse(launcher: str, argv: Sequence[str], release: str | None = None) -> LauncherArgs:
    """The options ``argv`` sets for ``launcher``, read as ``release``'s own parser reads them (None:
    the newest modelled release's).

    ``CmdlineError`` (one line) where that parser would refuse the line: an ambiguous abbreviation, a
    missing value, a config file it cannot read (``CmdlineFileError``).
    """
    return read(launcher, argv, release).args


def read(launcher: str, argv: Sequence[str], release: str | None = None) -> ParsedCommand:
    """``parse`` with the line itself and what a merge (``merge.merge_onto``) needs to edit it in place."""
    entry = find_entry(argv)
    if entry is None or entry.launcher != launcher:
        entry = Entry(launcher, "module", tuple(argv), 0)
    try:
        if launcher == "trtllm":
            clicks = tuple(forms.trtllm_options(entry.args))
            options: dict[str, list[str | None]] = {}
            for option in clicks:
                options.setdefault(option.name, []).append(option.value)
            frozen = {name: tuple(values) for name, values in options.items()}
            return ParsedCommand(tuple(argv), LauncherArgs(frozen), entry, (), clicks)
        replica = table(launcher, release)
        if launcher == "vllm":
            tokens, dotted = forms.vllm_args(entry.form, entry.args, replica)
        else:
            tokens, dotted = forms.sglang_args(entry.form, entry.args, replica), ()
        reading = replica.read(tokens)
    except CmdlineError:
        raise
    except (ValueError, RecursionError) as error:  # e.g. a dotted value with 5000 digits
        raise CmdlineError(f"{launcher} would not read this command line: {error}") from None
    return ParsedCommand(tuple(argv), _collected(reading), entry, dotted, ())


def _collected(reading: Reading) -> LauncherArgs:
    options: dict[str, list[str | None]] = {}
    dests: dict[str, str] = {}
    for action, spelled, values in reading.seen:
        for other in {action.canonical, action.spelled(action.negative[0])} if action.negative else ():
            if other != spelled:
                options.pop(other, None)  # the switch's other polarity, given earlier: overridden
                dests.pop(other, None)
        options.setdefault(spelled, []).extend(values or (None,))
        dests[spelled] = action.dest
    return LauncherArgs(
        {name: tuple(values) for name, values in options.items()},
        dests,
        tuple(reading.unrecognized),
        reading.positionals,
    )


def tp_size(launcher: str, argv: Sequence[str], release: str | None = None) -> int | None:
    """The TP size the launcher reads from ``argv`` (None: it names none, the launcher's default 1).

    Read as the launcher's ``int`` reads it: Python's ``int()`` takes ``+4``, `` 4``, ``4_0`` and
    other scripts' digits (``٤``); what it refuses, or a size below 1, is ``CmdlineError``.
    """
    return named_tp(read(launcher, argv, release))


def named_tp(parsed: ParsedCommand) -> int | None:
    """``tp_size`` of a line already read."""
    launcher = parsed.entry.launcher
    name = TP_OPTION[launcher]
    text = parsed.args.options.get(name, (None,))[-1]
    value: object = text
    path = _trtllm_options_path(parsed) if launcher == "trtllm" else None
    if path is not None:
        given = options_file(path)
        if TRTLLM_TP_KEY in given:
            name, value = f"{path}: {TRTLLM_TP_KEY}", given[TRTLLM_TP_KEY]
    if value is None:
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(value)
        size = int(value)
    except ValueError:
        raise CmdlineError(f"{name} {value!r}: not an integer the launcher reads") from None
    if size < 1:
        raise CmdlineError(f"{name} {value!r} is not a TP size")
    return size


def tp_disagreement(tp: int, named: int | None) -> str | None:
    """The one TP rule of ``recommend``, ``exec`` and ``ab``: the TP size that runs is the launcher's own
    (``named``, read by ``tp_size``; the plugins read it from the launcher's parsed arguments), and a
    ``--tp`` that disagrees with it means the profile is not followed. The reason, or None where they
    agree or the command names no size (the launcher's default then; ``--tp`` is all there is)."""
    if named is None or named == tp:
        return None
    return f"--tp {tp} disagrees with the command's TP size {named}: the profile's TP {tp} decisions do not apply"


class UserKnobs(NamedTuple):
    """The user's knobs (``knobs``: what the route model reads) and the same knobs as a line already
    read (``line``): every candidate of a plan is merged onto ``line``, which is read once."""

    knobs: Knobs
    line: ParsedCommand


def user_knobs(
    launcher: str, argv: Sequence[str], environ: Mapping[str, str], release: str | None = None
) -> Knobs:
    """``user_knobs_of`` the line ``argv`` read for ``launcher``, as ``release``'s parser reads it."""
    return user_knobs_of(read(launcher, argv, release), environ, release).knobs


def user_knobs_of(parsed: ParsedCommand, environ: Mapping[str, str], release: str | None = None) -> UserKnobs:
    """What the user set that ``release``'s route model reads (None: the newest modelled), canonical:
    ``args`` the all-reduce options of that release's manifest the line sets (each once, with the value the launcher keeps; vLLM's
    compilation config as the one JSON object it ends up with), ``env`` the manifest's env variables
    set in ``environ``, ``config`` (TensorRT-LLM) the manifest's config keys the user's
    ``--extra_llm_api_options`` file sets, read through the guarded reader.

    The canonical args' own line is built from ``parsed``, not read again: each option once, under
    the name and destination ``parsed`` gives it, with the value kept (``read_knobs`` would read the
    same from ``args``; the command-line corpus test holds them equal)."""
    launcher = parsed.entry.launcher
    manifest = knobs.manifest(launcher, release)
    args: list[str] = []
    kept: dict[str, tuple[str | None, ...]] = {}
    if launcher != "trtllm":
        replica = table(launcher, release)
        relevant = {action.dest for action in replica.actions if set(manifest["flags"]) & _spellings(action)}
        for name, values in parsed.args.options.items():
            if parsed.args.dests[name] not in relevant:
                continue
            value = values[-1]
            if launcher == "vllm" and parsed.args.dests[name] == "compilation_config" and value is not None:
                value = json.dumps(forms.vllm_json(value), separators=(",", ":"))
            args += [name] if value is None else [name, value]
            kept[name] = (value,)
    env = {name: environ[name] for name in manifest["env"] if name in environ}
    config: dict[str, object] = {}
    path = _trtllm_options_path(parsed) if launcher == "trtllm" else None
    if path is not None:
        given = options_file(path)
        config = {key: given[key] for key in manifest["config_keys"] if key in given}
    line = ParsedCommand(
        tuple(args),
        LauncherArgs(kept, {name: parsed.args.dests[name] for name in kept}),
        Entry(launcher, "module", tuple(args), 0),
        (),
        (),
    )
    return UserKnobs(Knobs(tuple(args), env, config), line)


def read_knobs(launcher: str, given: Knobs, release: str | None = None) -> UserKnobs:
    """``given`` (canonical knobs, as ``user_knobs`` writes them) with their line, read once: for a
    caller that holds knobs rather than a user's command line."""
    return UserKnobs(given, read(launcher, given.args, release))


def _spellings(action: Any) -> set[str]:
    return {*action.options, *action.negative}


def _trtllm_options_path(parsed: ParsedCommand) -> str | None:
    return parsed.args.options.get(forms.TRTLLM_OPTIONS, (None,))[-1]


def trtllm_options_at(parsed: ParsedCommand) -> tuple[int, bool, str] | None:
    """Where the options file TensorRT-LLM reads is named in the line ``parsed``: (index in its argv of
    the token holding the path, whether it is ``--flag=path``, the path); None when the line names none."""
    given = [option for option in parsed.clicks if option.name == forms.TRTLLM_OPTIONS]
    last = given[-1] if given else None
    if last is None or last.value is None:
        return None
    return parsed.entry.at + last.at, last.attached, last.value


def options_file(path: str) -> dict[str, Any]:
    """The user's TensorRT-LLM options file, read through the guarded reader: a YAML mapping."""
    options = forms.read_config(path, "a TensorRT-LLM options file")
    if not isinstance(options, dict):
        raise CmdlineFileError(path, "not a YAML mapping of LLM-API options")
    return options


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
