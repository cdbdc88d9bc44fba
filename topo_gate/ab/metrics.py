"""One number from one run: a field of the benchmark's result file, or a regex on its stdout.

A run whose number cannot be read (the file was not written, holds no such field, holds several
records, or the value is not a positive finite number) raises ``MetricMissing``: that run failed.
It never counts as zero, which would read as a huge regression (or win) of that arm.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo_gate._inputs import InputError, parse_json, read_text
from topo_gate.ab.benchmarks import HIGHER, LOWER, Benchmark, FileMetric
from topo_gate.ab.regex_bounds import MatchOvertime, backtracking_problem, search_all

#: A benchmark's result is a few KiB (vLLM serve with --save-detailed: per-request lists, still MiB).
MAX_RESULT_BYTES = 64 * 1024 * 1024
#: stdout read for a regex metric: the summary is printed last, so the tail is what matters.
MAX_STDOUT_BYTES = 16 * 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class MetricMissing(Exception):
    """The run's metric could not be read; the message says why, in one line."""


@dataclass(frozen=True)
class MetricSpec:
    """What a session measures: a file metric of ``benchmark`` or a regex on stdout."""

    name: str
    direction: str
    unit: str
    benchmark: Benchmark | None = None
    field: FileMetric | None = None
    regex: re.Pattern[str] | None = None

    def describe(self) -> dict[str, Any]:
        """Plain data for the record."""
        where: dict[str, Any] = (
            {"source": "stdout", "regex": self.regex.pattern}
            if self.regex is not None
            else {
                "source": "file",
                "benchmark": self.benchmark.name if self.benchmark else None,
                "path": list(self.field.path) if self.field else [],
            }
        )
        return {"name": self.name, "direction": self.direction, "unit": self.unit, **where}


def file_metric(benchmark: Benchmark, name: str | None) -> MetricSpec:
    """``name`` (default: the benchmark's) among ``benchmark``'s metrics; ``ValueError`` listing them."""
    chosen = benchmark.metric(name or benchmark.default_metric)
    if chosen is None:
        raise ValueError(
            f"{benchmark.title} writes no metric {name!r}; choose from {', '.join(benchmark.metric_names)}"
        )
    return MetricSpec(chosen.name, chosen.direction, chosen.unit, benchmark=benchmark, field=chosen)


def regex_metric(spec: str, *, higher_is_better: bool | None) -> MetricSpec:
    """``NAME=REGEX``: the last match on stdout; its group ``value``, else its first group, else the
    whole match, read as a number. The direction must be said (``--higher/--lower-is-better``)."""
    name, eq, pattern = spec.partition("=")
    if not eq or not _NAME.fullmatch(name) or not pattern:
        raise ValueError(f"--metric-regex wants NAME=REGEX (NAME of letters, digits, _.-), got {spec!r}")
    if higher_is_better is None:
        raise ValueError("--metric-regex needs --higher-is-better or --lower-is-better")
    try:
        compiled = re.compile(pattern, re.MULTILINE)
    except re.error as error:
        raise ValueError(f"--metric-regex {name}: not a regular expression: {error}") from None
    problem = backtracking_problem(pattern)
    if problem:
        raise ValueError(f"--metric-regex {name}: refused: {problem}; write it without (e.g. [0-9.]+)")
    return MetricSpec(name, HIGHER if higher_is_better else LOWER, "", regex=compiled)


def read_file_metric(spec: MetricSpec, path: Path) -> float:
    """The metric from the result file a run wrote at ``path``."""
    assert spec.benchmark is not None and spec.field is not None  # a file metric
    try:
        text = read_text(path, limit=MAX_RESULT_BYTES, what="a benchmark result")
    except InputError as error:
        if error.problem == "no such file":
            raise MetricMissing(f"the benchmark wrote no result file ({path.name})") from None
        raise MetricMissing(f"{path.name}: {error}") from None
    try:
        if spec.benchmark.jsonl:
            records = [parse_json(line) for line in text.splitlines() if line.strip()]
        else:
            records = [parse_json(text)] if text.strip() else []
    except InputError as error:
        raise MetricMissing(f"{path.name}: {error}") from None
    if len(records) != 1:
        several = f"{len(records)} records (a sweep?): a run must measure one configuration"
        raise MetricMissing(f"{path.name} holds {several if records else 'no record'}")
    value: Any = records[0]
    for key in spec.field.path:
        if not isinstance(value, dict) or key not in value:
            raise MetricMissing(f"{path.name} has no {'.'.join(spec.field.path)}")
        value = value[key]
    return _positive(value, f"{path.name}: {'.'.join(spec.field.path)}")


def read_regex_metric(spec: MetricSpec, stdout_path: Path) -> float:
    """The metric from the run's stdout: the last match of the regex."""
    assert spec.regex is not None
    try:
        data = stdout_path.read_bytes()[-MAX_STDOUT_BYTES:]
    except OSError as error:
        raise MetricMissing(f"cannot read the run's stdout: {error.strerror or error}") from None
    try:
        matches = search_all(spec.regex, data.decode("utf-8", errors="replace"))
    except MatchOvertime as overtime:
        raise MetricMissing(
            f"--metric-regex {spec.name} on stdout: {overtime}; simplify the pattern"
        ) from None
    if not matches:
        raise MetricMissing(f"no match of --metric-regex {spec.name} on stdout")
    last = matches[-1]
    text = last.group("value") if "value" in spec.regex.groupindex else last.group(1 if last.re.groups else 0)
    try:
        number = float(text)
    except (TypeError, ValueError):
        raise MetricMissing(f"--metric-regex {spec.name} matched {text!r}, not a number") from None
    return _positive(number, f"--metric-regex {spec.name}")


def _positive(value: Any, where: str) -> float:
    # Ratios of medians need positive values; a benchmark that failed inside often writes 0 or -1
    # (SGLang's offline throughput starts every field at -1).
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetricMissing(f"{where} is {value!r}, not a number")
    number = float(value)
    if not number > 0 or number == float("inf"):
        raise MetricMissing(f"{where} is {value!r}, not a positive finite number")
    return number
