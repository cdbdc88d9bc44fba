"""``topo-gate validate PROFILE...``: is each a well-formed, untampered v1 profile?"""

from __future__ import annotations

from pathlib import Path

import click

from topo_gate.cli._errors import CliError, ExitCode, error_line
from topo_gate.cli._profile import load_or_fail
from topo_gate.profile import ProfileError, dump_profile, load_profile


@click.command(
    "validate",
    epilog="""\b
Examples:
  topo-gate validate node.yaml
  OK node.yaml: schema v1, 2 decisions, fingerprint sha256:39a39c834186...
  topo-gate validate --reseal node.yaml     # after a deliberate hand edit
  topo-gate validate profiles/*.yaml        # several: each is checked and reported

\b
Exit codes: 0 valid; 1 invalid, digest mismatch or schema too new; 3 unreadable (missing, a
directory, over 16 MiB, not UTF-8, not YAML). With several profiles, the highest of theirs.
Errors are one line per profile, naming the field:
  topo-gate: error: node.yaml: decisions[0].rules[1].max_bytes: must be > 458752 (rules must be ordered)""",
)
# Existence is checked by the loader, so a missing file exits 3, not 2.
@click.argument("profiles", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="PROFILE...")
@click.option(
    "--reseal",
    is_flag=True,
    help="After a deliberate hand edit: check everything but the digest, then rewrite the file with "
    "a fresh digest (comments and fields unknown to this version are dropped).",
)
def command(profiles: tuple[Path, ...], reseal: bool) -> None:
    """Check that each PROFILE is a valid, untampered gating profile (the launcher reader's exact checks)."""
    if len(profiles) == 1:
        _validate(profiles[0], reseal)  # its error is the command's: one line, its exit code
        return
    worst = ExitCode.OK
    for profile in profiles:
        try:
            _validate(profile, reseal)
        except CliError as error:
            click.echo(error_line(error.message), err=True)
            worst = max(worst, error.code)
    if worst != ExitCode.OK:
        raise click.exceptions.Exit(int(worst))


def _validate(profile: Path, reseal: bool) -> None:
    if reseal:
        _reseal(profile)
    loaded = load_or_fail(profile)
    version = loaded.schema.rsplit("/", 1)[-1]
    fingerprint = loaded.node.fingerprint[:19]
    click.echo(
        f"OK {profile}: schema {version}, {len(loaded.decisions)} decisions, fingerprint {fingerprint}..."
    )


def _reseal(path: Path) -> None:
    try:
        profile = load_profile(path, verify_digest=False)
    except ProfileError:
        return  # invalid apart from the digest: the validation that follows says why
    try:
        load_profile(path)
    except ProfileError:  # the digest is missing or stale
        dump_profile(profile, path)
        click.echo(f"resealed {path}", err=True)
