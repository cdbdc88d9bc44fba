"""Fold a plan's args and env into a user's command line and environment; the user's choice wins.

Understands ``--flag value`` and ``--flag=value``, switch flags, flags that set the same knob under
another name (SGLang's fusion backend vs its enforce-disable switch, vLLM's ``--no-...`` forms), and
vLLM's compilation config given as ``--compilation-config JSON`` / ``-cc JSON`` / ``-cc.pass_config.k=v``,
which is merged key by key rather than replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topo_gate.launchers import knobs

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
    "vllm": (frozenset({"--disable-custom-all-reduce", "--no-disable-custom-all-reduce"}),),
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
        takes_value = flags.get(flag, {}).get("takes_value", False)
        items.append((flag, args[index + 1] if takes_value else None))
        index += 2 if takes_value else 1
    return items


def _user_flags(argv: Sequence[str]) -> dict[str, str | None]:
    """Flags present in the user's command (value when given as ``--flag=value`` or followed by a value)."""
    found: dict[str, str | None] = {}
    for index, token in enumerate(argv):
        if not token.startswith("-"):
            continue
        name, eq, value = token.partition("=")
        following = argv[index + 1] if index + 1 < len(argv) else None
        found[name] = (
            value if eq else (following if following is not None and not following.startswith("-") else None)
        )
    return found


def merge(
    argv: Sequence[str],
    env: Mapping[str, str],
    plan_args: Sequence[str],
    plan_env: Mapping[str, str],
    launcher: str,
) -> Merged:
    """``argv`` with ``plan_args`` appended and ``env`` with ``plan_env`` set, where the user has not already
    decided; every knob the user set differently is kept and reported in ``warnings``."""
    out, added, warnings = list(argv), [], []
    user = _user_flags(argv)
    for flag, value in split_flags(plan_args, launcher):
        if flag in _COMPILATION:
            added_cc, cc_warnings = _merge_compilation(out, json.loads(value or "{}"))
            added += added_cc
            warnings += cc_warnings
            continue
        group = next((g for g in _SAME_KNOB[launcher] if flag in g), frozenset({flag}))
        overriding = sorted(f for f in group if f in user)
        if overriding:
            same = overriding == [flag] and (value is None or user[flag] == value)
            if not same:
                warnings.append(
                    f"you gave {' '.join(overriding)}; the profile implies {flag}"
                    f"{' ' + value if value else ''}: yours wins"
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


def _merge_compilation(argv: list[str], ours: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Merge our pass_config keys into the user's vLLM compilation config, in place in ``argv``.

    Raises ``ValueError`` when the user's ``--compilation-config`` is not valid JSON.
    """
    user_keys: dict[str, object] = {}
    # (token index, text before the JSON, parsed config)
    user_json: tuple[int, str, dict[str, Any]] | None = None
    for index, token in enumerate(argv):
        name, eq, value = token.partition("=")
        following = argv[index + 1] if index + 1 < len(argv) else None
        if name in _COMPILATION:
            at, head, text = (index, name + "=", value) if eq else (index + 1, "", following or "")
            if text.lstrip().startswith("{"):
                user_json = (at, head, json.loads(text))
                user_keys.update(user_json[2].get("pass_config", {}))
        for prefix in ("-cc.pass_config.", "--compilation-config.pass_config."):
            if name.startswith(prefix):
                user_keys[name[len(prefix) :]] = value if eq else following
    wanted = ours.get("pass_config", {})
    warnings = [
        f"you set pass_config.{k}={user_keys[k]}; the profile implies {json.dumps(v)}: yours wins"
        for k, v in wanted.items()
        if k in user_keys and str(user_keys[k]).lower() != json.dumps(v)
    ]
    missing = {k: v for k, v in wanted.items() if k not in user_keys}
    if not missing:
        return [], warnings
    if user_json is not None:
        at, head, config = user_json
        config.setdefault("pass_config", {}).update(missing)
        argv[at] = head + json.dumps(config, separators=(",", ":"))
        return [f"compilation-config pass_config {json.dumps(missing)}"], warnings
    piece = ["--compilation-config", json.dumps({"pass_config": missing}, separators=(",", ":"))]
    argv += piece
    return [" ".join(piece)], warnings
