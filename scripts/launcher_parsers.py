"""Run every plan topo-gate emits through the pinned launchers' own argument parsers and env readers.

The unit tests check emitted names against manifests extracted from the launchers' source; this checks
what the launchers *make* of them. Each plan's args are appended to a launch command and parsed by
vLLM 0.33.0 (``FlexibleArgumentParser`` + ``EngineArgs.add_cli_args`` / ``from_cli_args``, and every
``--compilation-config`` through ``CompilationConfig(**json)``) or SGLang 0.5.23 (``ServerArgs.add_cli_args``
+ ``parse_args``; resolving a ``ServerArgs`` needs a model and a GPU, so the namespace is checked
against ServerArgs' fields instead), and each env var is read back through the launcher's own module
(``vllm.envs``, ``sglang.srt.environ.envs``). The parsed value must be what the plan meant.

Then ``scripts/cmdline_agreement.py``: topo_gate.launchers.command.parse reads a corpus of command lines as
these parsers do, and the manifests' ``all_options`` tables are what the parsers register.

Plans: every plan with knobs from priced profiles -- the knob cases of tests/launchers/knob_cases.py
(price tables built so that each launcher emits each kind of knob it can emit), each with every
``--pattern`` option -- and the ``--fallback nccl`` plans. (A plan without knobs has nothing for a
parser to read: the example profiles under profiles/examples plan none, since their synthetic
evidence passes the trials' own admission, which refuses the fused kernels on SM 12.0.)
TensorRT-LLM's wheel is several GB: its YAML keys and env names are checked against the manifest
extracted from its source only.

Run by scripts/launcher_parsers.sh, in a venv holding both launchers (``VLLM_TARGET_DEVICE=cpu``).
Prints one line per plan and closes with ``N passed, N failed``; exits 1 on any failure.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from topo_gate.launchers import PLANNERS, LaunchPlan, plan_without_profile
from topo_gate.launchers.command.merge import split_flags
from topo_gate.launchers.knobs import manifest
from topo_gate.plugins.fields import FLAG_FIELDS, VLLM_COMPILATION_FLAG
from topo_gate.profile.schema import PATTERNS

ROOT = Path(__file__).resolve().parent.parent
PATTERN_OPTIONS = (PATTERNS, *((pattern,) for pattern in PATTERNS))
# Env vars a plan may emit that NCCL or torch read, not the launcher: there is no launcher module to
# read them back through.
LIBRARY_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_")

# What each flag topo-gate emits means (the field the parser fills, and its value): the table the
# plugins apply plans with, so this run checks it too. --compilation-config is checked key by key.
SGLANG_FLAGS = FLAG_FIELDS["sglang"]
VLLM_FLAGS = FLAG_FIELDS["vllm"]


def meant_env_value(launcher: str, name: str, text: str) -> Any:
    """The value a plan's env string stands for, by the variable's type in the launcher's manifest."""
    spec = manifest(launcher)["env"][name]
    kind = spec.get("type") or spec.get("kind")
    if kind in ("bool", "EnvBool"):
        return {"1": True, "0": False}[text]  # planners emit 1/0 only: vLLM reads bool(int(value))
    if kind in ("int", "EnvInt"):
        return int(text)
    return text


def same(parsed: Any, meant: Any) -> bool:
    """Equal, and a flag is a flag: ``True == 1`` must not pass (``8 == 8.0`` may: vLLM coerces it)."""
    return parsed == meant and isinstance(parsed, bool) == isinstance(meant, bool)


def plans() -> Iterator[tuple[str, int, LaunchPlan]]:
    """(label, TP size, plan) for every plan with knobs the knob cases and the synthetic PCIe profile
    produce, then each launcher's ``--fallback nccl`` plan."""
    sys.path.insert(0, str(ROOT / "tests" / "launchers"))
    from knob_cases import CASES

    for case in CASES:
        profile = case.profile()
        for patterns in PATTERN_OPTIONS:
            plan = case.plan(profile, patterns=patterns)
            if plan.args or plan.env or plan.config:
                yield f"case {case.name} tp{case.tp} --pattern {'+'.join(patterns)}", case.tp, plan
    for launcher in PLANNERS:
        yield "fallback nccl", 2, plan_without_profile(launcher, "profile unusable", fallback="nccl")


class VllmParser:
    """vLLM 0.33.0's own CLI parsing and env module."""

    def __init__(self) -> None:
        from vllm import envs
        from vllm.config.compilation import CompilationConfig
        from vllm.engine.arg_utils import EngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        self.envs, self.compilation_config, self.engine_args = envs, CompilationConfig, EngineArgs
        self.parser = EngineArgs.add_cli_args(FlexibleArgumentParser())

    def check(self, plan: LaunchPlan, tp: int) -> list[str]:
        problems: list[str] = []
        namespace = self.parser.parse_args(["--model", "served-model", "-tp", str(tp), *plan.args])
        engine = self.engine_args.from_cli_args(namespace)
        if engine.tensor_parallel_size != tp:
            problems.append(f"tensor_parallel_size parsed as {engine.tensor_parallel_size}, not {tp}")
        # Every field the flags stand for holds EngineArgs' own default unless the plan sets it.
        expected = {field: getattr(self.engine_args, field) for field, _ in VLLM_FLAGS.values()}
        for flag, value in split_flags(plan.args, "vllm"):
            if flag == VLLM_COMPILATION_FLAG:
                problems += self._compilation(json.loads(value), engine)
            elif flag in VLLM_FLAGS:
                field, meant = VLLM_FLAGS[flag]
                expected[field] = value if meant is None else meant
            else:
                problems.append(f"{flag}: no meaning recorded in VLLM_FLAGS")
        for field, meant in expected.items():
            if getattr(engine, field) != meant:
                problems.append(f"EngineArgs.{field} = {getattr(engine, field)!r}, the plan meant {meant!r}")
        problems += check_env(plan, "vllm", lambda name: self._env(name))
        return problems

    def _compilation(self, meant: dict[str, Any], engine: Any) -> list[str]:
        problems = []
        standalone = self.compilation_config(**meant)
        for key, value in meant["pass_config"].items():
            for source, config in (
                ("--compilation-config", engine.compilation_config),
                ("CompilationConfig", standalone),
            ):
                parsed = getattr(config.pass_config, key)
                if not same(parsed, value):
                    problems.append(f"{source}: pass_config.{key} = {parsed!r}, the plan meant {value!r}")
        return problems

    def _env(self, name: str) -> Any:
        if name not in self.envs.environment_variables:
            raise KeyError(f"{name} is not a vllm.envs variable")
        return getattr(self.envs, name)


