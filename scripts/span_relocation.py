"""Where a span cited in one release is in the next: unchanged, moved, changed or gone.

A citation names lines of one release. In the next, the same text may sit at the same lines
(**unchanged**: same path, same hash), at other lines or in another file (**moved**: the cited
lines' text found whole elsewhere; the new lines are given), or no longer exist (**changed**: the
path is there but some cited range's text is not: a short unified diff against the region that
matches it best; **gone**: the path is missing). Text is compared as the span hash reads it
(``cited_spans.span_lines``: trailing whitespace stripped).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cited_spans import span_hash, span_lines

from topo_gate.launchers.routes.base import Cite

#: A changed span's diff is cut to this many lines: enough to see what moved under the rule, short
#: enough that a report of several changed spans stays readable (the full text is in the wheel).
DIFF_LINES = 40
#: Extensions a moved span is searched for in other files of: the source languages cited.
SOURCE_SUFFIXES = (".py", ".h", ".cpp", ".cu", ".cuh")


@dataclass(frozen=True)
class Relocation:
    """``status``: unchanged / moved / changed / gone; ``where``: the new ``path:lines`` (moved);
    ``diff``: the unified diff of each range not found (changed)."""

    key: str
    status: str
    where: str | None = None
    diff: str | None = None


def split_key(key: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``path:lines`` -> (path, ranges)."""
    path, _, lines = key.rpartition(":")
    ranges = Cite("", path, lines).ranges
    if ranges is None:
        raise ValueError(f"{key} names no lines")
    return path, ranges


def _find(block: Sequence[str], lines: Sequence[str], near: int) -> int | None:
    """The 1-based first line of ``block`` in ``lines``, the occurrence nearest ``near``."""
    width = len(block)
    starts = [
        index + 1
        for index in range(len(lines) - width + 1)
        if lines[index] == block[0] and list(lines[index : index + width]) == list(block)
    ]
    return min(starts, key=lambda start: abs(start - near)) if starts else None


def _ranges_text(starts: Sequence[int], blocks: Sequence[Sequence[str]]) -> str:
    return ",".join(
        f"{start}-{start + len(block) - 1}" if len(block) > 1 else f"{start}"
        for start, block in zip(starts, blocks, strict=True)
    )


def _found_all(
    blocks: Sequence[Sequence[str]], ranges: Sequence[tuple[int, int]], lines: Sequence[str]
) -> list[int] | None:
    starts = [_find(block, lines, first) for block, (first, _) in zip(blocks, ranges, strict=True)]
    return None if None in starts else [start for start in starts if start is not None]


def _best_region(block: Sequence[str], lines: Sequence[str]) -> int:
    """The 0-based start of the region of ``lines`` that matches ``block`` best: anchored on their
    longest common run of lines."""
    matcher = difflib.SequenceMatcher(None, list(block), list(lines), autojunk=False)
    match = matcher.find_longest_match(0, len(block), 0, len(lines))
    return max(0, min(match.b - match.a, max(0, len(lines) - len(block))))


def _diff(
    path: str, first: int, block: Sequence[str], old_release: str, new_release: str, lines: Sequence[str]
) -> str:
    start = _best_region(block, lines)
    region = lines[start : start + len(block)]
    diff = list(
        difflib.unified_diff(
            list(block),
            list(region),
            fromfile=f"{old_release} {path}:{first}-{first + len(block) - 1}",
            tofile=f"{new_release} {path}:{start + 1}-{start + len(region)}",
            lineterm="",
        )
    )
    if len(diff) > DIFF_LINES:
        diff = [*diff[:DIFF_LINES], f"... ({len(diff) - DIFF_LINES} more diff lines)"]
    return "\n".join(diff)


def relocate(
    key: str,
    old_files: Mapping[str, str],
    new_files: Mapping[str, str],
    releases: tuple[str, str] = ("old", "new"),
) -> Relocation:
    """Where the span ``key`` of ``old_files`` is in ``new_files``."""
    path, ranges = split_key(key)
    old_lines = span_lines(old_files[path])
    blocks = [old_lines[first - 1 : last] for first, last in ranges]
    if path not in new_files:
        return Relocation(key, "gone")
    if span_hash(old_files[path], ranges) == _same_lines_hash(new_files[path], ranges):
        return Relocation(key, "unchanged", where=key)
    new_lines = span_lines(new_files[path])
    starts = _found_all(blocks, ranges, new_lines)
    if starts is not None:
        return Relocation(key, "moved", where=f"{path}:{_ranges_text(starts, blocks)}")
    for other, text in new_files.items():
        if other == path or not other.endswith(SOURCE_SUFFIXES) or blocks[0][0] not in text:
            continue
        starts = _found_all(blocks, ranges, span_lines(text))
        if starts is not None:
            return Relocation(key, "moved", where=f"{other}:{_ranges_text(starts, blocks)}")
    diffs = [
        _diff(path, first, block, *releases, new_lines)
        for block, (first, _) in zip(blocks, ranges, strict=True)
        if _find(block, new_lines, first) is None
    ]
    return Relocation(key, "changed", diff="\n".join(diffs))


def _same_lines_hash(text: str, ranges: Sequence[tuple[int, int]]) -> str | None:
    try:
        return span_hash(text, ranges)
    except ValueError:  # SpanError: the file is shorter now
        return None
