"""What each pinned launcher does to its command line before its option parser sees it.

- vLLM 0.33.0, ``FlexibleArgumentParser.parse_args`` (vllm/utils/argparse_utils.py:313-502): ``serve
  --model M`` moves M to the front (324-369); ``--config FILE`` inlines the YAML file's keys as options
  before the command line's own (371-372, 516-673); every ``--name`` has ``_`` turned into ``-`` up to
  its first ``.`` (374-394, so ``--compilation_config`` is ``--compilation-config``); ``-O3`` / ``-O 3``
  become ``--optimization-level 3`` (395-406); ``-x.a.b=v`` dotted options are collected per ``-x`` into
  one JSON object each and appended after everything else (441-500), so they override an explicit
  ``-x JSON``.
- SGLang 0.5.23: ``sglang serve`` drops ``--model-type X`` and turns a leading positional into
  ``--model-path`` (sglang/cli/serve.py:30-66); ``prepare_server_args`` inlines ``--config FILE`` before
  the command line (srt/server_args.py:681-689, srt/utils/server_args_config_parser.py:75-244).
- TensorRT-LLM ``trtllm-serve`` is click (tensorrt_llm/commands/serve.py, stored at 00209af): exact
  option names only, ``--name=value``, the last value winning; ``serve`` is the default subcommand
  (``DefaultGroup``).

Files a command line names are read through ``topo_gate._inputs`` (no FIFO hang, no device read, a
size cap) and parsed by the profile YAML loader (no aliases, no merge keys, capped nesting).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any, NamedTuple

from topo_gate.launchers.command.options import CmdlineError, CmdlineFileError, Table

#: Launcher config and options files are a few kB; this is far above any real one.
CONFIG_LIMIT = 1 << 20

_UNDERSCORED = re.compile(r"(?<=--)[^\.]*")  # argparse_utils.py:379
_MODEL = re.compile(r"^--model(=.+|$)")
_SERVED_NAME = re.compile(r"^--served[-_]model[-_]name(=.+|$)")
_CONFIG = re.compile(r"^--config(=.+|$)")
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_HUMAN_IN_JSON = re.compile(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b")
_JSON_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')


def read_config(path: str, what: str) -> Any:
    """A YAML file a launcher reads, as plain data (None when empty); ``CmdlineFileError`` otherwise."""
    from topo_gate._inputs import InputError, read_text
    from topo_gate.profile.errors import ProfileUnreadable
    from topo_gate.profile.yaml_format import parse_yaml

    try:
        return parse_yaml(read_text(path, limit=CONFIG_LIMIT, what=what), allow_empty=True)
    except (InputError, ProfileUnreadable) as error:
        raise CmdlineFileError(path, str(error)) from None


# ----------------------------------------------------------------------------------------------- vLLM


class VllmArgs(NamedTuple):
    """What vLLM's serve parser is handed, and the ``-x`` of each dotted group (in their order)."""

    args: list[str]
    dotted: tuple[str, ...]


def vllm_args(form: str, args: Sequence[str], table: Table) -> VllmArgs:
    """``FlexibleArgumentParser.parse_args``'s rewriting of ``args`` (``serve ...`` or the flat form)."""
    tokens = list(args)
    if tokens[:1] == ["serve"]:
        tokens = _vllm_model_first(tokens)
    if "--config" in tokens:
        # In `vllm serve` the top-level parser inlines the file: it has no --no-* options (657).
        tokens = _vllm_inline_config(tokens, () if form == "serve" else table.by_option.keys())
    processed = _vllm_spelling(tokens)
    processed, dotted = _vllm_dotted(processed)
    # `vllm serve`: the top-level parser hands everything after `serve` to the serve subparser.
    return VllmArgs(processed[1:] if form == "serve" else processed, dotted)


def _vllm_model_first(tokens: list[str]) -> list[str]:
    at = next((i for i, token in enumerate(tokens) if _MODEL.match(token)), None)
    if at is not None:
        if tokens[at] == "--model":
            if at + 1 >= len(tokens):
                raise CmdlineError("--model needs a value")
            model, rest = tokens[at + 1], at + 2
        else:
            model, rest = tokens[at].removeprefix("--model="), at + 1
        tokens = ["serve", model, *tokens[1:at], *tokens[rest:]]
    if (
        len(tokens) > 1
        and tokens[1].startswith("-")
        and not any(_CONFIG.match(token) for token in tokens)
        and any(_SERVED_NAME.match(token) for token in tokens)
    ):
        raise CmdlineError("vllm serve: the model must be the first positional argument")
    return tokens


