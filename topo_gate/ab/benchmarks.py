"""The launchers' own benchmark commands: which one a command line runs, where it writes its result,
and the metrics that result holds, each with the direction that is better.

Read from the pinned releases (vLLM 0.33.0, SGLang 0.5.23) and, for TensorRT-LLM, from the
NVIDIA/TensorRT-LLM sources the search index holds (the commits are named below; the pinned
commit's own copy of these files could not be read, see docs/ab.md):

- ``vllm bench latency``: ``--output-json`` (vllm/benchmarks/latency.py:59-64), one JSON object
  ``{"model_id", "avg_latency", "latencies", "percentiles": {"10": .., "50": .., "99": ..}}``
  (latency.py:171-179; percentile keys are the ints 10/25/50/75/90/99, strings after json.dump).
- ``vllm bench throughput``: ``--output-json`` (throughput.py:857-862), one object ``{"model_id",
  "elapsed_time", "num_requests", "total_num_tokens", "requests_per_second", "tokens_per_second"}``
  (throughput.py:1117-1127).
- ``vllm bench serve`` (a client of ``vllm serve``): ``--save-result`` with ``--result-filename``
  (serve.py:1792-1830, path built by serve.py:1594-1635), one object written by serve.py:2448-2457:
  ``duration``, ``request_throughput``, ``output_throughput``, ``total_token_throughput``
  (serve.py:1318-1340) and per selected metric ``mean_/median_/std_/p<P>_{ttft,tpot,itl,e2el}_ms``
  (serve.py:1398-1432; default percentile ``99``, serve.py:1859-1866).
- ``python -m sglang.benchmark.one_batch``: ``--result-filename`` (sglang/benchmark/one_batch.py:259-261,
  default ``result.jsonl`` at :231), JSON lines *appended* per (batch, input, output) point
  (one_batch.py:1003-1007), each ``{"run_name", "batch_size", "input_len", "output_len",
  "prefill_latency", "prefill_throughput", "median_decode_latency", "median_decode_throughput",
  "total_latency", "overall_throughput"}`` (one_batch.py:778-888).
- ``python -m sglang.benchmark.offline_throughput``: ``--result-filename`` (offline_throughput.py:71-73),
  one JSON line appended (offline_throughput.py:508-510) with ``total_latency``,
  ``request_throughput``, ``input_throughput``, ``output_throughput``, ``total_throughput``
  (offline_throughput.py:238-326).
- ``python -m sglang.benchmark.serving`` / ``sglang.bench_serving`` (a client of the server):
  ``--output-file`` (serving.py:2490), one JSON line appended (serving.py:1961-1966) with
  ``request_throughput``, ``input_throughput``, ``output_throughput``, ``total_throughput`` and
  ``mean_/median_/std_/p90_/p95_/p99_`` of ``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_latency_ms``
  (serving.py:1855-1910).
- ``trtllm-bench ... throughput``: ``--report_json`` and ``--tp`` (tensorrt_llm/bench/benchmark/throughput.py
  at 000a01de66f0eab4ab05640711f0253f50f5209c, its ``throughput_command`` options), the object of
  ``ReportUtility.get_statistics_dict`` (tensorrt_llm/bench/dataclasses/reporting.py at
  0249976575050d2c624a5f285683c66de311a3b7): ``performance.{system_output_throughput_tok_s,
  system_total_throughput_tok_s, request_throughput_req_s, output_throughput_per_user_tok_s,
  output_throughput_per_gpu_tok_s, total_latency_ms, avg_request_latency_ms}`` and with
  ``--streaming`` ``streaming_metrics.{avg_ttft_ms, avg_tpot_ms, token_output_speed_tok_s}``.
  ``trtllm-bench latency`` is not supported: at that commit it takes no ``--extra_llm_api_options``
  (benchmark/low_latency.py), so a plan's ``allreduce_strategy`` cannot reach it.

Where ``ab`` puts the result: a fresh path per run, so runs never overwrite each other and a file a
run did not write is never read from an earlier one. When the command *is* the benchmark, ``ab``
appends the result flag with that path (argparse and click keep the last occurrence, so a path the
user gave is overridden); SGLang appends to the file, so the fresh path also keeps a run's lines
apart. Every run also gets the path in ``TOPO_GATE_AB_RESULT``: a wrapper script (the client
benchmarks, which must start the server themselves) passes it to the client's result flag.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"
#: Every run's result path, for wrapper scripts (the client benchmarks).
RESULT_ENV = "TOPO_GATE_AB_RESULT"


@dataclass(frozen=True)
class FileMetric:
    """One number in a benchmark's result: where it is (keys from the top) and which way is better."""

    name: str
    path: tuple[str, ...]
    direction: str
    unit: str


@dataclass(frozen=True)
class Benchmark:
    """A launcher's benchmark command. ``client``: it talks to a server it does not start, so the
    plan must reach the server through a wrapper script, never the client's own command line."""

    name: str
    launcher: str
    title: str
    result_flag: str
    jsonl: bool
    metrics: tuple[FileMetric, ...]
    default_metric: str
    client: bool = False
    tp_flags: tuple[str, ...] = ()  # the benchmark's TP flag where it is not the launcher server's

    def metric(self, name: str) -> FileMetric | None:
        return next((m for m in self.metrics if m.name == name), None)

    @property
    def metric_names(self) -> list[str]:
        return [m.name for m in self.metrics]


def _top(direction: str, unit: str, *names: str) -> tuple[FileMetric, ...]:
    return tuple(FileMetric(name, (name,), direction, unit) for name in names)


def _under(key: str, direction: str, unit: str, *names: str) -> tuple[FileMetric, ...]:
    return tuple(FileMetric(name, (key, name), direction, unit) for name in names)


