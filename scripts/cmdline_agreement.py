"""topo_gate.launchers.command.parse against the pinned launchers' own parsers, on a corpus of command lines.

For every case of tests/launchers/cmdline/corpus.yaml (abbreviations, ``_`` spellings, ``=`` forms,
repeated and dotted options, config files, ambiguous prefixes) the real parser and ``cmdline`` must
agree: both refuse the line, or both read the same TP size and the same value for every all-reduce
option the launcher's manifest names (compared as the real parser's ``type=`` converts it), and the
same unrecognized tokens (the real parser's "unrecognized arguments"). The manifest's ``all_options``
table must also be what the installed parser registers now (``scripts/extract_knobs.py options``).

vLLM 0.33.0 is read as ``vllm serve`` reads it (vllm/entrypoints/cli/main.py:88-117: a
FlexibleArgumentParser with the serve subparser) or as its flat ``api_server`` entry does; SGLang
0.5.23 as ``prepare_server_args`` does (srt/server_args.py:679-696), after ``sglang serve``'s own
rewriting (sglang/cli/main.py:20-46, sglang/cli/serve.py:183-188). Run by scripts/launcher_parsers.py.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from topo_gate.launchers import knobs
from topo_gate.launchers.command import parse as cmdline
from topo_gate.launchers.command.options import table

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "launchers" / "cmdline" / "corpus.yaml"


def cases() -> Iterator[tuple[str, list[str]]]:
    """(id, command line) per corpus case, its files written to a fresh folder."""
    for case in yaml.safe_load(CORPUS.read_text(encoding="utf-8")):
        folder = Path(tempfile.mkdtemp(prefix="topo-gate-cmdline-"))
        for name, text in (case.get("files") or {}).items():
            (folder / name).write_text(text, encoding="utf-8")
        yield case["id"], [token.replace("{dir}", str(folder)) for token in case["argv"]]


class RealVllm:
    def __init__(self) -> None:
        from vllm.entrypoints.cli.serve import ServeSubcommand
        from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        self.top = FlexibleArgumentParser()
        self.serve = ServeSubcommand().subparser_init(
            self.top.add_subparsers(required=False, dest="subparser")
        )
        self.flat = make_arg_parser(FlexibleArgumentParser())

    def parse(self, entry: cmdline.Entry) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
        if entry.form == "serve":
            return self.top.parse_args(list(entry.args)), self.serve
        return self.flat.parse_args(list(entry.args)), self.flat


class RealSglang:
    def parse(self, entry: cmdline.Entry) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
        from sglang.srt.server_args import ServerArgs
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

        argv = list(entry.args)
        if entry.form == "serve":
            from sglang.cli.serve import _extract_model_type_override, _normalize_positional_model_path

            top = argparse.ArgumentParser()
            top.add_subparsers(dest="subcommand", required=True).add_parser("serve", add_help=False)
            _, extra = top.parse_known_args(["serve", *argv])
            _, argv = _extract_model_type_override(extra)
            argv, _ = _normalize_positional_model_path(argv)
        parser = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)
        if "--config" in argv:
            argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
        return parser.parse_args(argv), parser


def real_reading(real: Any, entry: cmdline.Entry) -> tuple[Any, str | None]:
    """(namespace and parser, None) or (None, the refusal: argparse's message or the exception)."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return real.parse(entry), None
    except SystemExit:
        return None, stderr.getvalue().strip().splitlines()[-1] if stderr.getvalue().strip() else "exit"
    except Exception as error:  # noqa: BLE001 -- any refusal counts as one
        return None, f"{type(error).__name__}: {error}"


def relevant_dests(launcher: str) -> set[str]:
    flags = set(knobs.manifest(launcher)["flags"])
    return {a.dest for a in table(launcher).actions if flags & {*a.options, *a.negative}}


def agreement(launcher: str, real: Any, argv: list[str]) -> list[str]:
    entry = cmdline.find_entry(argv)
    assert entry is not None and entry.launcher == launcher, argv
    reading, refused = real_reading(real, entry)
    try:
        ours = cmdline.parse(launcher, argv)
        tp = cmdline.tp_size(launcher, argv)
        user = cmdline.user_knobs(launcher, argv, {})
    except cmdline.CmdlineError as error:
        return [] if refused else [f"cmdline refuses ({error}); the launcher reads the line"]
    if ours.unrecognized:
        wanted = "unrecognized arguments: " + " ".join(ours.unrecognized)
        return [] if refused and refused.endswith(wanted) else [f"cmdline: {wanted}; the launcher: {refused}"]
    if refused:
        return [f"the launcher refuses ({refused}); cmdline reads the line"]
    namespace, parser = reading
    problems = []
    tp_dest = table(launcher).by_option[cmdline.TP_OPTION[launcher]].dest
    real_tp = getattr(namespace, tp_dest)
    if (tp if tp is not None else parser.get_default(tp_dest)) != real_tp:
        problems.append(f"TP: cmdline {tp}, the launcher {real_tp}")
    given = dict(_pairs(user.args))
    for dest in sorted(relevant_dests(launcher)):
        real_value = getattr(namespace, dest)
        names = [name for name in given if table(launcher).by_option[name].dest == dest]
        if not names:
            meant = parser.get_default(dest)
        else:
            action = parser._option_string_actions[names[-1]]
            value = given[names[-1]]
            if value is None:
                meant = names[-1] == table(launcher).by_option[names[-1]].canonical
            else:
                meant = action.type(value) if callable(action.type) else value
        if meant != real_value:
            problems.append(f"{dest}: cmdline means {meant!r}, the launcher read {real_value!r}")
    return problems


def _pairs(args: tuple[str, ...]) -> Iterator[tuple[str, str | None]]:
    index = 0
    while index < len(args):
        value = args[index + 1] if index + 1 < len(args) and not args[index + 1].startswith("--") else None
        yield args[index], value
        index += 1 if value is None else 2


def tables_current() -> list[str]:
    """The committed all_options tables against the installed parsers."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import extract_knobs

    problems = []
    for launcher in extract_knobs.PARSER_WORDS:
        # The installed release's table: the venv may hold an older modelled release than the newest.
        committed = knobs.manifest(launcher, importlib.metadata.version(launcher))["all_options"]
        current = {
            "parser": extract_knobs.PARSER_WORDS[launcher],
            **extract_knobs.parser_table(extract_knobs.launcher_parser(launcher)),
        }
        if committed != current:
            problems.append(f"{launcher}: all_options differs from the parser: run extract_knobs.py options")
    return problems


def main() -> tuple[int, int]:
    """Print one line per case; return (passed, failed)."""
    readers = {"vllm": RealVllm(), "sglang": RealSglang()}
    passed = failed = 0
    problems = tables_current()
    for problem in problems:
        print(f"FAIL all_options {problem}")
    failed += len(problems)
    for case_id, argv in cases():
        launcher = cmdline.find_entry(argv).launcher  # type: ignore[union-attr]
        problems = agreement(launcher, readers[launcher], argv)
        print(f"{'FAIL' if problems else 'ok  '} cmdline {case_id}: {' '.join(argv)}")
        for problem in problems:
            print(f"       {problem}")
        passed, failed = (passed, failed + 1) if problems else (passed + 1, failed)
    return passed, failed


if __name__ == "__main__":
    ok, bad = main()
    print(f"{ok} passed, {bad} failed")
    sys.exit(1 if bad else 0)
