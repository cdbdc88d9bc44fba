"""The conformance run: each installed launcher (or library) release's own dispatch code, executed on
CPU with the device state stood in, against topo-gate's route model at every point of a grid.

``python scripts/conformance.py [ADAPTER ...]`` runs the adapters named (``vllm``, ``flashinfer``,
``sglang``: modules ``scripts/conformance_<name>.py``, the protocol in ``conformance_points.py``),
by default every one whose module exists. Each checks the release installed in this interpreter
against the route model of that release (or, for a release with no route model yet, the newest
one, and says so). A point is one setting (node, served model, release, knobs) and one message size;
at each point and pattern the route model and the release must name the same kernel.

The grid (``grid``) is a covering design, pairwise or better: every knob set the launcher's planner
may emit (``topo_gate.launchers.<launcher>.candidates`` from every bundled profile, at every TP size)
is checked once per group class (or per architecture class, where there are more), capability and
TP size turning, so that each knob set meets every capability, TP size, group class, architecture
class (and unknown), hidden size and element size, and capability x TP size x group class is
crossed fully across the knob sets. Each user setting the route model reads (the adapter's
``user_settings(release)``) is crossed fully with capability x TP size, the group class turning.
Every pair of architecture, hidden size and element size comes up. The sizes (``sizes``): every rung
of the probe's token ladder, and the receivable sizes on each side of every size limit in the route
model's routes and the release's own tables: the largest whole number of the served model's rows
below the limit and the smallest at or above it (a launcher only ever reduces whole rows, so a byte
in between is no message it can receive).

Each adapter runs in an interpreter of its own (the adapters stand in modules of the launchers'
packages, and two of them would meet in ``sys.modules``): naming several runs each in a subprocess.

Prints one line per disagreement (the point and both answers), per release the point count and its
wall time, and closes with ``N passed, N failed`` counted per point. A disagreement listed in
``KNOWN`` (with its cause; docs/launchers.md, Conformance, mirrors the list) passes as known; any
other fails and the run exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from conformance_points import GROUP_CLASSES, Setting  # noqa: E402

from topo_gate.launchers import knobs  # noqa: E402
from topo_gate.launchers.routes import ROUTERS, architecture_variants, flashinfer, route  # noqa: E402
from topo_gate.launchers.routes.base import Knobs, Route, RouteError, at, marker  # noqa: E402
from topo_gate.probe.options import DEFAULT_MAX_TOKENS  # noqa: E402
from topo_gate.trials.plan import token_ladder  # noqa: E402

ADAPTERS = ("vllm", "flashinfer", "sglang")
CAPABILITIES = ((8, 0), (8, 9), (9, 0), (10, 0), (12, 0))
TP_SIZES = (2, 4, 8)
#: Served hidden sizes: a power of two (rows of 8 KiB in bf16: the power-of-two limits fall on row
#: boundaries), DeepSeek-V3's 7168 (they fall between rows), and 8 (16-byte rows in bf16: every limit
#: is probed within the 16-byte alignment vLLM's custom all-reduce requires anyway).
HIDDEN_SIZES = (4096, 7168, 8)
#: bf16, and fp32 (the dtypes the launchers' custom paths take; symm-mem takes bf16 only).
ITEMSIZES = (2, 4)
#: The profiles whose facts the planners' candidate knob sets are drawn from.
PROFILES = ROOT / "profiles" / "examples"

Answer = str | None


@dataclass(frozen=True)
class Known:
    """A disagreement whose cause is known and accepted: where it is, and why."""

    launcher: str
    releases: tuple[str, ...]
    pattern: str
    applies: Callable[[Setting, int, Answer, Answer], bool]
    cause: str


#: The accepted disagreements (docs/launchers.md, Conformance, lists them with their causes).
KNOWN: tuple[Known, ...] = ()


@dataclass(frozen=True)
class Disagreement:
    setting: Setting
    size: int
    pattern: str
    model: Answer
    real: Answer

    def __str__(self) -> str:
        return (
            f"DISAGREE {setting_words(self.setting)} "
            f"{self.pattern} {self.size} B: route model {self.model or 'NCCL'}, release {self.real or 'NCCL'}"
        )


def setting_words(s: Setting) -> str:
    """A setting as one line names it: launcher, release, node, served model and knobs."""
    knobset = " ".join([*s.knobs.args, *(f"{k}={v}" for k, v in sorted(s.knobs.env.items()))]) or "(no knobs)"
    return (
        f"{s.launcher} {s.release} sm{s.capability[0]}{s.capability[1]} tp{s.tp} {s.group_class} "
        f"hidden {s.hidden} x{s.itemsize} {s.architecture or '(architecture unknown)'} [{knobset}]"
    )


@dataclass
class Tally:
    points: int = 0
    failed: int = 0
    known: int = 0
    seconds: float = 0.0
    #: Disagreeing points by (pattern, route model's answer, release's answer, element size).
    kinds: Counter[tuple[str, Answer, Answer, int]] = field(default_factory=Counter)


# --- the grid -----------------------------------------------------------------------------------


def planner_knob_sets(launcher: str) -> list[Knobs]:
    """Every knob set ``launcher``'s planner may emit from a bundled profile, at every grid TP size."""
    try:
        planner = importlib.import_module(f"topo_gate.launchers.{launcher}")
    except ModuleNotFoundError:
        return []
    candidates = getattr(planner, "candidates", None)
    if candidates is None:
        return []
    from topo_gate.launchers.plan.flow import read_profile
    from topo_gate.launchers.plan.request import PlanRequest
    from topo_gate.profile import load_profile

    found: dict[tuple[Any, ...], Knobs] = {}
    for path in sorted(PROFILES.glob("*.yaml")):
        profile = load_profile(path)
        for profile_tp in sorted({decision.tp for decision in profile.decisions}):
            request = PlanRequest(path, tp=profile_tp, fingerprint=profile.node.fingerprint, user_env={})
            facts = read_profile(request)
            if facts.fallback_reason:
                continue
            for tp in TP_SIZES:
                for candidate in candidates(facts, tp, Knobs()):
                    found.setdefault(_key(candidate.knobs), candidate.knobs)
    return list(found.values())


