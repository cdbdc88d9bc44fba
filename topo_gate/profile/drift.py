"""Software drift: the versions recorded in a profile vs this process's environment, read cheaply.

A launcher calls the reader at startup, so these readings import nothing: the driver version comes
from ``/proc/driver/nvidia/version`` and package versions from ``*.dist-info`` folder names on
``sys.path`` (what ``importlib.metadata`` reads too, without its ~15 ms import). Only what both
sides know is compared: an unknown reading is "not compared", never "drifted".
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping

_DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..." and, for the open modules,
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
_DRIVER_RE = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")
#: profile ``node.software`` key -> distributions that provide it, first installed one wins.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "flashinfer": ("flashinfer-python",),
    "nccl": ("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
}


def software_drift(recorded: Mapping[str, str | None]) -> list[str]:
    """One line per component whose recorded version differs from this environment's."""
    drifted = []
    for component in ("driver", *_DISTRIBUTIONS):
        then = recorded.get(component)
        if then is None:
            continue
        now = current_version(component)
        if now is not None and _public(now) != _public(then):
            drifted.append(f"{component} {then} -> {now}")
    return drifted


def _public(version: str) -> str:
    # The probe records what the trial workers loaded (torch.__version__ reads "2.11.0+cu130") while
    # this module reads dist-info folder names, which may omit the local label ("2.11.0") for the
    # very same build; a build label alone is not drift.
    return version.split("+", 1)[0]


@functools.cache
def current_version(component: str) -> str | None:
    """This environment's version of a ``node.software`` component, or None if it cannot tell."""
    if component == "driver":
        return _driver_version()
    names = _DISTRIBUTIONS.get(component, ())
    return next((v for v in map(_installed_version, names) if v is not None), None)


def _driver_version() -> str | None:
    try:
        with open(_DRIVER_VERSION_FILE, encoding="utf-8", errors="replace") as handle:
            return parse_driver_version(handle.read(4096))
    except OSError:
        return None  # no NVIDIA kernel module here (or not Linux): unknown, not drifted


def parse_driver_version(text: str) -> str | None:
    """The driver version in the text of ``/proc/driver/nvidia/version``."""
    match = _DRIVER_RE.search(text)
    return match.group(1) if match else None


def _normalize(name: str) -> str:
    # PEP 503 normalisation; dist-info folders spell the name with underscores.
    return re.sub(r"[-_.]+", "_", name).lower()


def _installed_version(distribution: str) -> str | None:
    return _installed_distributions().get(_normalize(distribution))


@functools.cache
def _installed_distributions() -> dict[str, str]:
    """Normalized name -> version of every ``<name>-<version>.dist-info`` on sys.path, read in one
    pass; the first on sys.path wins, as it does for imports and ``importlib.metadata``."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and "-" in name:
                project, _, version = name[: -len(".dist-info")].partition("-")
                found.setdefault(_normalize(project), version)
    return found
