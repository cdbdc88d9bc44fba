"""The release watch: what a new launcher or FlashInfer release changes under today's route models.

Run by hand at each new release of vLLM, SGLang or FlashInfer (not in CI: the wheels are hundreds of
MB). For each launcher, every release on the registry newer than the newest modelled one (or the
wheels given) is compared with that modelled release, the *baseline*:

1. **Knob manifest**: ``scripts/extract_knobs.py`` on the new wheel against the baseline's committed
   manifest (flags, env, config keys, tables, and the architecture sets a vLLM manifest carries),
   and the launcher's option table read from its own parser (vLLM, SGLang).
2. **No-compile architectures** (vLLM): the breakable-CUDA-graph set, whose members get no
   compilation pass and so no pass fusion.
3. **Model code** (vLLM): the architectures whose model calls the fused all-reduce + RMSNorm kernel
   itself, and those running an all-reduce kernel of their own (``extract_architectures``).
4. **Cited spans**: each span of the baseline's span file, relocated in the new release
   (scripts/span_relocation.py: unchanged, moved, changed with a diff, gone).
5. **Conformance**: ``scripts/conformance.py --launcher L --model-release BASELINE --json OUT`` run with
   the new release installed ``--no-deps`` first on ``PYTHONPATH``, in the parsers interpreter.

TensorRT-LLM and torch are cited at git commits, which CI cannot fetch: a full run (no ``--launcher``)
lists every span of their span files to re-read by hand, and ``--git-tree COMMIT=DIR`` (the source of a
newer commit, DIR/<path in the repository>) re-checks each recorded hash against it.

The report is Markdown (``--out``, else stdout). Exit status 1 when anything route-relevant changed
(a manifest or set diff, a changed or gone span, a conformance disagreement) or the conformance run
could not run or finish (its section says why); 0 only when all is unchanged and conformance agreed.
A moved span alone is not route-relevant: its text is the same, only its citation's lines move.

    python scripts/release_watch.py                                  # every launcher, from the registry
    python scripts/release_watch.py --launcher vllm --baseline 0.33.0 --from WHEELS --out report.md
    python scripts/release_watch.py --launcher flashinfer --git-tree SHA=TENSORRT_LLM_CHECKOUT
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
for _path in (str(SCRIPTS), str(REPO)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import cited_spans  # noqa: E402
import span_relocation  # noqa: E402

from topo_gate.launchers import knobs  # noqa: E402

LAUNCHERS = ("vllm", "sglang", "flashinfer")
#: The registry's name of each, and the wheel file's (a wheel spells ``-`` as ``_``).
DISTRIBUTIONS = {"vllm": "vllm", "sglang": "sglang", "flashinfer": "flashinfer-python"}
WHEEL_NAMES = {"vllm": "vllm", "sglang": "sglang", "flashinfer": "flashinfer_python"}
#: Manifest keys that say where it came from, not what the release does.
PROVENANCE = ("format", "launcher", "version", "source", "extracted_by", "all_options")
#: The manifest's architecture sets (vLLM), reported in sections of their own.
NO_COMPILE = "breakable_cudagraph"
MODEL_CODE = (
    "fused_norm_direct",
    "fused_norm_deferring",
    "fused_norm_mixed_sites",
    "model_private_allreduce",
)
#: FlashInfer's manifest is extracted from this one file of the wheel.
FLASHINFER_SOURCE = "flashinfer/comm/trtllm_ar.py"
#: A value shown in a diff line is cut to this many characters: a table row stays readable.
SHOWN_CHARS = 160
#: Lines of a failed command's output a report shows: the error and the frames that raised it.
OUTPUT_TAIL_LINES = 12
#: What builds the launcher's own server parser and prints its option table (the parser
#: ``extract_knobs.launcher_parser`` builds, for a release not modelled yet; VLLM_TARGET_DEVICE=cpu).
OPTIONS_PROGRAM = """
import argparse, json, sys
import extract_knobs
if sys.argv[1] == "vllm":
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    parser = make_arg_parser(FlexibleArgumentParser().add_subparsers(dest="subparser").add_parser("serve"))
else:
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
print(json.dumps(extract_knobs.parser_table(parser)))
"""


@dataclass
class Section:
    """One part of a release's report: its lines, and whether what it found changes routing."""

    title: str
    lines: list[str] = field(default_factory=list)
    relevant: bool = False


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, env=dict(env) if env else None)


def _tail(output: str) -> str:
    return "\n".join(output.strip().splitlines()[-OUTPUT_TAIL_LINES:])


