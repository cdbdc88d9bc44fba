"""Run a launcher with a plan applied: the process is *replaced* (``os.execvpe``), so the launcher keeps
topo-gate's PID, signals and exit status, as a process manager (systemd, Kubernetes) expects."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NoReturn

import yaml

from topo_gate._atomic import write_atomic
from topo_gate._terminal import shown
from topo_gate.launchers.command.forms import TRTLLM_OPTIONS
from topo_gate.launchers.command.merge import Merged, merge_onto
from topo_gate.launchers.command.parse import ParsedCommand, options_file, read, trtllm_options_at
from topo_gate.launchers.plan.flow import LaunchPlan
from topo_gate.profile.reader import FINGERPRINT_ENV, SYNTHETIC_PROFILE


def read_for(plan: LaunchPlan, cmd: Sequence[str]) -> ParsedCommand:
    """``cmd`` read as the release ``plan`` models reads it (the newest modelled for a plan made
    without asking), for ``prepare``; ``CmdlineError`` where that parser would refuse it."""
    return read(plan.launcher, cmd, plan.release.release if plan.release is not None else None)


def prepare(
    line: ParsedCommand, plan: LaunchPlan, environ: Mapping[str, str], *, verified_fingerprint: str | None
) -> Merged:
    """The command and env to exec: the plan merged into the user's ``line`` (read once, where the
    command came in) and ``environ``; the user's settings win.

    A plan with a config file (TensorRT-LLM) writes it to a fresh temp file, merged into the user's own
    ``--extra_llm_api_options`` file if given. The verified fingerprint is exported so a ``gate()`` call
    inside the launcher sees a checked node. ``CmdlineError`` when the user's knobs cannot be told
    apart (a compilation config that is no JSON), ``CmdlineFileError`` when a file the line names
    cannot be read safely.
    """
    plan_env = dict(plan.env)
    if verified_fingerprint is not None:
        plan_env[FINGERPRINT_ENV] = verified_fingerprint
    base_env = {k: v for k, v in environ.items() if k != FINGERPRINT_ENV}
    release = plan.release.release if plan.release is not None else None
    merged = merge_onto(line, base_env, plan.args, plan_env, release)
    if plan.config:
        merged = _with_options_file(merged, plan.config, line)
    return merged


def _with_options_file(merged: Merged, config: Mapping[str, object], line: ParsedCommand) -> Merged:
    """The plan's config written as a fresh options file: the user's own (the one trtllm-serve reads,
    found as its click parser finds it in ``line``, read through the guarded reader) with the plan's
    keys it lacks. A merge only appends to the line, so where ``line`` names the file ``merged`` does."""
    argv, warnings = list(merged.argv), list(merged.warnings)
    where = trtllm_options_at(line)
    options: dict[str, object] = {} if where is None else dict(options_file(where[2]))
    for key, value in config.items():
        if key in options:
            if options[key] != value:
                warnings.append(
                    f"{where[2] if where else ''} sets {key}: {options[key]}; the profile implies {value}: yours wins"
                )
            continue
        options[key] = value
    folder = tempfile.mkdtemp(prefix="topo-gate-")
    path = str(write_atomic(os.path.join(folder, "extra_llm_api_options.yaml"), yaml.safe_dump(options)))
    if where is None:
        argv += [TRTLLM_OPTIONS, path]
    else:
        at, attached, _ = where
        argv[at] = f"{argv[at].partition('=')[0]}={path}" if attached else path
    added = (*merged.added, f"{TRTLLM_OPTIONS} {path} ({', '.join(f'{k}: {v}' for k, v in config.items())})")
    return replace(
        merged, argv=tuple(argv), added=added, warnings=tuple(warnings), temp_dirs=(*merged.temp_dirs, folder)
    )


def exec_merged(merged: Merged, plan: LaunchPlan) -> NoReturn:
    """Say on stderr what was added and why, then replace this process with the launcher.

    If the launcher cannot be started (``OSError``), the files written for it are removed first.
    """
    say = sys.stderr.write
    header = f"topo-gate: {plan.release_name()}"
    say(f"{header}: {shown('FALLBACK ' + plan.reason if plan.fallback else plan.reason)}\n")
    if SYNTHETIC_PROFILE in plan.notes:
        say(f"topo-gate: warning: {SYNTHETIC_PROFILE}\n")
    for item in merged.added:
        say(f"topo-gate: + {shown(item)}\n")
    for warning in merged.warnings:
        say(f"topo-gate: warning: {shown(warning)}\n")
    sys.stderr.flush()
    try:
        os.execvpe(merged.argv[0], list(merged.argv), dict(merged.env))
    except OSError:
        for folder in merged.temp_dirs:
            shutil.rmtree(folder, ignore_errors=True)
        raise
