"""``topo-gate validate PROFILE...``: is each a well-formed, untampered v1 profile (or a directory, a usable profile set)?"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import click

from topo_gate._terminal import shown
from topo_gate.cli._errors import CliError, ExitCode, error_line, fail
from topo_gate.cli._profile import load_or_fail
from topo_gate.profile import ProfileError, dump_profile, load_profile
from topo_gate.profile.io import RESEAL_HINT
from topo_gate.profile.set_check import SetReport, check_set


@click.command(
    "validate",
    epilog="""\b
Examples:
  topo-gate validate node.yaml
  OK node.yaml: schema v1, 2 decisions, fingerprint sha256:39a39c834186...
  topo-gate validate --reseal node.yaml     # after a deliberate hand edit
  topo-gate validate profiles/*.yaml   # several: each is checked and reported
  topo-gate validate profiles/         # a set: one member per fingerprint

Exit codes: 0 valid; 1 invalid (including what no measurement can say: a fast path slower than
NCCL, a CI not containing its speed-up, a CPU backend in a GPU profile), digest mismatch or
schema too new; 3 unreadable (missing, over 16 MiB, not UTF-8, not YAML); 8
--reseal could not write. Errors are one line naming the field:

\b
  topo-gate: error: node.yaml: decisions[0].rules[1].max_bytes:
  must be > 458752 (rules must be ordered)

A directory is checked as a profile set (what `exec --profile DIR` reads): every *.yaml/*.yml
member valid, and no two members for one fingerprint (a duplicate or a conflict makes the reader
answer NCCL for that node class): exit 1; 3 when it cannot be listed. With several paths, the exit
code is the highest of theirs.""",
)
# Existence is checked by the loader, so a missing file exits 3, not 2.
@click.argument("profiles", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="PROFILE...")
@click.option(
    "--reseal",
    is_flag=True,
    help="After a deliberate hand edit: check everything but the digest, then rewrite the file with "
    "a fresh digest (comments and fields unknown to this version are dropped).",
)
@click.option("--json", "as_json", is_flag=True, help="For a profile set: the members and problems as JSON.")
def command(profiles: tuple[Path, ...], reseal: bool, as_json: bool) -> None:
    """Check that each PROFILE is a valid, untampered gating profile (the launcher reader's exact checks),
    or that a directory PROFILE is a usable profile set."""
    if len(profiles) == 1:
        _validate(profiles[0], reseal, as_json)  # its error is the command's: one line, its exit code
        return
    worst = ExitCode.OK
    for profile in profiles:
        try:
            _validate(profile, reseal, as_json)
        except CliError as error:
            click.echo(error_line(error.message), err=True)
            worst = max(worst, error.code)
    if worst != ExitCode.OK:
        raise click.exceptions.Exit(int(worst))


def _validate(profile: Path, reseal: bool, as_json: bool) -> None:
    if profile.is_dir():
        _validate_set(profile, as_json, reseal)
        return
    if reseal:
        _reseal(profile)
    loaded = load_or_fail(profile)
    version = loaded.schema.rsplit("/", 1)[-1]
    fingerprint = loaded.node.fingerprint[:19]
    click.echo(
        f"OK {shown(profile)}: schema {version}, {len(loaded.decisions)} decisions, fingerprint {fingerprint}..."
    )


def _reseal(path: Path) -> None:
    """Rewrite a hand-edited profile with a fresh digest: the file itself, with its own permissions.

    Through a symbolic link (``current.yaml`` -> ``node-v3.yaml``) that is the file the link names: a
    writer's output replaces a link (``_atomic``), which would leave the link a new file and the
    profile it named still unsealed."""
    try:
        profile = load_profile(path, verify_digest=False)
    except ProfileError:
        return  # invalid apart from the digest: the validation that follows says why
    try:
        load_profile(path)
    except ProfileError:  # the digest is missing or stale
        target = Path(os.path.realpath(path))
        dump_profile(profile, target, mode=stat.S_IMODE(os.stat(target).st_mode) & _PERMISSIONS)
        click.echo(
            f"resealed {shown(path)}" + ("" if target == path.absolute() else f" ({shown(target)})"), err=True
        )


#: The permission bits a resealed file keeps (read, write, execute for owner, group, others): never
#: setuid, setgid or sticky, which no profile needs.
_PERMISSIONS = 0o777


def _validate_set(directory: Path, as_json: bool, reseal: bool = False) -> None:
    try:
        report = check_set(directory)
    except OSError as error:
        raise fail(ExitCode.UNREADABLE, f"{directory}: cannot list: {error.strerror or error}") from None
    if as_json:
        click.echo(json.dumps(report.to_dict(), allow_nan=False, indent=1))
    else:
        for member in report.members:
            state = (
                f"{member.fingerprint[:19]}..., {member.decisions} decisions"
                if member.fingerprint
                else "INVALID"
            )
            click.echo(f"  {shown(member.name)}: {state}")
    if not report.ok:
        problems = "; ".join(_member_problem(directory, problem, reseal) for problem in report.problems)
        raise fail(ExitCode.NOT_OK, f"{directory}: {problems}{_flat_set_hint(directory, report)}")
    if not as_json:
        click.echo(f"OK {shown(directory)}: profile set of {len(report.members)}, one per fingerprint")


def _member_problem(directory: Path, problem: str, reseal: bool) -> str:
    """A set's problem as said to the user: under ``--reseal DIR`` a member's advice to reseal names
    the member's file, since ``--reseal`` reseals the files it is given and never a set's members."""
    name, colon, _ = problem.partition(": invalid: ")
    if not reseal or not colon or RESEAL_HINT not in problem:
        return problem
    member = shown(str(directory / name))
    return problem.replace(
        RESEAL_HINT, f"--reseal reseals files, not a set's members: `topo-gate validate --reseal {member}`"
    )


#: Sub-folders named in the hint, at most.
MAX_NESTED_SHOWN = 3


def _flat_set_hint(directory: Path, report: SetReport) -> str:
    """A set is the folder's own *.yaml / *.yml files (as the reader lists them): where it has none but
    its sub-folders do, say so and how to check those instead."""
    if report.members:
        return ""
    try:
        nested = sorted(
            {path.parent for pattern in ("*/*.yaml", "*/*.yml") for path in directory.glob(pattern)}
        )
    except OSError:
        return ""
    if not nested:
        return ""
    shown_folders = ", ".join(shown(str(folder)) + "/" for folder in nested[:MAX_NESTED_SHOWN])
    more = f" and {len(nested) - MAX_NESTED_SHOWN} more" if len(nested) > MAX_NESTED_SHOWN else ""
    return (
        f" (a set is flat: only the folder's own files are members; profiles lie in {shown_folders}{more}: "
        f"`topo-gate validate {shown(str(directory / '*' / '*.yaml'))}` checks each)"
    )
