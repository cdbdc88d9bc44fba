"""Fold a plan's args and env into a user's command line and environment; the user's choice wins.

The user's command is read as the launcher reads it (``cmdline``): an abbreviated (``--disable-custom``),
underscored (``--disable_custom_all_reduce``), inverse (``--enable-custom-all-reduce``), ``=``-joined
or config-file option sets its knob exactly as the canonical spelling does, so the plan never adds a
flag for a knob the user already set. Flags that set the same knob under another name count too
(SGLang's fusion backend vs its enforce-disable switch).

vLLM's compilation config is one value that the *last* ``--compilation-config`` / ``-cc`` replaces
whole (and dotted ``-cc.pass_config.k=v`` groups come after every explicit one:
vllm/utils/argparse_utils.py:441-500). So the plan's ``pass_config`` keys are added to the config the
user ends up with, never as a second config that would replace it: into the user's last dotted group
when there is one, else as a config that is the user's own plus the plan's missing keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topo_gate.launchers import knobs
from topo_gate.launchers.command import parse as cmdline
from topo_gate.launchers.command.forms import vllm_json
from topo_gate.launchers.command.options import CmdlineError, table

# Flags that set the same knob: a user's flag from a group overrides any plan flag from the same group.
_SAME_KNOB: dict[str, tuple[frozenset[str], ...]] = {
    "sglang": (
        frozenset(
            {
                "--flashinfer-allreduce-fusion-backend",
                "--enforce-disable-flashinfer-allreduce-fusion",
                "--enable-flashinfer-allreduce-fusion",
            }
        ),
    ),
    "vllm": (),
    "trtllm": (),
}
_COMPILATION = ("--compilation-config", "-cc")


@dataclass(frozen=True)
class Merged:
    """The command to run and env to set, what was added, and warnings about what the user overrode."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    added: tuple[str, ...]
    warnings: tuple[str, ...]
    temp_dirs: tuple[str, ...] = ()  # written for the command; removed if it cannot be started


def split_flags(args: Sequence[str], launcher: str) -> list[tuple[str, str | None]]:
    """A plan's args as (flag, value-or-None), using the manifest to know which flags take a value."""
    flags = knobs.manifest(launcher)["flags"]
    items, index = [], 0
    while index < len(args):
        flag = args[index]
        # A value-taking flag last in the list has no value: (flag, None), for the caller to refuse.
        takes_value = flags.get(flag, {}).get("takes_value", False) and index + 1 < len(args)
        items.append((flag, args[index + 1] if takes_value else None))
        index += 2 if takes_value else 1
    return items


def merge_into_command(
    argv: Sequence[str],
    env: Mapping[str, str],
    plan_args: Sequence[str],
    plan_env: Mapping[str, str],
    launcher: str,
    release: str | None = None,
) -> Merged:
    """``argv`` with ``plan_args`` appended and ``env`` with ``plan_env`` set, where the user has not already
    decided; every knob the user set differently is kept and reported in ``warnings``. ``argv`` is read
    as ``release``'s parser reads it (None: the newest modelled release's).

    ``CmdlineError`` when the launcher would refuse ``argv`` itself (its knobs cannot be told apart).
    """
    return merge_onto(cmdline.read(launcher, argv, release), env, plan_args, plan_env, release)


def merge_onto(
    parsed: cmdline.ParsedCommand,
    env: Mapping[str, str],
    plan_args: Sequence[str],
    plan_env: Mapping[str, str],
    release: str | None = None,
) -> Merged:
    """``merge_into_command`` onto a line already read (as ``release``'s parser reads it): a plan's
    candidates are each merged onto the user's line with no second reading of it."""
    launcher = parsed.entry.launcher
    out, added, warnings = list(parsed.argv), [], []
    for flag, value in split_flags(plan_args, launcher):
        if launcher == "vllm" and flag in _COMPILATION:
            added_cc, cc_warnings = _merge_compilation(out, parsed, json.loads(value or "{}"), release)
            added += added_cc
            warnings += cc_warnings
            continue
        given = _user_settings(parsed.args, launcher, flag, release)
        if given:
            if given != [(flag, value)]:
                spelled = " ".join(name if last is None else f"{name} {last}" for name, last in given)
                warnings.append(
                    f"you gave {spelled}; the profile implies {flag}{' ' + value if value else ''}: yours wins"
                )
            continue
        piece = [flag] if value is None else [flag, value]
        out += piece
        added.append(" ".join(piece))
    merged_env = dict(env)
    for key, value in plan_env.items():
        if key in env:
            if env[key] != value:
                warnings.append(f"{key}={env[key]} is set; the profile implies {key}={value}: yours wins")
            continue
        merged_env[key] = value
        added.append(f"{key}={value}")
    return Merged(tuple(out), merged_env, tuple(added), tuple(warnings))


def _user_settings(
    user: cmdline.LauncherArgs, launcher: str, flag: str, release: str | None
) -> list[tuple[str, str | None]]:
    """(canonical option, value kept) of every option the user set for the knob ``flag`` sets."""
    group = next((g for g in _SAME_KNOB[launcher] if flag in g), frozenset({flag}))
    if launcher == "trtllm":
        return [(name, values[-1]) for name, values in user.options.items() if name in group]
    by_option = table(launcher, release).by_option
    dests = {by_option[name].dest for name in group if name in by_option}
    return [
        (name, values[-1])
        for name, values in user.options.items()
        if user.dests.get(name) in dests or name in group
    ]


def _merge_compilation(
    argv: list[str], parsed: cmdline.ParsedCommand, ours: dict[str, Any], release: str | None
) -> tuple[list[str], list[str]]:
    """Add the plan's ``pass_config`` keys the user's effective vLLM compilation config lacks (see the
    module docstring), appending to ``argv`` in place; warnings for the keys the user set otherwise."""
    wanted = ours.get("pass_config", {})
    given = parsed.args.options.get("--compilation-config")
    config = vllm_json(given[-1]) if given and given[-1] is not None else {}
    user_keys = config.get("pass_config", {}) if isinstance(config, dict) else None
    if not isinstance(user_keys, dict):
        raise CmdlineError("--compilation-config: not a JSON object with a pass_config object")
    warnings = [
        f"you set pass_config.{k}={json.dumps(user_keys[k])}; the profile implies {json.dumps(v)}: yours wins"
        for k, v in wanted.items()
        if k in user_keys and user_keys[k] != v
    ]
    missing = {k: v for k, v in wanted.items() if k not in user_keys}
    if not missing:
        return [], warnings
    options = table("vllm", release)
    compilation = options.by_option["--compilation-config"]
    groups = [key for key in parsed.dotted if options.resolve(key) is compilation]
    if groups:  # the user's last dotted group is the config vLLM ends up with: extend it
        pieces = [f"{groups[-1]}.pass_config.{k}={json.dumps(v)}" for k, v in missing.items()]
    else:
        merged = {**config, "pass_config": {**user_keys, **missing}}
        pieces = ["--compilation-config", json.dumps(merged, separators=(",", ":"))]
    argv += pieces
    what = "your compilation config plus" if given else "compilation-config"
    return [f"{what} pass_config {json.dumps(missing)}"], warnings
