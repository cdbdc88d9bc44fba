"""Which modelled release plans for the release a user runs (DESIGN.md, principle 8).

A plan is priced on a route model, and route models are per launcher release (and per FlashInfer
release where its one-/two-shot table matters): vLLM 0.34.0 routes Qwen3.5 and the breakable-graph
architectures differently from 0.33.0 with every knob unchanged. So wherever a plan is applied or
recorded, the installed release is read (``Installed``: from the distribution metadata, never by
importing the launcher) and ``resolve`` maps it onto a modelled one:

- a modelled release plans with its own route model;
- a release in ``EQUIVALENT`` (reviewed: every cited span and table unchanged) plans with the one it
  is equivalent to, and says so;
- any other release changes nothing (the plan is a fallback), with one line naming both releases and
  the way out: upgrade
  topo-gate, or name the release in ``TOPO_GATE_ALLOW_RELEASE`` to plan with the newest model at your
  own risk (a warning on every use, recorded wherever the plan is);
- a release that cannot be read (no metadata, a wrapper script) plans with the newest model and a
  warning, and is refused under ``strict``.

Versions compare on their public part: ``0.34.0+cu129`` is 0.34.0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from topo_gate._version import __version__
from topo_gate.launchers import knobs

ALLOW_ENV = "TOPO_GATE_ALLOW_RELEASE"
#: The distribution each launcher or library is installed as (``importlib.metadata`` names).
DISTRIBUTIONS: dict[str, str] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "trtllm": "tensorrt_llm",
    "flashinfer": "flashinfer-python",
}
#: How a launcher or library is named in a sentence.
NAMES: dict[str, str] = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "trtllm": "TensorRT-LLM",
    "flashinfer": "FlashInfer",
}
#: The launchers whose routes read FlashInfer's one-/two-shot table (``routes/flashinfer.py``).
CALLS_FLASHINFER = frozenset({"vllm", "sglang"})
#: Reviewed route-equivalent releases: an installed public version -> the modelled release whose
#: route model it runs. An entry needs evidence that every span the route model cites and every table
#: it reads is unchanged (``scripts/release_watch.py`` reports both); none is added by guess.
#: FlashInfer 0.7.2: the one-shot heuristic and the choice that applies it (``comm/trtllm_ar.py``
#: 707-721 and 844-862) are 0.7.2.post1's (711-725, 848-866) line for line.
EQUIVALENT: dict[str, dict[str, str]] = {"flashinfer": {"0.7.2": "0.7.2.post1"}}


def installed_here(names: tuple[str, ...] = tuple(DISTRIBUTIONS)) -> Installed:
    """The versions installed in this interpreter (a plugin runs inside the launcher's process), read
    from their distribution metadata: nothing is imported."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(DISTRIBUTIONS[name])
        except metadata.PackageNotFoundError:
            versions[name] = None
    return Installed(versions, "in this process")


def public_version(version: str) -> str:
    """The public part of a version (PEP 440): ``0.34.0+cu129`` -> ``0.34.0``."""
    return version.strip().partition("+")[0]


@dataclass(frozen=True)
class Installed:
    """What the user's launcher environment holds, as read from its distribution metadata.

    ``versions``: per key of ``DISTRIBUTIONS`` the version installed there, None where it is not
    installed. ``where`` says where they were read ("this process", "the interpreter of vllm on
    PATH, /usr/bin/python3", "--launcher-version"); ``problem``, when set, why they could not be read
    (then ``versions`` is empty and nothing is known).
    """

    versions: Mapping[str, str | None] = field(default_factory=dict)
    where: str = "in this process"
    problem: str | None = None


@dataclass(frozen=True)
class Resolution:
    """The releases a plan models for ``launcher``, or why none can.

    ``release`` / ``flashinfer``: the modelled releases the routes are computed for (None when the
    plan is refused: ``refusal`` says why, in one line). ``installed`` / ``installed_flashinfer``: as
    read (None: not read, or not installed). ``override``: the ``TOPO_GATE_ALLOW_RELEASE`` release
    planned at the user's risk. ``notes``: what a user should know even when the plan goes ahead.
    """

    launcher: str
    release: str | None
    flashinfer: str | None
    installed: str | None = None
    installed_flashinfer: str | None = None
    refusal: str | None = None
    override: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def modelled(self) -> str:
        """The release named as modelled: the one planned with, else the newest (for a refusal's
        header)."""
        return self.release or knobs.PINNED[self.launcher]

    def describe(self) -> str:
        """``vLLM 0.34.0`` or ``vLLM 0.34.0 (installed: 0.35.0)``: both wherever they differ."""
        text = f"{NAMES[self.launcher]} {self.modelled}"
        if self.installed is not None and public_version(self.installed) != self.modelled:
            text += f" (installed: {self.installed})"
        return text

    def to_dict(self) -> dict[str, str | None]:
        return {
            "modelled": self.release,
            "installed": self.installed,
            "flashinfer_modelled": self.flashinfer,
            "flashinfer_installed": self.installed_flashinfer,
            "override": self.override,
            "refusal": self.refusal,
        }


def modelled_words(name: str) -> str:
    """The modelled releases of ``name`` in words: "0.33.0 and 0.34.0"."""
    releases = knobs.releases_of(name)
    return " and ".join([", ".join(releases[:-1]), releases[-1]] if len(releases) > 1 else releases)


def _allowed(environ: Mapping[str, str]) -> set[str]:
    """The releases ``TOPO_GATE_ALLOW_RELEASE`` names (comma-separated; blanks ignored)."""
    return {public_version(item) for item in environ.get(ALLOW_ENV, "").split(",") if item.strip()}


@dataclass(frozen=True)
class _Match:
    """One installed version against the modelled releases of ``name``."""

    release: str | None  # the modelled release it plans with; None: refused
    override: str | None = None  # the public version TOPO_GATE_ALLOW_RELEASE let through
    refusal: str | None = None
    note: str | None = None


def _match(name: str, version: str, environ: Mapping[str, str]) -> _Match:
    public = public_version(version)
    newest = knobs.releases_of(name)[-1]
    if public in knobs.releases_of(name):
        return _Match(public)
    equivalent = EQUIVALENT.get(name, {}).get(public)
    if equivalent is not None:
        return _Match(
            equivalent,
            note=f"{NAMES[name]} {version} plans with the {equivalent} model (route-equivalent, reviewed)",
        )
    if public in _allowed(environ):
        return _Match(
            newest,
            override=public,
            note=f"warning: {ALLOW_ENV}: {NAMES[name]} {version} planned with the {newest} model at your own risk",
        )
    return _Match(
        None,
        refusal=(
            f"{NAMES[name]} {version} installed; topo-gate {__version__} models {NAMES[name]} {modelled_words(name)}: "
            f"upgrade topo-gate, or {ALLOW_ENV}={public} to plan with the {newest} model at your own risk"
        ),
    )


def _absent(name: str, installed: Installed, strict: bool) -> _Match:
    """A distribution that is not installed where the launcher runs, or could not be read."""
    why = (
        f"the installed {NAMES[name]} release could not be read ({installed.problem})"
        if installed.problem is not None
        else f"{NAMES[name]} is not installed {installed.where}"
    )
    if strict:
        return _Match(None, refusal=f"{why} (--strict)")
    newest = knobs.releases_of(name)[-1]
    return _Match(newest, note=f"warning: {why}: planned with the {NAMES[name]} {newest} model")


def resolve(
    launcher: str,
    installed: Installed | None,
    *,
    strict: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Resolution:
    """The modelled releases for what ``installed`` says ``launcher`` runs (module docstring).

    ``installed`` None: nothing was read (``recommend`` without ``--launcher-version``): the newest
    modelled releases (every surface names the release it plans for). FlashInfer is matched only for the launchers whose routes read
    its table (``CALLS_FLASHINFER``).
    """
    environ = os.environ if environ is None else environ
    if installed is None:
        return Resolution(launcher, knobs.PINNED[launcher], knobs.LIBRARIES["flashinfer"])
    version = installed.versions.get(launcher) if installed.problem is None else None
    matches = {
        launcher: _match(launcher, version, environ) if version else _absent(launcher, installed, strict)
    }
    fi_version = installed.versions.get("flashinfer") if installed.problem is None else None
    if launcher in CALLS_FLASHINFER and installed.problem is None:
        matches["flashinfer"] = (
            _match("flashinfer", fi_version, environ)
            if fi_version
            else _absent("flashinfer", installed, strict)
        )
    refusal = next((m.refusal for m in matches.values() if m.refusal is not None), None)
    overrides = [m.override for m in matches.values() if m.override is not None]
    fi = matches.get("flashinfer", _Match(knobs.LIBRARIES["flashinfer"]))
    return Resolution(
        launcher,
        None if refusal else matches[launcher].release,
        None if refusal else fi.release,
        version,
        fi_version,
        refusal=refusal,
        override=",".join(overrides) or None,
        notes=() if refusal else tuple(m.note for m in matches.values() if m.note is not None),
    )