def _key(knobset: Knobs) -> tuple[Any, ...]:
    return (knobset.args, tuple(sorted(knobset.env.items())), tuple(sorted(knobset.config.items())))


def grid(launcher: str, release: str, adapter: ModuleType) -> Iterator[Setting]:
    """The settings of ``launcher``'s grid (see the module docstring for which axes are crossed how)."""
    if hasattr(adapter, "settings"):
        yield from adapter.settings(release)
        return
    skipped = unexecuted(adapter, release)
    variants = (a for a in architecture_variants(launcher, release) if a not in skipped)
    architectures = tuple(dict.fromkeys((*variants, None)))
    # Each planner knob set at one setting per group class (and per architecture class, where there
    # are more), capability and TP size turning with it: every knob set meets every capability, TP
    # size and group class, and capability x TP size x group class is crossed fully across them.
    planned = [Knobs(), *planner_knob_sets(launcher)]
    steps = max(len(GROUP_CLASSES), len(architectures))
    for index, knobset in enumerate(planned):
        for step in range(steps):
            capability = CAPABILITIES[(index + step) % len(CAPABILITIES)]
            tp = TP_SIZES[(index + step) % len(TP_SIZES)]
            group_class = GROUP_CLASSES[step % len(GROUP_CLASSES)]
            yield _setting(
                launcher, release, (capability, tp, group_class), knobset, index, step, architectures
            )
    # Each user setting at every capability and TP size, the group class turning.
    user = adapter.user_settings(release) if hasattr(adapter, "user_settings") else ()
    for index, knobset in enumerate(user, start=len(planned)):
        for step, (capability, tp) in enumerate(itertools.product(CAPABILITIES, TP_SIZES)):
            group_class = GROUP_CLASSES[step % len(GROUP_CLASSES)]
            yield _setting(
                launcher, release, (capability, tp, group_class), knobset, index, step, architectures
            )


