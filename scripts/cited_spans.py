"""The launcher source topo-gate cites, and a hash of each cited span, per release.

Every rule of the route models cites its source as ``Cite(release, path, lines)``; the plugins'
docstrings name spans of the launcher too (``vllm/plugins/__init__.py:77-97``, ``arg_utils.py:2245``).
Each release's span file, ``topo_gate/launchers/data/spans-<launcher>-<release>.json``, records a hash
of every span topo-gate cites in that release, so a release whose cited code changed cannot pass
unread: tests/launchers/test_cited_spans.py checks the file names exactly the citations of today's
code, and tests/launchers/test_cited_spans_current.py recomputes each hash from the release's wheel.

The span files are kept apart from the knob manifests (``knobs-*.json``): a manifest is extracted
from the release alone and re-extracting it must rewrite no byte, while a span file follows
topo-gate's own citations and changes whenever a route model cites a new span.

**The hash** of a citation (``SPAN_HASH``): the release's file decoded as UTF-8 and split at each
``"\\n"`` (line N is the N-th piece, as editors and ``grep -n`` count), each cited line with its
trailing whitespace stripped, the ranges in the order cited, joined with ``"\\n"``; sha256 of that
text's UTF-8 bytes, written ``sha256:<hex>``. A range past the end of the file has no hash.

Citations of TensorRT-LLM and torch name git commits, not wheels. Their hashes come from the source
at that commit where it could be read (``hash --tree COMMIT=DIR``), and citations that name a symbol
rather than lines (``AllreduceOp::selectImplementation``), or whose commit's source could not be had,
are listed under ``unhashed`` with the reason. CI cannot fetch git: the wheel-backed test covers the
wheels, and the git-pinned spans are re-read by hand at each retarget (scripts/release_watch.py).

    python scripts/cited_spans.py hash vllm 0.33.0 --wheel vllm-0.33.0-*.whl     # (re)write its span file
    python scripts/cited_spans.py hash trtllm git-f6a156b --tree f6a156b=DIR      # DIR/<path> at that commit
    python scripts/cited_spans.py check SPANS.json --wheel OTHER.whl              # which spans differ there
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import pkgutil
import re
import sys
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere: the package is this checkout's
    sys.path.insert(0, str(REPO))

from topo_gate import plugins  # noqa: E402
from topo_gate.launchers import knobs, routes  # noqa: E402
from topo_gate.launchers.routes import torch_symm  # noqa: E402
from topo_gate.launchers.routes.base import Cite  # noqa: E402

DATA = REPO / "topo_gate" / "launchers" / "data"
FORMAT = "topo-gate/spans/v1"
SPAN_HASH = (
    "sha256 of the cited lines (the file split at each newline, each line's trailing whitespace "
    "stripped), the ranges in the order cited, joined with a newline (scripts/cited_spans.py)"
)
#: Sources pinned to a git commit: how a Cite's release names one, and its repository.
GIT_SOURCES = {
    "trtllm": (re.compile(r"TensorRT-LLM (?P<commit>[0-9a-f]{7,40})"), "NVIDIA/TensorRT-LLM"),
    "torch": (re.compile(r"torch \(pytorch/pytorch@(?P<commit>[0-9a-f]{7,40})\)"), "pytorch/pytorch"),
}
#: How the plugins' docstrings name a launcher release ("vLLM 0.33.0"), and the launcher it is.
_PLUGIN_RELEASE = re.compile(r"\b(SGLang|vLLM) (\d+\.\d+\.\d+(?:\.post\d+)?)\b")
_LAUNCHER_OF = {"SGLang": "sglang", "vLLM": "vllm"}
#: A span the plugins name: ``path.py:lines``, or ````:lines```` (in double backticks) of the path
#: named just before it.
_PLUGIN_SPAN = re.compile(
    r"(?:(?P<path>(?:[\w.]+/)*\w+\.py)|(?<=``)):(?P<lines>\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)\b"
)


class SpanError(ValueError):
    """A cited span that cannot be read in the given source (file missing, lines past its end)."""


@dataclass(frozen=True)
class Citation:
    """One cited span: the span file it belongs to (``launcher``, ``release``), the Cite as written,
    and where topo-gate cites it (``where``: module and name, for messages). ``bare``: a plugin
    citation naming a file without its folder (``srt/server_args.py:243``); the span file's
    ``resolved`` says which file of the release it is."""

    launcher: str
    release: str
    cite: Cite
    where: str
    bare: bool = False

    @property
    def key(self) -> str:
        return self.cite.key


def span_lines(text: str) -> list[str]:
    """The file's lines as the hash reads them: split at each newline, trailing whitespace stripped."""
    return [line.rstrip() for line in text.split("\n")]


