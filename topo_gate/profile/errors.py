"""Why a profile cannot be used. ``str(error)`` is one line: ``<field path>: <problem>``.

The strict loader (``load_profile``) raises these; the launcher reader (``gate``) turns every one of
them into an NCCL decision whose ``reason`` is that line; the CLI prints it and maps the class to an
exit code (``ProfileUnreadable`` -> 3, the others -> 1).
"""

from __future__ import annotations


class ProfileError(Exception):
    """Base class: the profile cannot be used. ``field`` is where (``""`` for the whole file)."""

    def __init__(self, problem: str, field: str = "") -> None:
        self.problem = " ".join(problem.split())  # one line, whatever the parser said
        self.field = field
        super().__init__(f"{field}: {self.problem}" if field else self.problem)

    def within(self, prefix: str) -> ProfileError:
        """The same error, located one level further out: ``rules[2]`` + ``max_bytes``."""
        if not self.field:
            field = prefix
        elif self.field.startswith("["):
            field = prefix + self.field
        else:
            field = f"{prefix}.{self.field}"
        return type(self)(self.problem, field)


class ProfileUnreadable(ProfileError):
    """The bytes are not a YAML document: missing, a directory, too big, not UTF-8, bad syntax."""


class ProfileInvalid(ProfileError):
    """A YAML document, but not a valid schema-v1 profile; ``field`` names the offending field."""


class ProfileSchemaTooNew(ProfileError):
    """The profile declares a schema major version this topo-gate does not read."""


class ProfileDigestMismatch(ProfileError):
    """The content does not hash to the recorded digest: edited by hand, or corrupted."""
