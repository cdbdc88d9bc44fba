"""Reading one run's metric at its limits (topo_gate/ab/metrics.py): the 64 MiB cap on a result file
and the 16 MiB tail of stdout a regex searches, exactly at the bound and one byte on each side; the
words of every failed read (a result path that is no readable file, a stdout that is gone, a value
that is not finite); the metric's description in the record; and the spec staying what the session
was started with."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re

import pytest
from ab_helpers import DATA

from topo_gate.ab.benchmarks import BENCHMARKS, HIGHER, LOWER
from topo_gate.ab.metrics import MetricMissing, file_metric, read_file_metric, read_regex_metric, regex_metric

MIB = 1024 * 1024
# The documented bounds, written out: the module's constants are what these tests check.
RESULT_LIMIT = 64 * MIB
STDOUT_TAIL = 16 * MIB


def _latency_result(size: int) -> bytes:
    """vLLM latency's real result, padded with trailing blanks (still valid JSON) to ``size`` bytes."""
    text = (DATA / "vllm-latency.json").read_bytes().rstrip()
    assert len(text) < size
    return text + b" " * (size - len(text))


@pytest.mark.parametrize("size", [RESULT_LIMIT - 1, RESULT_LIMIT])
def test_a_result_file_of_up_to_64_mib_is_read(tmp_path, size) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(_latency_result(size))
    assert read_file_metric(file_metric(BENCHMARKS["vllm-latency"], None), path) == 1.8412


def test_a_result_file_one_byte_over_64_mib_is_a_failed_run_naming_the_cap(tmp_path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(_latency_result(RESULT_LIMIT + 1))
    with pytest.raises(MetricMissing) as caught:
        read_file_metric(file_metric(BENCHMARKS["vllm-latency"], None), path)
    assert str(caught.value) == "r.json: larger than 64 MiB; not a benchmark result"


# A stdout whose only match opens the file: the tail of the last 16 MiB holds all of it up to that
# size; one byte more and the tail starts inside the match ("ps: 5"), which then is not seen.
@pytest.mark.parametrize(
    "size, found",
    [(STDOUT_TAIL - 1, 5.0), (STDOUT_TAIL, 5.0), (STDOUT_TAIL + 1, None)],
)
def test_a_regex_searches_only_the_last_16_mib_of_stdout(tmp_path, size, found) -> None:
    out = tmp_path / "out.log"
    head = b"tps: 5\n"
    out.write_bytes(head + b"." * (size - len(head)))
    spec = regex_metric("tps=^tps: ([0-9]+)", higher_is_better=True)
    if found is None:
        with pytest.raises(MetricMissing, match="no match of --metric-regex tps on stdout"):
            read_regex_metric(spec, out)
    else:
        assert read_regex_metric(spec, out) == found


# read_text's problems other than a missing file are named as they are, after the file's name; only
# "no such file" reads as the benchmark not having written its result.
@pytest.mark.parametrize(
    "kind, message",
    [
        ("absent", "the benchmark wrote no result file (r.json)"),
        ("directory", "r.json: is a directory, not a benchmark result"),
        ("not-utf8", "r.json: not UTF-8 text (byte 0: invalid start byte)"),
    ],
)
def test_a_result_path_that_is_no_readable_file_says_why(tmp_path, kind, message) -> None:
    path = tmp_path / "r.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "not-utf8":
        path.write_bytes(b"\xff{}")
    with pytest.raises(MetricMissing) as caught:
        read_file_metric(file_metric(BENCHMARKS["vllm-latency"], None), path)
    assert str(caught.value) == message


def test_a_stdout_that_cannot_be_read_is_a_failed_run_in_the_systems_words(tmp_path) -> None:
    spec = regex_metric("tps=tps: ([0-9]+)", higher_is_better=True)
    with pytest.raises(MetricMissing) as caught:
        read_regex_metric(spec, tmp_path / "gone.log")
    # The OS's short reason only, not the errno and path that str(OSError) adds.
    assert str(caught.value) == f"cannot read the run's stdout: {os.strerror(errno.ENOENT)}"


# float() reads "inf", "1e999" and "nan" from stdout (a JSON result cannot hold them: parse_json
# refuses them first); none is a value a ratio of medians can use.
@pytest.mark.parametrize(
    "printed, value",
    [
        ("1e308", 1e308),
        ("1e999", None),
        ("inf", None),
        ("Infinity", None),
        ("nan", None),
        ("0.0", None),
        ("5e-324", 5e-324),
    ],
)
def test_a_regex_value_must_be_positive_and_finite(tmp_path, printed, value) -> None:
    out = tmp_path / "out.log"
    out.write_text(f"throughput: {printed}\n")
    spec = regex_metric(r"tps=throughput: (\S+)", higher_is_better=True)
    if value is None:
        with pytest.raises(MetricMissing) as caught:
            read_regex_metric(spec, out)
        assert str(caught.value) == f"--metric-regex tps is {float(printed)!r}, not a positive finite number"
    else:
        assert read_regex_metric(spec, out) == value


def test_the_record_describes_a_regex_metric_by_its_pattern() -> None:
    spec = regex_metric(r"lat=latency: ([0-9.]+) s", higher_is_better=False)
    assert spec.describe() == {
        "name": "lat",
        "direction": LOWER,
        "unit": "",
        "source": "stdout",
        "regex": r"latency: ([0-9.]+) s",
    }


@pytest.mark.parametrize(
    "benchmark, metric, path",
    [
        ("vllm-latency", None, ["avg_latency"]),
        ("trtllm-throughput", None, ["performance", "system_output_throughput_tok_s"]),
    ],
)
def test_the_record_describes_a_file_metric_by_its_benchmark_and_path(benchmark, metric, path) -> None:
    spec = file_metric(BENCHMARKS[benchmark], metric)
    described = spec.describe()
    assert described == {
        "name": spec.name,
        "direction": spec.direction,
        "unit": spec.unit,
        "source": "file",
        "benchmark": benchmark,
        "path": path,
    }
    assert json.loads(json.dumps(described)) == described  # plain data for the record


def test_the_direction_of_a_regex_metric_is_given_by_keyword_only() -> None:
    assert regex_metric("x=([0-9]+)", higher_is_better=True).direction == HIGHER
    # A bare True/False in second place would not say which way is better.
    with pytest.raises(TypeError):
        regex_metric("x=([0-9]+)", True)  # type: ignore[misc]


# One spec is read by every run of a session and then described in its record: a run must not be
# able to change what the others measure, or what the record says was measured.
@pytest.mark.parametrize(
    "spec",
    [
        regex_metric("x=([0-9]+)", higher_is_better=True),
        file_metric(BENCHMARKS["vllm-latency"], None),
    ],
    ids=["regex", "file"],
)
def test_a_metric_spec_cannot_be_changed(spec) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.direction = LOWER  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.regex = re.compile("y")  # type: ignore[misc]
    assert hash(spec) == hash(dataclasses.replace(spec))