class SglangParser:
    """SGLang 0.5.23's own CLI parsing and env module."""

    def __init__(self) -> None:
        import argparse

        import msgspec
        from sglang.srt.environ import envs
        from sglang.srt.server_args import ServerArgs

        self.envs = envs
        self.parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(self.parser)
        self.fields = {field.name for field in msgspec.structs.fields(ServerArgs)}  # a msgspec Struct

    def check(self, plan: LaunchPlan, tp: int) -> list[str]:
        problems: list[str] = []
        namespace = self.parser.parse_args(["--model-path", "served-model", "--tp-size", str(tp), *plan.args])
        if namespace.tp_size != tp:
            problems.append(f"tp_size parsed as {namespace.tp_size}, not {tp}")
        expected = {field: self.parser.get_default(field) for field, _ in SGLANG_FLAGS.values()}
        for flag, value in split_flags(plan.args, "sglang"):
            if flag not in SGLANG_FLAGS:
                problems.append(f"{flag}: no meaning recorded in SGLANG_FLAGS")
                continue
            field, meant = SGLANG_FLAGS[flag]
            expected[field] = value if meant is None else meant
        for field, meant in expected.items():
            if field not in self.fields:
                problems.append(f"{field} is not a ServerArgs field: from_cli_args would drop it")
            if getattr(namespace, field) != meant:
                problems.append(
                    f"ServerArgs {field} = {getattr(namespace, field)!r}, the plan meant {meant!r}"
                )
        problems += check_env(plan, "sglang", lambda name: getattr(self.envs, name).get())
        return problems


def check_env(plan: LaunchPlan, launcher: str, read: Callable[[str], Any]) -> list[str]:
    """Set the plan's env, read every variable back through the launcher's module, restore the env."""
    problems = []
    saved = {name: os.environ.get(name) for name in plan.env}
    os.environ.update(plan.env)
    try:
        for name, text in plan.env.items():
            if name.startswith(LIBRARY_ENV_PREFIXES):
                continue
            try:
                meant = meant_env_value(launcher, name, text)
                parsed = read(name)
            except (KeyError, ValueError) as error:  # no meaning, or the launcher cannot read it
                problems.append(f"{name}={text}: {type(error).__name__}: {error}")
                continue
            if not same(parsed, meant):
                problems.append(f"{name}={text} read as {parsed!r}, the plan meant {meant!r}")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return problems


def check_trtllm(plan: LaunchPlan, tp: int) -> list[str]:
    """Against the manifest only (TensorRT-LLM's wheel is several GB and needs CUDA to import)."""
    known = manifest("trtllm")
    problems = [f"unexpected args {plan.args}"] if plan.args else []
    for key, value in plan.config.items():
        if key not in known["config_keys"] or value not in known["config_keys"][key]["choices"]:
            problems.append(f"config {key}: {value} is not a TensorRT-LLM option value")
    problems += [
        f"{name} is not read by TensorRT-LLM"
        for name in plan.env
        if name not in known["env"] and not name.startswith(LIBRARY_ENV_PREFIXES)
    ]
    problems += [
        f"{name}={text} is not a byte count"
        for name, text in plan.env.items()
        if name.endswith("_WORKSPACE_SIZE") and not text.isdigit()
    ]
    return problems


def main() -> int:
    os.environ.pop("TOPO_GATE_PROFILE", None)  # the plugins must stay idle while the parsers load
    checkers: dict[str, Callable[[LaunchPlan, int], list[str]]] = {
        "vllm": VllmParser().check,
        "sglang": SglangParser().check,
        "trtllm": check_trtllm,
    }
    passed = failed = 0
    for label, tp, plan in plans():
        try:
            problems = checkers[plan.launcher](plan, tp)
        except BaseException as error:  # noqa: BLE001 -- a parser rejecting a plan exits via SystemExit
            problems = [f"{type(error).__name__}: {error}", *traceback.format_exc().splitlines()[-3:]]
        kind = "fallback" if plan.fallback else "plan"
        summary = f"{' '.join(plan.args)} {' '.join(f'{k}={v}' for k, v in plan.env.items())} {dict(plan.config) or ''}"
        print(
            f"{'FAIL' if problems else 'ok  '} {plan.launcher:<6} {kind:<8} {label}: {summary.strip() or '(nothing)'}"
        )
        for problem in problems:
            print(f"       {problem}")
        passed, failed = (passed, failed + 1) if problems else (passed + 1, failed)
    # Command lines as the launchers read them (abbreviations, _ spellings, config files): cmdline.py.
    sys.path.insert(0, str(ROOT / "scripts"))
    import cmdline_agreement

    agreed, disagreed = cmdline_agreement.main()
    passed, failed = passed + agreed, failed + disagreed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