def span_text(text: str, ranges: Sequence[tuple[int, int]]) -> str:
    """The cited lines of ``text`` (1-based, inclusive ranges in the order cited), joined with a newline."""
    lines = span_lines(text)
    picked: list[str] = []
    for first, last in ranges:
        if not 1 <= first <= last <= len(lines):
            raise SpanError(f"lines {first}-{last} are outside the file's {len(lines)} lines")
        picked.extend(lines[first - 1 : last])
    return "\n".join(picked)


def span_hash(text: str, ranges: Sequence[tuple[int, int]]) -> str:
    """``sha256:<hex>`` of ``span_text`` (SPAN_HASH)."""
    return "sha256:" + hashlib.sha256(span_text(text, ranges).encode("utf-8")).hexdigest()


def _cites_in(value: object) -> Iterator[Cite]:
    if isinstance(value, Cite):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _cites_in(item)
    elif isinstance(value, (tuple, list, frozenset, set)):
        for item in value:
            yield from _cites_in(item)


def _file_of(cite: Cite) -> tuple[str, str]:
    """The span file (launcher or library, release) a route model's Cite belongs to."""
    name, _, version = cite.release.partition(" ")
    if name in knobs.SUPPORTED or name in knobs.LIBRARY_RELEASES:
        if version not in knobs.releases_of(name):
            raise SpanError(f"{cite} cites {name} {version}, not a modelled release")
        return name, version
    for source, (pattern, _) in GIT_SOURCES.items():
        if pattern.fullmatch(cite.release):
            # TensorRT-LLM's files are read at the commits that go with the pin (routes/trtllm.py):
            # they belong to the modelled release; torch's to the commit routes/torch_symm.py pins.
            if source in knobs.SUPPORTED:
                return source, knobs.SUPPORTED[source][-1]
            return source, "git-" + _commit(torch_symm.RELEASE)[:7]
    raise SpanError(f"{cite}: release {cite.release!r} names no modelled release or pinned commit")


def _commit(release: str) -> str:
    for pattern, _ in GIT_SOURCES.values():
        match = pattern.fullmatch(release)
        if match:
            return match["commit"]
    raise SpanError(f"{release!r} names no commit")