def _vllm_inline_config(tokens: list[str], known: Any) -> list[str]:
    """``_pull_args_from_config`` (argparse_utils.py:551-604) with ``load_config_file`` (606-673)."""
    if tokens.count("--config") > 1:
        raise CmdlineError("more than one --config file given")
    at = tokens.index("--config")
    if at == len(tokens) - 1:
        raise CmdlineError("--config needs a file")
    path = tokens[at + 1]
    if path.split(".")[-1] not in ("yaml", "yml"):
        raise CmdlineFileError(path, "a vLLM config file must be .yaml or .yml")
    config = read_config(path, "a vLLM config file")
    if not isinstance(config, dict):
        raise CmdlineFileError(path, "not a YAML mapping of vLLM options")
    inlined: list[str] = []
    for key, value in config.items():
        if not isinstance(key, str):
            raise CmdlineFileError(path, f"key {key!r} is not an option name")
        if isinstance(value, bool):
            if value:
                inlined.append(f"--{key}")
            elif f"--no-{key}" in known:
                inlined.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                inlined += [f"--{key}", *(str(item) for item in value)]
        elif isinstance(value, dict):
            inlined += [f"--{key}", json.dumps(value)]
        else:
            inlined += [f"--{key}", str(value)]
    rest = tokens[:at] + tokens[at + 2 :]
    if tokens[0].startswith("-"):
        return inlined + rest
    if tokens[0] == "serve":
        model_in_cli = len(tokens) > 1 and not tokens[1].startswith("-")
        if not model_in_cli and "--model" not in inlined:
            raise CmdlineError("vllm serve: no model given, on the command line or in --config")
        head = 2 if model_in_cli else 1
        return rest[:head] + inlined + rest[head:]
    return rest[:1] + inlined + rest[1:]


