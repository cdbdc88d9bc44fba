"""The benchmarks' result files (fixtures written from the pinned sources, data/README.md) and the
regex metric: one number per run, or the run failed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ab_helpers import DATA

from topo_gate.ab.benchmarks import BENCHMARKS, HIGHER, LOWER, recognize
from topo_gate.ab.metrics import MetricMissing, file_metric, read_file_metric, read_regex_metric, regex_metric

FIXTURES = {
    "vllm-latency": ("vllm-latency.json", 1.8412),
    "vllm-throughput": ("vllm-throughput.json", 16685.7),
    "vllm-serve": ("vllm-serve.json", 1276.2),
    "sglang-one-batch": ("sglang-one-batch.jsonl", 649.9),
    "sglang-offline": ("sglang-offline.jsonl", 4636.8),
    "sglang-serving": ("sglang-serving.jsonl", 1248.8),
    "trtllm-throughput": ("trtllm-throughput.json", 4171.4),
}


def test_every_benchmark_has_a_fixture() -> None:
    assert set(FIXTURES) == set(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_headline_metric_reads_from_the_real_format(name) -> None:
    fixture, expected = FIXTURES[name]
    spec = file_metric(BENCHMARKS[name], None)
    assert read_file_metric(spec, DATA / fixture) == expected


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_listed_metric_is_in_the_real_format(name) -> None:
    fixture, _ = FIXTURES[name]
    benchmark = BENCHMARKS[name]
    readable = [m.name for m in benchmark.metrics if _readable(benchmark.name, m.name, DATA / fixture)]
    missing = sorted(set(benchmark.metric_names) - set(readable))
    assert missing == OPTIONAL.get(name, [])


# Fields a run writes only when asked: trtllm-bench's streaming block with --streaming; vLLM serve's
# e2el statistics with --percentile-metrics naming e2el (default "ttft,tpot,itl", serve.py:2255).
OPTIONAL = {
    "trtllm-throughput": ["avg_tpot_ms", "avg_ttft_ms", "token_output_speed_tok_s"],
    "vllm-serve": ["mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms"],
}


def _readable(benchmark: str, metric: str, path: Path) -> bool:
    try:
        return read_file_metric(file_metric(BENCHMARKS[benchmark], metric), path) > 0
    except MetricMissing:
        return False


@pytest.mark.parametrize(
    "name, direction",
    [
        ("avg_latency", LOWER),
        ("p99_latency", LOWER),
        ("tokens_per_second", HIGHER),
        ("median_ttft_ms", LOWER),
        ("output_throughput", HIGHER),
        ("median_decode_throughput", HIGHER),
        ("system_output_throughput_tok_s", HIGHER),
        ("avg_request_latency_ms", LOWER),
    ],
)
def test_each_metric_knows_which_way_is_better(name, direction) -> None:
    found = {m.direction for b in BENCHMARKS.values() for m in b.metrics if m.name == name}
    assert found == {direction}


def test_an_unknown_metric_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="choose from avg_latency, p10_latency"):
        file_metric(BENCHMARKS["vllm-latency"], "throughput")


def test_a_missing_file_field_sweep_or_bad_value_is_a_failed_run(tmp_path) -> None:
    spec = file_metric(BENCHMARKS["sglang-one-batch"], None)
    record = json.loads((DATA / "sglang-one-batch.jsonl").read_text())
    cases = {
        "absent.jsonl": None,
        "empty.jsonl": "",
        "sweep.jsonl": json.dumps(record) + "\n" + json.dumps({**record, "batch_size": 16}) + "\n",
        "no-field.jsonl": json.dumps({k: v for k, v in record.items() if k != "median_decode_throughput"}),
        "zero.jsonl": json.dumps({**record, "median_decode_throughput": 0}),
        "minus.jsonl": json.dumps({**record, "median_decode_throughput": -1}),
        "text.jsonl": json.dumps({**record, "median_decode_throughput": "fast"}),
        "bool.jsonl": json.dumps({**record, "median_decode_throughput": True}),
        "garbled.jsonl": "{not json",
    }
    expected = {
        "absent.jsonl": "wrote no result file",
        "empty.jsonl": "holds no record",
        "sweep.jsonl": "2 records",
        "no-field.jsonl": "has no median_decode_throughput",
        "zero.jsonl": "not a positive",
        "minus.jsonl": "not a positive",
        "text.jsonl": "not a number",
        "bool.jsonl": "not a number",
        "garbled.jsonl": "not JSON",
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(MetricMissing, match=re.escape(expected[name])):
            read_file_metric(spec, tmp_path / name)


def test_a_nested_field_missing_names_its_path(tmp_path) -> None:
    report = json.loads((DATA / "trtllm-throughput.json").read_text())
    del report["performance"]
    (tmp_path / "r.json").write_text(json.dumps(report))
    spec = file_metric(BENCHMARKS["trtllm-throughput"], None)
    with pytest.raises(MetricMissing, match="has no performance.system_output_throughput_tok_s"):
        read_file_metric(spec, tmp_path / "r.json")


def test_regex_takes_the_last_match_and_its_value_group(tmp_path) -> None:
    out = tmp_path / "out.log"
    out.write_text(
        "Decode 0. throughput: 1.0 token/s\nDecode.  median latency: 0.01231 s, median throughput:   649.90 token/s\n"
    )
    named = regex_metric(r"tps=median throughput:\s+(?P<value>[0-9.]+)", higher_is_better=True)
    assert read_regex_metric(named, out) == 649.9
    grouped = regex_metric(r"lat=latency: ([0-9.]+) s", higher_is_better=False)
    assert (grouped.direction, read_regex_metric(grouped, out)) == (LOWER, 0.01231)
    whole = regex_metric(r"n=[0-9]+\.[0-9]+(?= token/s$)", higher_is_better=True)
    assert read_regex_metric(whole, out) == 649.9


def test_regex_without_a_match_or_a_number_is_a_failed_run(tmp_path) -> None:
    out = tmp_path / "out.log"
    out.write_text("Avg latency: n/a seconds\n")
    with pytest.raises(MetricMissing, match="no match"):
        read_regex_metric(regex_metric("x=throughput: ([0-9.]+)", higher_is_better=True), out)
    with pytest.raises(MetricMissing, match="not a number"):
        read_regex_metric(regex_metric(r"x=Avg latency: (\S+)", higher_is_better=False), out)


@pytest.mark.parametrize(
    "spec, higher, problem",
    [
        ("no-equals", True, "NAME=REGEX"),
        ("bad name=x", True, "NAME=REGEX"),
        ("x=(", True, "not a regular expression"),
        ("x=y", None, "--higher-is-better or --lower-is-better"),
    ],
)
def test_bad_regex_metrics_are_refused(spec, higher, problem) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        regex_metric(spec, higher_is_better=higher)


@pytest.mark.parametrize(
    "argv, name",
    [
        (["vllm", "bench", "latency", "--model", "M"], "vllm-latency"),
        (["/usr/bin/vllm", "bench", "throughput"], "vllm-throughput"),
        (["vllm", "bench", "serve", "--save-result"], "vllm-serve"),
        (["numactl", "-N0", "python", "-m", "sglang.benchmark.one_batch"], "sglang-one-batch"),
        (["python3", "-m", "sglang.benchmark.offline_throughput"], "sglang-offline"),
        (["python", "-m", "sglang.bench_serving"], "sglang-serving"),
        (["trtllm-bench", "--model", "M", "throughput", "--tp", "2"], "trtllm-throughput"),
        (["vllm", "serve", "M"], None),
        (["trtllm-bench", "--model", "M", "latency"], None),
        (["python", "-m", "sglang.launch_server"], None),
        (["./bench.sh"], None),
    ],
)
def test_benchmarks_are_recognized_from_their_command_line(argv, name) -> None:
    found = recognize(argv)
    assert (found.name if found else None) == name