def _shown(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def diff(old: object, new: object, where: str = "") -> Iterator[str]:
    """Markdown lines naming what differs between two extracted values: keys added / removed,
    members of a list of names added / removed, other values changed."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            inner = f"{where}.{key}" if where else str(key)
            if key not in old:
                yield f"- added `{inner}`: {_shown(new[key])}"
            elif key not in new:
                yield f"- removed `{inner}` (was {_shown(old[key])})"
            else:
                yield from diff(old[key], new[key], inner)
    elif isinstance(old, list) and isinstance(new, list) and all(isinstance(x, str) for x in old + new):
        for name in sorted(set(new) - set(old)):
            yield f"- `{where}`: added `{name}`"
        for name in sorted(set(old) - set(new)):
            yield f"- `{where}`: removed `{name}`"
    elif old != new:
        yield f"- `{where}`: {_shown(old)} -> {_shown(new)}"


# ------------------------------------------------------------------------------------------ wheels


def _version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def newer_on_registry(launcher: str, baseline: str) -> list[str]:
    """Final releases newer than ``baseline`` that ``pip index versions`` lists."""
    done = _run([sys.executable, "-m", "pip", "index", "versions", DISTRIBUTIONS[launcher]])
    if done.returncode != 0:
        raise SystemExit(f"pip index versions {DISTRIBUTIONS[launcher]} failed: {done.stderr.strip()}")
    listed = next(line for line in done.stdout.splitlines() if line.startswith("Available versions:"))
    versions = [v.strip() for v in listed.partition(":")[2].split(",")]
    return sorted((v for v in versions if _newer(v, baseline)), key=Version)


def _newer(version: str, baseline: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return not parsed.is_prerelease and parsed > Version(baseline)


def download(launcher: str, version: str, folder: Path) -> Path:
    """The release's wheel, downloaded without its dependencies."""
    spec = f"{DISTRIBUTIONS[launcher]}=={version}"
    argv = ["pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(folder), spec]
    done = _run([sys.executable, "-m", *argv])
    wheel = _wheel_in([folder], launcher, version)
    if done.returncode != 0 or wheel is None:
        raise SystemExit(f"pip download {spec} brought no wheel: {done.stderr.strip()}")
    return wheel


def _wheel_in(folders: Sequence[Path], launcher: str, version: str) -> Path | None:
    for folder in folders:
        found = sorted(folder.glob(f"{WHEEL_NAMES[launcher]}-{version}-*.whl"))
        if found:
            return found[0]
    return None


# ------------------------------------------------------------------------------------------ parts


def _extracted(launcher: str, wheel: Path, work: Path) -> dict:
    """The manifest ``extract_knobs.py`` writes for ``wheel``."""
    out = work / "manifest"
    out.mkdir(exist_ok=True)
    argv = [sys.executable, str(SCRIPTS / "extract_knobs.py"), launcher]
    if launcher == "flashinfer":
        source = work / FLASHINFER_SOURCE
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(zipfile.ZipFile(wheel).read(FLASHINFER_SOURCE))
        argv += [str(source), "--version", _version_of(wheel)]
    else:
        argv.append(str(wheel))
    done = _run([*argv, "--out", str(out)])
    if done.returncode != 0:
        raise SystemExit(f"extract_knobs.py {launcher} {wheel.name} failed:\n{done.stderr}")
    (written,) = out.glob(f"knobs-{launcher}-*.json")
    loaded: dict = json.loads(written.read_text(encoding="utf-8"))
    return loaded


def manifest_sections(launcher: str, baseline: str, wheel: Path, work: Path) -> list[Section]:
    """The knob manifest's diff, and (vLLM) its architecture sets' diffs in sections of their own."""
    old = {k: v for k, v in knobs.manifest(launcher, baseline).items() if k not in PROVENANCE}
    new = {k: v for k, v in _extracted(launcher, wheel, work).items() if k not in PROVENANCE}
    old_sets, new_sets = old.pop("architectures", None), new.pop("architectures", None)
    manifest = Section("Knob manifest (scripts/extract_knobs.py)", list(diff(old, new)))
    manifest.relevant = bool(manifest.lines)
    manifest.lines = manifest.lines or ["- no change in flags, env, config keys or tables"]
    if launcher != "vllm":
        return [manifest]
    no_compile = Section("No-compile (breakable CUDA graph) architectures")
    model_code = Section(
        "Model code: fused all-reduce + RMSNorm callers and model-private all-reduce kernels"
    )
    if old_sets is None or new_sets is None:
        why = "the baseline's committed manifest" if old_sets is None else "the extractor"
        for section in (no_compile, model_code):
            section.lines = [f"- not compared: {why} has no `architectures` section"]
            section.relevant = True
        return [manifest, no_compile, model_code]
    no_compile.lines = list(
        diff(old_sets.get(NO_COMPILE), new_sets.get(NO_COMPILE), f"architectures.{NO_COMPILE}")
    )
    for key in MODEL_CODE:
        model_code.lines += diff(old_sets.get(key), new_sets.get(key), f"architectures.{key}")
    others = {k: v for k, v in new_sets.items() if k != NO_COMPILE and k not in MODEL_CODE}
    model_code.lines += diff({k: v for k, v in old_sets.items() if k in others}, others, "architectures")
    for section in (no_compile, model_code):
        section.relevant = bool(section.lines)
        section.lines = section.lines or ["- unchanged"]
    return [manifest, no_compile, model_code]


def install_target(wheel: Path, parsers_python: str, work: Path) -> Path:
    """``wheel`` installed ``--no-deps --target`` into a folder of ``work`` (first on PYTHONPATH later)."""
    target = work / f"site-{wheel.name.split('-')[0]}-{_version_of(wheel)}"
    if not target.exists():
        done = _run(
            [parsers_python, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)]
        )
        if done.returncode != 0:
            raise RuntimeError(f"pip install --target failed: {_tail(done.stderr)}")
    return target


def _parsers_env(target: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{target}:{REPO}:{SCRIPTS}", "VLLM_TARGET_DEVICE": "cpu"}


def options_section(launcher: str, baseline: str, wheel: Path, parsers_python: str, work: Path) -> Section:
    """The option strings the new release's own parser registers against the baseline manifest's."""
    section = Section("Option table (the launcher's own parser)")
    committed = knobs.manifest(launcher, baseline).get("all_options")
    if committed is None:
        section.lines = [f"- not compared: the {baseline} manifest has no option table"]
        return section
    try:
        target = install_target(wheel, parsers_python, work)
    except (RuntimeError, OSError) as error:
        section.lines, section.relevant = [f"- not compared: {error}"], True
        return section
    done = _run([parsers_python, "-c", OPTIONS_PROGRAM, launcher], env=_parsers_env(target))
    if done.returncode != 0:
        section.lines = ["- not compared: the parser did not build:", "", "```", _tail(done.stderr), "```"]
        section.relevant = True
        return section
    table = json.loads(done.stdout.strip().splitlines()[-1])

    def options(table: dict) -> dict[str, dict]:
        return {
            option: {k: action[k] for k in ("dest", "action", "nargs")}
            for action in table["actions"]
            for option in action["options"] + action["negative"]
        }

    old, new = options(committed), options(table)
    added, removed = sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys())
    changed = sorted(o for o in old.keys() & new.keys() if old[o] != new[o])
    new_actions = sorted({new[o]["dest"] for o in added} - {old[o]["dest"] for o in old})
    section.lines = [
        f"- {len(added)} option strings added ({len(new_actions)} new flags, by dest: "
        f"{', '.join(new_actions) or 'none'}), {len(removed)} removed, {len(changed)} changed"
    ]
    section.lines += [f"- added `{o}` ({new[o]['action']}, dest `{new[o]['dest']}`)" for o in added]
    section.lines += [f"- removed `{o}`" for o in removed]
    section.lines += [f"- changed `{o}`: {_shown(old[o])} -> {_shown(new[o])}" for o in changed]
    section.relevant = bool(added or removed or changed)
    return section


def spans_section(launcher: str, baseline: str, old_wheel: Path | None, new_wheel: Path) -> Section:
    """Every span of the baseline's span file, relocated in the new release."""
    section = Section(f"Cited spans of {launcher} {baseline} (scripts/span_relocation.py)")
    if old_wheel is None:
        section.lines, section.relevant = (
            [f"- not relocated: no {launcher} {baseline} wheel to read the cited text from"],
            True,
        )
        return section
    recorded = cited_spans.load(launcher, baseline)
    old_files, new_files = cited_spans.wheel_files(old_wheel), cited_spans.wheel_files(new_wheel)
    stale = cited_spans.check(recorded["spans"], old_files)
    found = [
        span_relocation.relocate(
            key, old_files, new_files, (f"{launcher} {baseline}", f"{launcher} {_version_of(new_wheel)}")
        )
        for key in recorded["spans"]
        if key.rpartition(":")[0] in old_files  # else stale: listed below, nothing to relocate
    ]
    counts = {
        status: sum(r.status == status for r in found) for status in ("unchanged", "moved", "changed", "gone")
    }
    section.lines = [f"- {len(found)} spans: " + ", ".join(f"{n} {status}" for status, n in counts.items())]
    section.lines += [
        f"- the {baseline} wheel itself does not reproduce `{item.key}`: {item.why}" for item in stale
    ]
    for item in found:
        if item.status == "moved":
            section.lines.append(f"- moved `{item.key}` -> `{item.where}`")
        elif item.status == "gone":
            section.lines.append(f"- gone `{item.key}`: the file is not in the new release")
    for item in found:
        if item.status == "changed":
            section.lines += [f"- changed `{item.key}`:", "", "```diff", item.diff or "", "```", ""]
    section.relevant = bool(stale or counts["changed"] or counts["gone"])
    return section


def conformance_section(
    launcher: str, baseline: str, wheel: Path, parsers_python: str, work: Path
) -> Section:
    """The conformance grid with today's route model of ``baseline`` against the new release's code."""
    section = Section("Conformance (scripts/conformance.py)", relevant=True)
    script = SCRIPTS / "conformance.py"
    if not script.exists():
        section.lines = ["- conformance not run: scripts/conformance.py is not in this checkout"]
        return section
    if not Path(parsers_python).exists():
        section.lines = [f"- conformance not run: no interpreter at {parsers_python} (--parsers-python)"]
        return section
    help_text = _run([parsers_python, str(script), "--help"], env=_parsers_env(REPO)).stdout
    absent = [option for option in ("--launcher", "--model-release", "--json") if option not in help_text]
    if absent:
        section.lines = [f"- conformance not run: scripts/conformance.py has no {', '.join(absent)} option"]
        return section
    try:
        target = install_target(wheel, parsers_python, work)
    except (RuntimeError, OSError) as error:
        section.lines = [f"- conformance not run: {error}"]
        return section
    out = work / f"conformance-{launcher}-{_version_of(wheel)}.json"
    argv = [
        parsers_python,
        str(script),
        "--launcher",
        launcher,
        "--model-release",
        baseline,
        "--json",
        str(out),
    ]
    done = _run(argv, env=_parsers_env(target))
    tail = _tail(done.stdout + done.stderr).splitlines()
    if not out.exists():
        section.lines = [
            f"- conformance not run to the end (exit {done.returncode}, no JSON written):",
            "",
            "```",
            *tail,
            "```",
        ]
        return section
    section.lines = [
        f"- exit {done.returncode}; {out.name}: {_shown(json.loads(out.read_text(encoding='utf-8')))}"
    ]
    section.lines += ["", "```", *tail, "```"]
    section.relevant = done.returncode != 0
    return section


def git_pinned() -> list[tuple[str, str]]:
    """The span files whose source is git commits: (launcher or library, release)."""
    found = []
    for path in sorted(cited_spans.DATA.glob("spans-*.json")):
        recorded = json.loads(path.read_text(encoding="utf-8"))
        if recorded["source"]["kind"] == "git":
            found.append((recorded["launcher"], recorded["version"]))
    return found


def git_pinned_section(launcher: str, release: str, trees: Sequence[str]) -> Section:
    """A git-pinned span file (TensorRT-LLM, torch: no wheel CI can fetch) against the source of a newer
    commit (``--git-tree COMMIT=DIR``, DIR/<path in the repository>): each recorded hash that source
    does not reproduce, and every span no source given holds or that has no hash, to re-read by hand."""
    recorded = cited_spans.load(launcher, release)
    repository = recorded["source"]["repository"]
    section = Section(f"{launcher} {release}: spans cited at {repository} commits")
    files, read_at = cited_spans.tree_files(trees)
    held = {key: value for key, value in recorded["spans"].items() if key.rpartition(":")[0] in files}
    changed = cited_spans.check(held, files)
    given = ", ".join(sorted({read_at[key.rpartition(":")[0]] for key in held})) or "none"
    section.lines = [
        f"- {len(held)} of {len(recorded['spans'])} hashed spans checked in the source given ({given}); {len(changed)} changed"
    ]
    section.lines += [f"- changed `{item.key}`: {item.why}" for item in changed]
    recorded_at = recorded["source"]["read_at"]
    section.lines += [
        f"- re-read by hand: `{key}` (hashed at {recorded_at.get(key.rpartition(':')[0], '?')[:7]}; no newer source given)"
        for key in recorded["spans"]
        if key not in held
    ]
    section.lines += [f"- re-read by hand: `{key}` ({why})" for key, why in recorded["unhashed"].items()]
    section.relevant = bool(changed)
    return section


# ------------------------------------------------------------------------------------------ report


def watch_release(
    launcher: str, baseline: str, wheel: Path, old_wheel: Path | None, parsers_python: str, work: Path
) -> list[Section]:
    sections = manifest_sections(launcher, baseline, wheel, work)
    if launcher != "flashinfer":
        sections.append(options_section(launcher, baseline, wheel, parsers_python, work))
    sections.append(spans_section(launcher, baseline, old_wheel, wheel))
    sections.append(conformance_section(launcher, baseline, wheel, parsers_python, work))
    return sections


def render(
    results: Mapping[str, list[tuple[str, list[Section]]]],
    baselines: Mapping[str, str],
    pinned: Sequence[Section] = (),
) -> str:
    lines = ["# Release watch", ""]
    for launcher, releases in results.items():
        lines += [f"## {launcher} (baseline {baselines[launcher]})", ""]
        if not releases:
            lines += [f"No release newer than {baselines[launcher]}.", ""]
        for version, sections in releases:
            flagged = [s.title for s in sections if s.relevant]
            verdict = (
                "route-relevant changes in: " + "; ".join(flagged)
                if flagged
                else "nothing route-relevant changed"
            )
            lines += [f"### {launcher} {version}: {verdict}", ""]
            for section in sections:
                mark = " (route-relevant)" if section.relevant else ""
                lines += [f"#### {section.title}{mark}", "", *section.lines, ""]
    if pinned:
        lines += ["## Git-pinned sources (by hand: CI cannot fetch git)", ""]
    for section in pinned:
        mark = " (route-relevant)" if section.relevant else ""
        lines += [f"### {section.title}{mark}", "", *section.lines, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launcher", action="append", choices=LAUNCHERS, help="default: every one")
    parser.add_argument("--baseline", help="compare against this modelled release (one --launcher)")
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--from", dest="wheels_from", type=Path, help="wheels on disk: every newer one here")
    given.add_argument("--wheel", action="append", type=Path, default=[], help="this wheel (repeatable)")
    parser.add_argument("--parsers-python", default=str(REPO / ".venv-parsers" / "bin" / "python"))
    parser.add_argument(
        "--work", type=Path, help="where wheels and installs go (default: a temporary folder)"
    )
    parser.add_argument("--out", type=Path, help="the Markdown report (default: stdout)")
    parser.add_argument(
        "--git-tree",
        action="append",
        default=[],
        metavar="COMMIT=DIR",
        help="TensorRT-LLM / torch source at a newer COMMIT (DIR/<path>): re-check their git-pinned spans",
    )
    args = parser.parse_args(argv)
    launchers = args.launcher or list(LAUNCHERS)
    if args.baseline and len(launchers) != 1:
        parser.error("--baseline needs exactly one --launcher")
    baselines = {name: args.baseline or knobs.releases_of(name)[-1] for name in launchers}
    for name, baseline in baselines.items():
        if baseline not in knobs.releases_of(name):
            parser.error(
                f"{name} {baseline} is not a modelled release ({', '.join(knobs.releases_of(name))})"
            )

    with tempfile.TemporaryDirectory(prefix="release-watch-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        results: dict[str, list[tuple[str, list[Section]]]] = {}
        for name in launchers:
            baseline = baselines[name]
            if args.wheel or args.wheels_from:
                folders = [args.wheels_from] if args.wheels_from else sorted({w.parent for w in args.wheel})
                candidates = [w for w in args.wheel if w.name.startswith(WHEEL_NAMES[name] + "-")] or [
                    w for f in folders for w in f.glob(f"{WHEEL_NAMES[name]}-*.whl")
                ]
                new = {_version_of(w): w for w in candidates if _newer(_version_of(w), baseline)}
                old_wheel = _wheel_in(folders, name, baseline)
            else:
                new = {v: download(name, v, work) for v in newer_on_registry(name, baseline)}
                old_wheel = download(name, baseline, work) if new else None
            results[name] = [
                (version, watch_release(name, baseline, new[version], old_wheel, args.parsers_python, work))
                for version in sorted(new, key=Version)
            ]
    # Listed on a full run, or checked when a newer source is given.
    pinned = (
        [git_pinned_section(name, release, args.git_tree) for name, release in git_pinned()]
        if args.git_tree or not args.launcher
        else []
    )
    report = render(results, baselines, pinned)
    if args.out:
        args.out.write_text(report, encoding="utf-8")
    else:
        sys.stdout.write(report)
    sections = [s for releases in results.values() for _, found in releases for s in found] + pinned
    return 1 if any(s.relevant for s in sections) else 0


if __name__ == "__main__":
    sys.exit(main())