def route_citations() -> list[Citation]:
    """Every Cite the route modules hold (module constants, ``CITES`` tables), once per module."""
    found: list[Citation] = []
    for info in sorted(pkgutil.iter_modules(routes.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{routes.__name__}.{info.name}")
        seen: set[Cite] = set()
        for name, value in vars(module).items():
            for cite in _cites_in(value):
                if cite not in seen:
                    seen.add(cite)
                    launcher, release = _file_of(cite)
                    found.append(Citation(launcher, release, cite, f"routes.{info.name}.{name}"))
    return found


def plugin_citations() -> list[Citation]:
    """The launcher spans the plugin modules name (``path.py:lines`` in docstrings and comments)."""
    found: list[Citation] = []
    for info in sorted(pkgutil.iter_modules(plugins.__path__), key=lambda m: m.name):
        text = (Path(plugins.__path__[0]) / f"{info.name}.py").read_text(encoding="utf-8")
        named: dict[str, str] = {}
        for spelled, version in _PLUGIN_RELEASE.findall(text):
            name = _LAUNCHER_OF[spelled]
            if named.setdefault(name, version) != version:
                raise SpanError(
                    f"plugins.{info.name} names {spelled} {named[name]} and {version}: say which "
                    "release its line numbers are of in one place"
                )
        previous: str | None = None
        full_paths: list[str] = []  # named with their launcher folder, in order
        for match in _PLUGIN_SPAN.finditer(text):
            path = match["path"] or previous
            previous = path
            if path is None:
                continue
            # A bare name is the full path named before it in the module, if any (``arg_utils.py``
            # after ``vllm/engine/arg_utils.py``).
            path = next((full for full in reversed(full_paths) if full.endswith("/" + path)), path)
            launcher = path.split("/", 1)[0] if path.split("/", 1)[0] in named else None
            if launcher:
                full_paths.append(path)
            # A bare path in a module about one launcher is that launcher's; in a module naming several,
            # the span file that resolves it says whose (exactly one must).
            candidates = [launcher] if launcher else ([info.name] if info.name in named else sorted(named))
            for candidate in candidates:
                found.append(
                    Citation(
                        candidate,
                        named[candidate],
                        Cite(f"{candidate} {named[candidate]}", path, match["lines"]),
                        f"plugins.{info.name}",
                        bare=not path.startswith(f"{candidate}/"),
                    )
                )
    return found


def citations() -> list[Citation]:
    return route_citations() + plugin_citations()


def span_file(launcher: str, release: str) -> Path:
    return DATA / f"spans-{launcher}-{release}.json"


def load(launcher: str, release: str) -> dict:
    loaded: dict = json.loads(span_file(launcher, release).read_text(encoding="utf-8"))
    return loaded


def wheel_files(wheel: Path) -> dict[str, str]:
    """The text files of a wheel by path (.py and the rest that decode as UTF-8)."""
    with zipfile.ZipFile(wheel) as archive:
        files = {}
        for name in archive.namelist():
            try:
                files[name] = archive.read(name).decode("utf-8")
            except UnicodeDecodeError:
                continue
        return files


def resolve_bare(launcher: str, path: str, files: Mapping[str, str]) -> str | None:
    """The file of the release a bare ``path`` names: ``<launcher>/<path>`` when the release has it
    (``cli/serve.py`` is ``sglang/cli/serve.py``), else the one file whose path ends with it (None:
    none or several)."""
    if f"{launcher}/{path}" in files:
        return f"{launcher}/{path}"
    matches = [name for name in files if name.endswith("/" + path)]
    return matches[0] if len(matches) == 1 else None


def _hash_entries(
    cited: Sequence[Citation],
    files: Mapping[str, str],
    read_at: Mapping[str, str],
    missing: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(spans, resolved, unhashed) of ``cited`` read from ``files``. ``read_at``: the commit each file
    of a git source was read at (a git citation is hashed only from its own commit's file);
    ``missing``: why the source of a path could not be had."""
    spans: dict[str, str] = {}
    resolved: dict[str, str] = {}
    unhashed: dict[str, str] = {}
    for citation in cited:
        path = citation.cite.path
        if citation.bare:
            full = resolve_bare(citation.launcher, path, files)
            if full is None:
                continue  # a candidate release that does not hold it: another span file resolves it
            resolved[citation.key] = full
            path = full
        key = f"{path}:{citation.cite.lines}"
        ranges = citation.cite.ranges
        commit = _commit(citation.cite.release) if citation.launcher in GIT_SOURCES else None
        if ranges is None:
            unhashed[key] = f"cites a symbol ({citation.cite.lines}), not lines: re-read it by hand"
        elif path in missing:
            unhashed[key] = missing[path]
        elif path not in files:
            raise SpanError(f"{citation.cite} ({citation.where}): {path} is not in the source given")
        elif commit is not None and not read_at.get(path, "").startswith(commit):
            raise SpanError(f"{citation.cite}: {path} was read at {read_at.get(path)}, not at {commit}")
        else:
            spans[key] = span_hash(files[path], ranges)
    return spans, resolved, unhashed


def write_span_file(
    launcher: str,
    release: str,
    source: dict,
    files: Mapping[str, str],
    read_at: Mapping[str, str],
    missing: Mapping[str, str],
) -> Path:
    """Hash every citation of (``launcher``, ``release``) from ``files`` into its span file."""
    cited = [c for c in citations() if (c.launcher, c.release) == (launcher, release)]
    spans, resolved, unhashed = _hash_entries(cited, files, read_at, missing)
    document = {
        "format": FORMAT,
        "launcher": launcher,
        "version": release,
        "source": source,
        "hash": SPAN_HASH,
        "spans": dict(sorted(spans.items())),
        "resolved": dict(sorted(resolved.items())),
        "unhashed": dict(sorted(unhashed.items())),
    }
    out = span_file(launcher, release)
    out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return out


@dataclass(frozen=True)
class Changed:
    key: str
    why: str


def check(recorded: Mapping[str, str], files: Mapping[str, str]) -> list[Changed]:
    """The recorded spans whose hash ``files`` does not reproduce (path missing, lines past the end,
    other text)."""
    changed: list[Changed] = []
    for key, expected in recorded.items():
        path, _, lines = key.rpartition(":")
        ranges = Cite("", path, lines).ranges
        assert ranges is not None, key
        if path not in files:
            changed.append(Changed(key, f"{path} is not in the release"))
            continue
        try:
            actual = span_hash(files[path], ranges)
        except SpanError as error:
            changed.append(Changed(key, str(error)))
            continue
        if actual != expected:
            changed.append(Changed(key, f"the text at {key} is not the text cited ({actual} != {expected})"))
    return changed


def tree_files(trees: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Files below each ``COMMIT=DIR`` (DIR/<path in the repository>), and the commit each was read at."""
    files: dict[str, str] = {}
    read_at: dict[str, str] = {}
    for item in trees:
        commit, _, folder = item.partition("=")
        for path in Path(folder).rglob("*"):
            if path.is_file():
                name = path.relative_to(folder).as_posix()
                files[name] = path.read_text(encoding="utf-8")
                read_at[name] = commit
    return files, read_at


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    hashing = commands.add_parser("hash", help="write the span file of one release")
    hashing.add_argument("launcher")
    hashing.add_argument("release")
    hashing.add_argument("--wheel", type=Path, help="the release's wheel")
    hashing.add_argument(
        "--tree", action="append", default=[], metavar="COMMIT=DIR", help="git-pinned: DIR/<path> at COMMIT"
    )
    hashing.add_argument(
        "--missing",
        action="append",
        default=[],
        metavar="PATH=WHY",
        help="git-pinned: a cited file whose source at the cited commit could not be had, and why",
    )
    checking = commands.add_parser("check", help="recompute a span file's hashes from a wheel")
    checking.add_argument("spans", type=Path)
    checking.add_argument("--wheel", type=Path, required=True)
    args = parser.parse_args(argv)

    if args.command == "check":
        recorded = json.loads(args.spans.read_text(encoding="utf-8"))
        changed = check(recorded["spans"], wheel_files(args.wheel))
        for item in changed:
            print(f"changed: {item.key}: {item.why}")
        print(f"{len(changed)} of {len(recorded['spans'])} spans changed in {args.wheel.name}")
        return 1 if changed else 0
    missing = dict(item.split("=", 1) for item in args.missing)
    read_at: dict[str, str] = {}
    if args.wheel:
        files = wheel_files(args.wheel)
        source: dict = {
            "kind": "wheel",
            "file": args.wheel.name,
            "sha256": hashlib.sha256(args.wheel.read_bytes()).hexdigest(),
        }
    else:
        files, read_at = tree_files(args.tree)
        repository = GIT_SOURCES[args.launcher][1]
        source = {"kind": "git", "repository": repository, "read_at": dict(sorted(read_at.items()))}
    out = write_span_file(args.launcher, args.release, source, files, read_at, missing)
    print(f"wrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
