"""Loading a profile for a CLI command: ``ProfileError`` -> one line and a documented exit code."""

from __future__ import annotations

from pathlib import Path

import click

from topo_gate.cli._errors import ExitCode, fail
from topo_gate.profile import Profile, ProfileDigestMismatch, ProfileError, ProfileUnreadable, load_profile

#: The PROFILE argument. Existence is checked by the loader, so a missing file exits 3, not 2.
profile_argument = click.argument("profile", type=click.Path(path_type=Path), metavar="PROFILE")


def load_or_fail(path: Path) -> Profile:
    """The profile, valid and untampered; else exit 3 (unreadable) or 1 (invalid, digest, too new)."""
    try:
        return load_profile(path)
    except ProfileUnreadable as error:
        raise fail(ExitCode.UNREADABLE, f"{path}: {error}") from None
    except ProfileError as error:
        raise fail(ExitCode.NOT_OK, f"{path}: {error}") from None


def load_for_reading(path: Path, *, invalid_code: ExitCode) -> tuple[Profile, str | None]:
    """The profile even when its digest does not match (to show or compare a hand edit), with the
    digest problem to display; every other problem exits as in ``load_or_fail``."""
    try:
        return load_profile(path), None
    except ProfileDigestMismatch as mismatch:
        return load_profile(path, verify_digest=False), str(mismatch)
    except ProfileUnreadable as error:
        raise fail(ExitCode.UNREADABLE, f"{path}: {error}") from None
    except ProfileError as error:
        raise fail(invalid_code, f"{path}: {error}") from None