def _vllm_spelling(tokens: list[str]) -> list[str]:
    processed: list[str] = []
    for index, token in enumerate(tokens):
        if token.startswith("--help="):
            processed.append("--help")
        elif token.startswith("--"):
            key, eq, value = token.partition("=")
            key = _UNDERSCORED.sub(lambda m: m.group(0).replace("_", "-"), key, count=1)
            processed.append(f"{key}{eq}{value}")
        elif token.startswith("-O") and token != "-O":
            processed += ["--optimization-level", token[3:] if token[2] == "=" else token[2:]]
        elif token == "-O" and index + 1 < len(tokens) and tokens[index + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(token)
    return processed


def _vllm_dotted(processed: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Dotted options merged per ``-x`` and appended as ``-x JSON`` (argparse_utils.py:441-500)."""
    delete: set[int] = set()
    groups: defaultdict[str, dict[str, Any]] = defaultdict(dict)
    for index, token in enumerate(processed):
        if index in delete or (token.startswith("--") and "." not in token):
            continue
        if not (token.startswith("-") and "." in token):
            continue
        if "=" in token:
            token, value_text = token.split("=", 1)
            if "." not in token:
                continue  # the '.' was in the value
        else:
            if index + 1 >= len(processed):
                raise CmdlineError(f"{token} needs a value")
            value_text = processed[index + 1]
            delete.add(index + 1)
        if token.endswith("+"):
            token, value_text = token[:-1], json.dumps(value_text.split(","))
        key, *path = token.split(".")
        nested: Any = _dotted_value(value_text)
        for name in reversed(path):
            nested = {name: nested}
        _update(groups[key], nested)
        delete.add(index)
    kept = [token for index, token in enumerate(processed) if index not in delete]
    for key, value in groups.items():
        kept += [key, json.dumps(value)]
    return kept, tuple(groups)


def _dotted_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return human_readable_int(text)
        except ValueError:
            return text
    except RecursionError:
        raise CmdlineError("a dotted option's value is nested too deeply") from None


def _update(original: dict[str, Any], update: dict[str, Any]) -> None:
    """``recursive_dict_update`` (argparse_utils.py:421-439): dicts merge, lists extend, else replace."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _update(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


def human_readable_int(text: str) -> int:
    """vLLM's ``human_readable_int`` (argparse_utils.py:30-74): ``1k`` 1000, ``1K`` 1024, else int()."""
    text = text.strip()
    found = _HUMAN_INT.fullmatch(text)
    if found:
        number, suffix = str(found.group(1)), str(found.group(2))
        if suffix in "kmgt":
            return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffixes like {suffix}")
        return int(number) << (10 * ("KMGT".index(suffix) + 1))
    return int(text)


def vllm_json(text: str) -> Any:
    """A JSON option value as vLLM's config types read it: human-readable numbers outside strings
    expanded first (vllm/engine/arg_utils.py:302-322)."""
    parts = _JSON_STRING.split(text)
    for index in range(0, len(parts), 2):
        parts[index] = _HUMAN_IN_JSON.sub(lambda m: str(human_readable_int(m.group())), parts[index])
    try:
        return json.loads("".join(parts))
    except (json.JSONDecodeError, RecursionError) as error:
        raise CmdlineError(f"not JSON vLLM reads: {error}") from None


# --------------------------------------------------------------------------------------------- SGLang


def sglang_args(form: str, args: Sequence[str], table: Table) -> list[str]:
    """What SGLang's server parser is handed for ``sglang serve ARGS`` / ``-m sglang.launch_server ARGS``."""
    tokens = list(args)
    if form == "serve":
        tokens = _sglang_serve(tokens)
    if "--config" in tokens:
        tokens = _sglang_inline_config(tokens, table)
    return tokens


def _sglang_serve(tokens: list[str]) -> list[str]:
    kept: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "--model-type":
            if index + 1 >= len(tokens):
                raise CmdlineError("--model-type requires a value")
            index += 2
            continue
        if not token.startswith("--model-type="):
            kept.append(token)
        index += 1
    if kept and not kept[0].startswith("-"):
        kept = ["--model-path", *kept]
    return kept


def _sglang_inline_config(tokens: list[str], table: Table) -> list[str]:
    """``ConfigArgumentMerger.merge_config_with_args`` with the keys the parser's actions allow."""
    if tokens.count("--config") > 1:
        raise CmdlineError("Multiple config files specified! Only one allowed.")
    at = tokens.index("--config")
    if at == len(tokens) - 1:
        raise CmdlineError("No config file specified after --config flag!")
    path = tokens[at + 1]
    if PurePath(path).suffix.lower() not in (".yaml", ".yml"):
        raise CmdlineFileError(path, "an SGLang config file must be .yaml or .yml")
    config = read_config(path, "an SGLang config file")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise CmdlineFileError(path, "Config file must contain a dictionary at root level")
    switches, unsupported = _sglang_config_keys(table)
    inlined: list[str] = []
    for key, value in config.items():
        if not isinstance(key, str):
            raise CmdlineFileError(path, f"key {key!r} is not an option name")
        normal = key.replace("-", "_")
        if normal in unsupported:
            raise CmdlineFileError(path, f"Unsupported config option '{normal}'")
        if isinstance(value, bool):
            if normal in switches:
                inlined += [f"--{key}"] if value else []
            else:
                inlined += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            inlined += [f"--{key}", *(str(item) for item in value)] if value else []
        elif isinstance(value, dict):
            inlined += [f"--{key}", json.dumps(value)]
        else:
            inlined += [f"--{key}", str(value)]
    return inlined + tokens[:at] + tokens[at + 2 :]


def _sglang_config_keys(table: Table) -> tuple[set[str], set[str]]:
    """(keys of store_true actions, keys no config file may set): server_args_config_parser.py:17-72."""

    def keys(options: Sequence[str], dest: str) -> set[str]:
        return {dest} | {o[2:].replace("-", "_") for o in options if o.startswith("--")}

    switches: set[str] = set()
    supported_keys: set[str] = set()
    refused: list[set[str]] = []
    for action in table.actions:
        spelled = (*action.options, *action.negative)
        if action.family == "store_true" or action.family == "store" or action.nargs is None:
            supported_keys |= keys(spelled, action.dest)
            if action.family == "store_true":
                switches |= keys(spelled, action.dest)
        elif not {"--config", "--help", "-h"} & set(spelled):
            refused.append(keys(spelled, action.dest))
    return switches, {key for group in refused for key in group if key not in supported_keys}


# --------------------------------------------------------------------------------------- TensorRT-LLM

#: TensorRT-LLM's options file: a YAML of ``LLM`` arguments that override its flags (trtllm-serve's
#: option; ``topo-gate exec`` writes the plan's config into one and passes it with this flag).
TRTLLM_OPTIONS = "--extra_llm_api_options"
#: trtllm-serve's ``is_flag`` options (serve.py, stored at 00209af): every other option takes a value.
TRTLLM_SWITCHES = frozenset(
    {"--trust_remote_code", "--fail_fast_on_attention_window_too_large", "--enable_chunked_prefill", "--help"}
)
#: Spellings of one option (serve.py declares both names on one click option): canonical first.
TRTLLM_SAME = {"--tensor_parallel_size": "--tp_size", "--config": TRTLLM_OPTIONS}
_TRTLLM_COMMANDS = ("serve", "grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve")


class ClickOption(NamedTuple):
    """One option of a trtllm-serve line: canonical name, value (None: a switch), where the value is."""

    name: str
    value: str | None
    at: int  # index in the arguments of the token holding the value
    attached: bool  # ``--name=value``: the value shares the option's token


def trtllm_options(args: Sequence[str]) -> list[ClickOption]:
    """The options of ``trtllm-serve ARGS`` as click's parser reads them (exact names; a value is the
    next token whatever it looks like; ``--`` ends the options)."""
    found: list[ClickOption] = []
    index = 1 if args[:1] and args[0] in _TRTLLM_COMMANDS else 0
    while index < len(args):
        token = args[index]
        if token == "--":
            break
        if not token.startswith("--"):
            index += 1
            continue
        name, eq, value = token.partition("=")
        canonical = TRTLLM_SAME.get(name, name)
        if name in TRTLLM_SWITCHES:
            if eq:
                raise CmdlineError(f"Option '{name}' does not take a value.")
            found.append(ClickOption(canonical, None, index, False))
            index += 1
        elif eq:
            found.append(ClickOption(canonical, value, index, True))
            index += 1
        elif index + 1 < len(args):
            found.append(ClickOption(canonical, args[index + 1], index + 1, False))
            index += 2
        else:
            raise CmdlineError(f"Option '{name}' requires an argument.")
    return found
