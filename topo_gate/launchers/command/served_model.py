"""The served model a launcher's command line names, as the launcher reads it, and its shape.

A plan is priced per step of the served model: its hidden size turns the launchers' token limits into
message sizes, its layer count sizes the step, and some launchers route by its architecture. ``exec``
and ``ab`` read it from CMD, as they read the TP size (``cmdline``):

- vLLM: ``vllm serve M``'s positional (vllm/entrypoints/cli/serve.py:55-57 of 0.33.0 serves it,
  entrypoints/common/cli_args.py:438-443 declares it), where vLLM also moves ``--model M`` first
  (utils/argparse_utils.py:324-353), else ``--model`` from a ``--config FILE`` (inlined as
  ``cmdline_forms`` does); ``python -m vllm.entrypoints...`` and
  ``vllm bench latency|throughput`` read ``--model`` alone (``EngineArgs.from_cli_args``); a line
  naming none serves ``ModelConfig.model``'s default (vllm/config/model.py:155).
- SGLang: ``--model-path`` and its alias ``--model`` (srt/arg_groups/fields/model.py:51-57 of
  0.5.23); ``sglang serve M`` and ``--config FILE`` as ``cmdline_forms`` reads them.
- TensorRT-LLM: ``trtllm-serve``'s positional model, which a ``model`` key of its
  ``--extra_llm_api_options`` file overrides (``llm_args | llm_args_dict``,
  tensorrt_llm/llmapi/llm_args.py ``update_llm_args_with_extra_dict``); ``trtllm-bench``'s group
  options ``--model``/``-m`` and ``--model_path`` (the local checkpoint; TensorRT-LLM's trtllm-bench
  reference, "Common Options").

The name is then a local folder holding a ``config.json`` (read through the guarded reader: hidden
size, layer count and ``architectures[0]``; ``text_config``'s sizes for a multimodal model, as
``topo_gate.models`` takes them), else a preset (``models.lookup_model``). Anything else cannot be
told: ``problem`` says why, and the plan uses the profile's hidden size.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from topo_gate.launchers.command import forms
from topo_gate.launchers.command.parse import (
    CmdlineError,
    Entry,
    ParsedCommand,
    find_entry,
    options_file,
    parse,
    read,
)
from topo_gate.models import UnknownModel, lookup_model

#: vLLM's ``ModelConfig.model`` default (vllm/config/model.py:155, 0.33.0): served when no model is named.
VLLM_DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
#: A model's ``config.json`` is a few kB (a multimodal one tens of kB); far above any real one.
CONFIG_JSON_LIMIT = 1 << 20
#: No released model comes near these; a larger number is a broken config, not a model.
MAX_HIDDEN = 1 << 20
MAX_LAYERS = 1 << 12
#: trtllm-bench's group options naming the model (name; local checkpoint).
TRTLLM_BENCH_MODEL = ("--model", "-m")
TRTLLM_BENCH_PATH = "--model_path"


@dataclass(frozen=True)
class ServedModel:
    """The model CMD serves. ``name``: as CMD names it (None: it names none). ``preset``: the preset it
    is (``topo_gate.models``); else ``hidden``/``layers``/``architecture`` from its ``config.json``
    (``config``: that file). ``problem``: why its shape cannot be told (all else None then)."""

    name: str | None
    preset: str | None = None
    hidden: int | None = None
    layers: int | None = None
    architecture: str | None = None
    config: str | None = None
    problem: str | None = None

    def describe(self) -> str:
        """How a status line names it: ``Qwen/Qwen3-32B (preset qwen3-32b)``."""
        if self.preset is not None:
            return f"{self.name} (preset {self.preset})"
        return f"{self.name} ({self.config}: hidden {self.hidden}, {self.layers} layers, {self.architecture})"


def read_served_model(cmd: Sequence[str], launcher: str) -> ServedModel:
    """The model ``cmd`` serves under ``launcher`` and its shape (module docstring); never raises."""
    try:
        parsed = read(launcher, cmd)
    except CmdlineError as error:
        return ServedModel(None, problem=f"the served model cannot be read from CMD: {error}")
    return served_model_of(parsed)


def served_model_of(parsed: ParsedCommand) -> ServedModel:
    """``read_served_model`` of a line already read; never raises."""
    try:
        name, path = _named(parsed)
    except CmdlineError as error:
        return ServedModel(None, problem=f"the served model cannot be read from CMD: {error}")
    if name is None and path is None:
        return ServedModel(None, problem="CMD names no served model")
    folder = path or name
    assert folder is not None
    if os.path.isdir(folder) and os.path.exists(os.path.join(folder, "config.json")):
        return _from_config(name or folder, os.path.join(folder, "config.json"))
    try:
        preset = lookup_model(name or os.path.basename(os.path.normpath(folder)))
    except UnknownModel:
        return ServedModel(
            name,
            problem=f"the served model {name or folder!r} is no preset and no local folder with a config.json",
        )
    return ServedModel(name, preset.name, preset.hidden, preset.layers, preset.architecture)


def _named(parsed: ParsedCommand) -> tuple[str | None, str | None]:
    """(the model's name, a local checkpoint folder named apart from it) as the launcher reads the line."""
    launcher = parsed.entry.launcher
    entry = find_entry(parsed.argv)
    own = entry if entry is not None and entry.launcher == launcher else None
    if launcher == "vllm":
        return _vllm(parsed, own), None
    if launcher == "sglang":
        return _last(parsed.args.options.get("--model-path")), None
    return _trtllm(parsed, own)


def _vllm(parsed: ParsedCommand, entry: Entry | None) -> str | None:
    bench = _vllm_bench(parsed.argv)
    if bench is not None:  # the engine's arguments are the tail after the subcommand: a line of their own
        return _last(parse("vllm", bench).options.get("--model")) or VLLM_DEFAULT_MODEL
    given = _last(parsed.args.options.get("--model"))
    if entry is None:
        return given  # behind a wrapper: only what the line itself says
    if entry.form == "serve":
        given = parsed.args.positionals.get("model_tag") or given
    return given or VLLM_DEFAULT_MODEL


def _vllm_bench(cmd: Sequence[str]) -> tuple[str, ...] | None:
    """The arguments of ``vllm bench latency|throughput``: an engine's, read as ``--model`` alone."""
    for index, token in enumerate(cmd[:-2]):
        if os.path.basename(token) == "vllm" and cmd[index + 1] == "bench":
            if cmd[index + 2] in ("latency", "throughput"):
                return tuple(cmd[index + 3 :])
    return None


def _trtllm(parsed: ParsedCommand, entry: Entry | None) -> tuple[str | None, str | None]:
    cmd = parsed.argv
    at = next((i for i, token in enumerate(cmd) if os.path.basename(token) == "trtllm-bench"), None)
    if at is not None:
        options = forms.trtllm_options(_trtllm_bench_group(cmd[at + 1 :]))
        given = {option.name: option.value for option in options}
        return given.get("--model"), given.get(TRTLLM_BENCH_PATH)
    if entry is None:
        return None, None
    clicks = parsed.clicks  # read from the launcher's own entry: ``entry.args``
    model = _trtllm_positional(entry.args, clicks)
    path = next((o.value for o in reversed(clicks) if o.name == forms.TRTLLM_OPTIONS), None)
    if path is not None:
        extra = options_file(path).get("model")
        if isinstance(extra, str):
            model = extra
    return model, None


def _trtllm_bench_group(args: Sequence[str]) -> list[str]:
    """trtllm-bench's group options (before its subcommand), ``-m`` spelled ``--model``."""
    group: list[str] = []
    index = 0
    while index < len(args) and args[index].startswith("-"):
        token = "--model" if args[index] == "-m" else args[index]
        group.append(token)
        if "=" not in token and index + 1 < len(args):
            group.append(args[index + 1])
            index += 1
        index += 1
    return group


def _trtllm_positional(args: Sequence[str], options: Sequence[forms.ClickOption]) -> str | None:
    """trtllm-serve's first positional: the token no option takes (after the subcommand, if named)."""
    # An option's value token and, where the value is apart, the option's own token before it.
    taken = {o.at for o in options} | {o.at - 1 for o in options if not o.attached and o.value is not None}
    # serve is trtllm-serve's default subcommand, named or not.
    start = 1 if args and args[0] == "serve" else 0
    for index in range(start, len(args)):
        if args[index] == "--":
            return args[index + 1] if index + 1 < len(args) else None
        if index not in taken and not args[index].startswith("--"):
            return args[index]
    return None


def _last(values: tuple[str | None, ...] | None) -> str | None:
    return values[-1] if values else None


def _from_config(name: str, path: str) -> ServedModel:
    """The shape in a model's ``config.json``: a malformed one is a ``problem``, never a crash."""
    from topo_gate._inputs import InputError, RegularFile, parse_json

    try:
        with RegularFile(path, "a model's config.json") as source:
            data = parse_json(source.read_text(CONFIG_JSON_LIMIT))
        hidden, layers, architecture = _shape(data)
    except InputError as error:
        return ServedModel(name, problem=f"{path}: {error}")
    return ServedModel(name, None, hidden, layers, architecture, config=path)


def _shape(data: Any) -> tuple[int, int, str]:
    from topo_gate._inputs import InputError

    if not isinstance(data, dict):
        raise InputError("not a JSON object of model settings")
    text = data.get("text_config")
    sizes = text if isinstance(text, dict) and "hidden_size" in text else data
    hidden, layers = sizes.get("hidden_size"), sizes.get("num_hidden_layers")
    for key, value, most in (("hidden_size", hidden, MAX_HIDDEN), ("num_hidden_layers", layers, MAX_LAYERS)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise InputError(f"{value!r} is not a model's {key} (1..{most})", key)
    architectures = data.get("architectures")
    if not (isinstance(architectures, list) and architectures and isinstance(architectures[0], str)):
        raise InputError("no architecture named (a list of class names)", "architectures")
    assert isinstance(hidden, int) and isinstance(layers, int)
    return hidden, layers, architectures[0]