def _setting(
    launcher: str,
    release: str,
    node: tuple[tuple[int, int], int, str],
    knobset: Knobs,
    index: int,
    step: int,
    architectures: Sequence[str | None],
) -> Setting:
    """The ``step``-th setting of the ``index``-th knob set: the steps of one knob set take every
    architecture, hidden size and element size, and every pair of their values comes up across the
    knob sets (the hidden size turns with the knob set, the element size every third step)."""
    capability, tp, group_class = node
    return Setting(
        launcher=launcher,
        release=release,
        capability=capability,
        tp=tp,
        group_class=group_class,
        hidden=HIDDEN_SIZES[(index + step) % len(HIDDEN_SIZES)],
        knobs=knobset,
        itemsize=ITEMSIZES[(index + step // len(HIDDEN_SIZES)) % len(ITEMSIZES)],
        architecture=architectures[step % len(architectures)],
    )


def sizes(setting: Setting, routes: Mapping[str, Route], limits: Iterable[int]) -> list[int]:
    """The ladder's rungs and the receivable sizes on each side of every limit, in bytes."""
    row = setting.hidden * setting.itemsize
    found = {tokens * row for tokens in token_ladder(DEFAULT_MAX_TOKENS)}
    bounds = {high for spans in routes.values() for high, _ in spans if high is not None} | set(limits)
    for bound in bounds:
        below, above = (bound - 1) // row * row, -(-bound // row) * row
        found |= {size for size in (below, above) if size >= row}
    return sorted(found)


# --- the comparison -----------------------------------------------------------------------------


def model_routes(setting: Setting) -> dict[str, Route]:
    """What topo-gate's route model says for ``setting`` (FlashInfer's choice is a library's)."""
    if setting.launcher == "flashinfer":
        return {
            pattern: flashinfer.heuristic_route(
                setting.tp, setting.itemsize, fused=fused, launcher="flashinfer", release=setting.release
            )
            for pattern, fused in (("allreduce", False), ("allreduce_rmsnorm", True))
        }
    return route(setting.launcher, setting.knobs, setting.context())


def unexecuted(adapter: ModuleType, release: str) -> dict[str, str]:
    """Architectures the adapter cannot execute at ``release``, with why (none by default)."""
    found: dict[str, str] = (
        adapter.unexecuted_architectures(release) if hasattr(adapter, "unexecuted_architectures") else {}
    )
    return found


def real_answers(adapter: ModuleType, setting: Setting, points: Sequence[int]) -> dict[str, list[Answer]]:
    """The release's answers; with the architecture unknown, per size the one every architecture
    class gets, ``model_dependent_<launcher>`` where they differ (as the route model names it). A class
    the adapter cannot execute takes the route model's answer there (the merge is what is checked)."""
    variants = (
        architecture_variants(setting.launcher, setting.release) if setting.launcher in ROUTERS else (None,)
    )
    if setting.architecture is not None or variants == (None,):
        answers: dict[str, list[Answer]] = adapter.real_routes(setting, points)
        return answers
    skipped = unexecuted(adapter, setting.release)
    each = [
        _model_answers(replace(setting, architecture=a), points)
        if a in skipped
        else adapter.real_routes(replace(setting, architecture=a), points)
        for a in variants
    ]
    dependent = marker("model_dependent", setting.launcher)
    return {
        pattern: [
            found.pop() if len(found := {v[pattern][i] for v in each}) == 1 else dependent
            for i in range(len(points))
        ]
        for pattern in each[0]
    }


def _model_answers(setting: Setting, points: Sequence[int]) -> dict[str, list[Answer]]:
    return {pattern: [at(spans, size) for size in points] for pattern, spans in model_routes(setting).items()}


def known(disagreement: Disagreement, accepted: Sequence[Known] = KNOWN) -> Known | None:
    s = disagreement.setting
    for entry in accepted:
        if (
            entry.launcher == s.launcher
            and s.release in entry.releases
            and entry.pattern == disagreement.pattern
            and entry.applies(s, disagreement.size, disagreement.model, disagreement.real)
        ):
            return entry
    return None


def check(adapter: ModuleType, setting: Setting) -> tuple[int, list[Disagreement], str | None]:
    """Points checked at ``setting``, the disagreements, and an error that stopped it (None: none)."""
    try:
        expected = model_routes(setting)
    except RouteError as refused:
        return _refused(adapter, setting, refused)
    limits = adapter.limits(setting) if hasattr(adapter, "limits") else ()
    points = sizes(setting, expected, limits)
    try:
        found = real_answers(adapter, setting, points)
    except Exception as error:  # the release's code failed at this setting: report it, never pass it
        return len(points), [], f"{type(error).__name__}: {error} at {setting_words(setting)}"
    disagreements = []
    for pattern, answers in found.items():
        for size, real in zip(points, answers, strict=True):
            model = at(expected[pattern], size)
            if model != real:
                disagreements.append(Disagreement(setting, size, pattern, model, real))
    return len(points) * len(found), disagreements, None


#: How an adapter says it does not execute a layout at all (``RouteError``): neither a pass nor a failure.
NOT_EXECUTED = "is not executed"


def _refused(
    adapter: ModuleType, setting: Setting, refused: RouteError
) -> tuple[int, list[Disagreement], str | None]:
    """A setting the route model refuses (the launcher would refuse the knobs there, or they are not
    modelled) agrees with the release only where the release refuses it too: one point, checked at
    the served model's one-token message. Where the release runs it, the model refuses what it takes."""
    try:
        real_answers(adapter, setting, [setting.hidden * setting.itemsize])
    except RouteError as release_refusal:
        if NOT_EXECUTED in str(release_refusal):
            return 0, [], None  # the adapter cannot ask the release: nothing is checked here
        return 1, [], None
    except Exception as error:  # the release's code failed at this setting: report it, never pass it
        return 1, [], f"{type(error).__name__}: {error} at {setting_words(setting)}"
    return 1, [], f"the route model refuses {setting_words(setting)} ({refused}), which the release runs"


def run(
    adapter: ModuleType,
    settings: Iterable[Setting],
    accepted: Sequence[Known] = KNOWN,
    out: Callable[[str], None] = print,
) -> Tally:
    """Check every setting; print every disagreement and error; count points."""
    tally = Tally()
    started = time.perf_counter()
    for setting in settings:
        count, disagreements, error = check(adapter, setting)
        tally.points += count
        if error is not None:
            out(f"ERROR {error}")
            tally.failed += max(count, 1)
            continue
        failed_sizes: set[int] = set()
        for disagreement in disagreements:
            if known(disagreement, accepted) is not None:
                tally.known += 1
                continue
            out(str(disagreement))
            tally.kinds[(disagreement.pattern, disagreement.model, disagreement.real, setting.itemsize)] += 1
            failed_sizes.add(disagreement.size * 2 + (disagreement.pattern != "allreduce"))
        tally.failed += len(failed_sizes)
    tally.seconds = time.perf_counter() - started
    return tally


def modelled_release(launcher: str, installed: str) -> tuple[str, str | None]:
    """The route model's release to check ``installed`` against, and a note when it is not its own."""
    releases = knobs.releases_of(launcher)
    if installed in releases:
        return installed, None
    return releases[-1], f"{launcher} {installed} has no route model: checked against {releases[-1]}'s"


def load(name: str) -> ModuleType:
    return importlib.import_module(f"conformance_{name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "adapters", nargs="*", help=f"adapters to run (default: every one present of {', '.join(ADAPTERS)})"
    )
    names = parser.parse_args(argv).adapters or [
        n for n in ADAPTERS if (SCRIPTS / f"conformance_{n}.py").exists()
    ]
    if len(names) > 1:
        return _each_in_its_own_interpreter(names)
    total = Tally()
    for name in names:
        adapter = load(name)
        installed = adapter.installed_release()
        release, note = modelled_release(adapter.LAUNCHER, installed)
        if note:
            print(f"NOTE {note}")
        for architecture, why in unexecuted(adapter, release).items():
            print(f"NOT EXECUTED {adapter.LAUNCHER} {installed} {architecture}: {why}")
        settings = list(grid(adapter.LAUNCHER, release, adapter))
        tally = run(adapter, settings)
        print(
            f"{adapter.LAUNCHER} {installed}: {tally.points} points at {len(settings)} settings "
            f"in {tally.seconds:.1f} s, {tally.failed} failed, {tally.known} known disagreements"
        )
        for (pattern, model, real, itemsize), count in tally.kinds.most_common():
            print(
                f"  {count} x {pattern} (element size {itemsize}): route model {model or 'NCCL'}, "
                f"release {real or 'NCCL'}"
            )
        total.points += tally.points
        total.failed += tally.failed
    print(f"{total.points - total.failed} passed, {total.failed} failed")
    return 1 if total.failed else 0


def _each_in_its_own_interpreter(names: Sequence[str]) -> int:
    """Run each adapter in a subprocess, pass its output through, and add up its closing line."""
    passed = failed = 0
    for name in names:
        result = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), name], capture_output=True, text=True, check=False
        )
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        closing = result.stdout.strip().splitlines()[-1:] or [""]
        counts = closing[0].replace(",", "").split()
        if len(counts) != 4 or counts[1] != "passed" or counts[3] != "failed":
            print(f"ERROR conformance_{name} stopped before its closing line (exit {result.returncode})")
            failed += 1
            continue
        passed, failed = passed + int(counts[0]), failed + int(counts[2])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
