#!/usr/bin/env python3
"""Stands in for a launcher's benchmark command in the ``topo-gate ab`` tests.

It decides which arm it is from what the arm actually changes (a plan's env var, a flag on its
command line, the ``allreduce_strategy`` in the ``--extra_llm_api_options`` file it was given),
never from being told, and writes the benchmark's real result format: a fixture of this folder
(README.md names the launcher source of each) with the scenario's number put at the metric's place.

Driven by the JSON scenario named by ``FAKE_BENCH_SCENARIO``:

- ``arms``: ordered matchers ``{"arm": NAME, "env": {K: V}, "args": [...], "config": {...}}``; the
  first whose every item is present names the arm, else it is ``default``;
- ``values``: per arm, the number of its n-th call (warm-up included), so results are exact;
- ``exit`` / ``omit`` / ``hang``: per arm, calls that exit with a status, write the result without
  the metric, or sleep until killed (after writing ``pidfile``);
- ``template``, ``set`` (the key path of the metric), ``result_flag`` (else ``TOPO_GATE_AB_RESULT``),
  ``stdout`` (a line printed with ``{value}``), ``stderr`` (lines printed on stderr by every call),
  ``state`` (call counts and what each call saw).
"""

import json
import os
import sys
import time


def main() -> int:
    with open(os.environ["FAKE_BENCH_SCENARIO"]) as handle:
        scenario = json.load(handle)
    argv = sys.argv[1:]
    arm = next((m["arm"] for m in scenario.get("arms", []) if _matches(m, argv, scenario)), "default")
    state = _load(scenario["state"])
    call = state["counts"].get(arm, 0)
    state["counts"][arm] = call + 1
    state["seen"].append({"arm": arm, "call": call, "argv": argv, "env": _interesting_env()})
    with open(scenario["state"], "w") as handle:
        json.dump(state, handle)
    if call in scenario.get("hang", {}).get(arm, []):
        with open(scenario["pidfile"], "w") as handle:
            handle.write(str(os.getpid()))
        while True:
            time.sleep(1)
    for line in scenario.get("stderr", []):
        print(line, file=sys.stderr)
    status = scenario.get("exit", {}).get(arm, {}).get(str(call))
    if status is not None:
        print(f"fake benchmark: {arm} call {call} fails with status {status}", file=sys.stderr)
        return int(status)
    value = scenario["values"][arm][call]
    omit = call in scenario.get("omit", {}).get(arm, [])
    _write_result(scenario, argv, value, omit)
    if scenario.get("stdout") and not omit:
        print(scenario["stdout"].format(value=value))
    return 0


def _matches(matcher: dict, argv: list, scenario: dict) -> bool:
    env_ok = all(os.environ.get(k) == v for k, v in matcher.get("env", {}).items())
    args_ok = all(arg in argv for arg in matcher.get("args", []))
    config = matcher.get("config")
    return env_ok and args_ok and (config is None or _config_has(config, argv, scenario))


def _config_has(config: dict, argv: list, scenario: dict) -> bool:
    import yaml

    path = _last_value(argv, scenario.get("config_flag", "--extra_llm_api_options"))
    if path is None:
        return False
    with open(path) as handle:
        options = yaml.safe_load(handle) or {}
    return all(options.get(k) == v for k, v in config.items())


def _last_value(argv: list, flag: str):
    found = None
    for index, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if name == flag:
            found = value if eq else (argv[index + 1] if index + 1 < len(argv) else None)
    return found


def _write_result(scenario: dict, argv: list, value: float, omit: bool) -> None:
    flag = scenario.get("result_flag")
    path = _last_value(argv, flag) if flag else os.environ.get("TOPO_GATE_AB_RESULT")
    if path is None or "template" not in scenario:
        return
    with open(scenario["template"]) as handle:
        text = handle.read()
    jsonl = scenario["template"].endswith(".jsonl")
    record = json.loads(text.splitlines()[0] if jsonl else text)
    where = record
    for key in scenario["set"][:-1]:
        where = where[key]
    if omit:
        del where[scenario["set"][-1]]
    else:
        where[scenario["set"][-1]] = value
    with open(path, "a" if jsonl else "w") as handle:
        handle.write(json.dumps(record) + ("\n" if jsonl else ""))


def _interesting_env() -> dict:
    prefixes = ("VLLM_", "SGLANG_", "TOPO_GATE_", "NCCL_")
    return {k: v for k, v in os.environ.items() if k.startswith(prefixes)}


def _load(path: str) -> dict:
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {"counts": {}, "seen": []}


if __name__ == "__main__":
    sys.exit(main())