def _percentile_latencies(*percentiles: str) -> tuple[FileMetric, ...]:
    return tuple(FileMetric(f"p{p}_latency", ("percentiles", p), LOWER, "s") for p in percentiles)


def _serving_latencies(stats: Sequence[str], quantities: Sequence[str]) -> tuple[FileMetric, ...]:
    return tuple(FileMetric(f"{s}_{q}", (f"{s}_{q}",), LOWER, "ms") for q in quantities for s in stats)


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "vllm-latency",
            "vllm",
            "vllm bench latency",
            "--output-json",
            False,
            (*_top(LOWER, "s", "avg_latency"), *_percentile_latencies("10", "25", "50", "75", "90", "99")),
            "avg_latency",
        ),
        Benchmark(
            "vllm-throughput",
            "vllm",
            "vllm bench throughput",
            "--output-json",
            False,
            (
                *_top(HIGHER, "tok/s", "tokens_per_second"),
                *_top(HIGHER, "req/s", "requests_per_second"),
                *_top(LOWER, "s", "elapsed_time"),
            ),
            "tokens_per_second",
        ),
        Benchmark(
            "vllm-serve",
            "vllm",
            "vllm bench serve",
            "--result-filename",
            False,
            (
                *_top(HIGHER, "tok/s", "output_throughput", "total_token_throughput"),
                *_top(HIGHER, "req/s", "request_throughput"),
                *_serving_latencies(("mean", "median", "p99"), ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")),
            ),
            "output_throughput",
            client=True,
        ),
        Benchmark(
            "sglang-one-batch",
            "sglang",
            "python -m sglang.benchmark.one_batch",
            "--result-filename",
            True,
            (
                *_top(
                    HIGHER, "tok/s", "median_decode_throughput", "prefill_throughput", "overall_throughput"
                ),
                *_top(LOWER, "s", "median_decode_latency", "prefill_latency", "total_latency"),
            ),
            "median_decode_throughput",
        ),
        Benchmark(
            "sglang-offline",
            "sglang",
            "python -m sglang.benchmark.offline_throughput",
            "--result-filename",
            True,
            (
                *_top(HIGHER, "tok/s", "output_throughput", "total_throughput", "input_throughput"),
                *_top(HIGHER, "req/s", "request_throughput"),
                *_top(LOWER, "s", "total_latency"),
            ),
            "output_throughput",
        ),
        Benchmark(
            "sglang-serving",
            "sglang",
            "python -m sglang.benchmark.serving",
            "--output-file",
            True,
            (
                *_top(HIGHER, "tok/s", "output_throughput", "total_throughput", "input_throughput"),
                *_top(HIGHER, "req/s", "request_throughput"),
                *_serving_latencies(
                    ("mean", "median", "p99"), ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms")
                ),
            ),
            "output_throughput",
            client=True,
        ),
        Benchmark(
            "trtllm-throughput",
            "trtllm",
            "trtllm-bench throughput",
            "--report_json",
            False,
            (
                *_under(
                    "performance",
                    HIGHER,
                    "tok/s",
                    "system_output_throughput_tok_s",
                    "system_total_throughput_tok_s",
                    "output_throughput_per_user_tok_s",
                    "output_throughput_per_gpu_tok_s",
                ),
                *_under("performance", HIGHER, "req/s", "request_throughput_req_s"),
                *_under("performance", LOWER, "ms", "total_latency_ms", "avg_request_latency_ms"),
                *_under("streaming_metrics", LOWER, "ms", "avg_ttft_ms", "avg_tpot_ms"),
                *_under("streaming_metrics", HIGHER, "tok/s", "token_output_speed_tok_s"),
            ),
            "system_output_throughput_tok_s",
            tp_flags=("--tp",),
        ),
    )
}

# ``python -m MODULE`` entry points of SGLang 0.5.23 (sglang/benchmark/*.py; bench_serving.py is the
# deprecated alias that re-exports benchmark.serving).
_SGLANG_MODULES = {
    "sglang.benchmark.one_batch": "sglang-one-batch",
    "sglang.benchmark.offline_throughput": "sglang-offline",
    "sglang.benchmark.serving": "sglang-serving",
    "sglang.bench_serving": "sglang-serving",
}
_VLLM_SUBCOMMANDS = {"latency": "vllm-latency", "throughput": "vllm-throughput", "serve": "vllm-serve"}


def recognize(argv: Sequence[str]) -> Benchmark | None:
    """The benchmark ``argv`` runs itself (not through a script), or None.

    Wrappers in front (``env A=B``, ``numactl ...``) are skipped by scanning every token, as
    ``launchers.command.parse`` does for the servers.
    """
    for index, token in enumerate(argv):
        name = os.path.basename(token)
        following = argv[index + 1] if index + 1 < len(argv) else None
        if name == "vllm" and following == "bench" and index + 2 < len(argv):
            found = _VLLM_SUBCOMMANDS.get(argv[index + 2])
            if found:
                return BENCHMARKS[found]
        if token == "-m" and following in _SGLANG_MODULES:
            return BENCHMARKS[_SGLANG_MODULES[following]]
        if name == "trtllm-bench" and "throughput" in argv[index + 1 :]:
            return BENCHMARKS["trtllm-throughput"]
    return None


def tp_from_flags(argv: Sequence[str], flags: Sequence[str]) -> int | None:
    """The value of the last of ``flags`` in ``argv`` (``--tp 2`` or ``--tp=2``), as click and argparse
    keep the last; None if none is there. ``ValueError`` for a value that is not a TP size."""
    found = None
    for index, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if name not in flags:
            continue
        text = value if eq else (argv[index + 1] if index + 1 < len(argv) else "")
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{name} {text!r} is not a TP size")
        found = int(text)
    return found
