"""``topo-gate validate PROFILE``: is this a well-formed, untampered v1 profile?"""

from __future__ import annotations

from pathlib import Path

import click

from topo_gate._terminal import shown
from topo_gate.cli._profile import load_or_fail, profile_argument
from topo_gate.profile import ProfileError, dump_profile, load_profile


@click.command(
    "validate",
    epilog="""\b
Examples:
  topo-gate validate node.yaml
  OK node.yaml: schema v1, 2 decisions, fingerprint sha256:39a39c834186...
  topo-gate validate --reseal node.yaml     # after a deliberate hand edit

Exit codes: 0 valid; 1 invalid (including what no measurement can say: a fast path slower than
NCCL, a CI not containing its speed-up, a CPU backend in a GPU profile), digest mismatch or
schema too new; 3 unreadable (missing, a directory, over 16 MiB, not UTF-8, not YAML); 8
--reseal could not write. Errors are one line naming the field:

\b
  topo-gate: error: node.yaml: decisions[0].rules[1].max_bytes:
  must be > 458752 (rules must be ordered)""",
)
@profile_argument
@click.option(
    "--reseal",
    is_flag=True,
    help="After a deliberate hand edit: check everything but the digest, then rewrite the file with "
    "a fresh digest (comments and fields unknown to this version are dropped).",
)
def command(profile: Path, reseal: bool) -> None:
    """Check that PROFILE is a valid, untampered gating profile (the launcher reader's exact checks)."""
    if reseal:
        _reseal(profile)
    loaded = load_or_fail(profile)
    version = loaded.schema.rsplit("/", 1)[-1]
    fingerprint = loaded.node.fingerprint[:19]
    click.echo(
        f"OK {shown(profile)}: schema {version}, {len(loaded.decisions)} decisions, fingerprint {fingerprint}..."
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
        click.echo(f"resealed {shown(path)}", err=True)
