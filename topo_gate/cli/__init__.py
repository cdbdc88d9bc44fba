"""Command-line entry point. Wiring only: each command lives in its own module, loaded on use.

Commands are registered lazily so ``topo-gate --help`` and a one-command run import only what that
command needs (``probe`` must not pay for the launcher tables, ``validate`` must not import torch).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import click

from topo_gate._atomic import OutputRefused
from topo_gate._version import __version__
from topo_gate.cli._errors import CliError, ExitCode, error_line, inert
from topo_gate.cli._params import harden
from topo_gate.profile.errors import ProfileError

# command name -> (module under topo_gate.cli, one-line summary shown in --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "topo": ("topo", "Show the node: GPUs, links, P2P matrix and interconnect classes."),
    "capture": ("capture", "Record raw NVML answers to a file for replay (--from) and bug reports."),
    "probe": ("probe", "Measure all-reduce backends on this node and write a gating profile."),
    "decide": ("decide", "Re-derive a profile offline from recorded evidence."),
    "validate": ("validate", "Check that a profile is well-formed and untampered."),
    "show": ("show", "Render a profile's decisions as tables (or --json)."),
    "diff": ("diff", "Compare the decisions of two profiles."),
    "check": ("check", "Does this node match the profile? Exit 0 if it does."),
    "recommend": ("recommend", "Print the launcher flags/env a profile implies for a TP size."),
    "exec": ("exec_", "Check the node, then run a launcher command with the profile's flags."),
    "ab": (
        "ab",
        "Run your benchmark with and without the plan, interleaved; win, no difference or regression.",
    ),
    "fleet": ("fleet", "Merge many nodes' evidence into one profile; find nodes slower than their twins."),
    "report": ("report", "Figures, a self-contained HTML page and a PR summary from evidence."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when invoked or asked for help."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (module, _) in COMMANDS.items() if _module_exists(module)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None or not _module_exists(entry[0]):
            return None
        module = importlib.import_module(f"topo_gate.cli.{entry[0]}")
        return harden(module.command)  # every float option finite, whoever declared it

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Summaries come from the table so --help does not import every command module.
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(f"topo_gate.cli.{module}") is not None


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="""\b
Typical use (probe on a GPU node):
  topo-gate probe --tp 2,4,8 --model llama-3-70b --out node.yaml
  topo-gate show node.yaml
  topo-gate exec --profile node.yaml --tp 4 -- vllm serve M -tp 4
  topo-gate report node.evidence.json --out report/  # figures, HTML, summary

Exit codes: 0 ok, 1 not ok (invalid / mismatch), 2 usage, 3 unreadable input, 4 no NVIDIA
driver, 5 NVML crashed, 6 trials could not run, 7 software drift under --strict, 8 output not
written, 126/127 (exec) command not executable / not found, 130 interrupted. Set
TOPO_GATE_DEBUG=1 to see tracebacks.""",
)
@click.version_option(__version__, prog_name="topo-gate")
def cli() -> None:
    """topo-gate: measure which all-reduce backend wins on this node, and gate launchers on it.

    A gating profile (YAML) records, per TP size and message-size range, the backend that was
    measured faster than NCCL here, and the price table behind it. A launcher changes a path only
    where the profile measured the change no slower than what that launcher runs by default;
    everywhere else, and without a usable profile, it keeps its own default (--fallback nccl forces
    NCCL instead).
    """


def _encodable_output() -> None:
    """On a terminal whose encoding cannot write a character (``PYTHONIOENCODING=ascii``, a latin-1
    locale), that character is written as an escape (``\\u4e2d``) instead of failing the command."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or foreign stream: leave it as it is
                pass


@contextmanager
def _hangup_and_terminate_interrupt() -> Iterator[None]:
    """SIGHUP (the terminal closed, an ssh session dropped) and SIGTERM (``kill``, a job manager) end a
    command as Ctrl-C does: with KeyboardInterrupt, so every ``finally`` runs -- the --out lock is
    released, the trial workers are killed and their logs' folder removed -- and exit 130. Python's
    default for both ends the process on the spot. A signal the parent ignores (``nohup``) stays
    ignored; ``exec`` hands the launcher the defaults (exec resets caught signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be installed from the main thread
        return
    installed = {}
    for signum in (signal.SIGHUP, signal.SIGTERM):
        previous = signal.getsignal(signum)
        if previous is not signal.SIG_IGN:
            installed[signum] = previous
            signal.signal(signum, _interrupt)
    try:
        yield
    finally:
        for signum, previous in installed.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


#: A terminal is wider than nothing and narrower than this; rich and click take ``COLUMNS`` / ``LINES``
#: as given (``COLUMNS=0`` printed nothing at all).
_MAX_TERMINAL_CELLS = 10_000


def _usable_terminal_size() -> None:
    """``COLUMNS`` / ``LINES`` that are no usable size are dropped, so the real terminal's (or 80x24) is used."""
    for name in ("COLUMNS", "LINES"):
        text = os.environ.get(name)
        if text is not None and not (
            text.strip().isascii() and text.strip().isdigit() and 0 < int(text) <= _MAX_TERMINAL_CELLS
        ):
            del os.environ[name]


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: turns CliError into one line on stderr and its exit code."""
    _encodable_output()
    _usable_terminal_size()
    with _hangup_and_terminate_interrupt():
        return _run(argv)


def _run(argv: list[str] | None) -> int:
    try:
        returned = cli.main(args=argv, prog_name="topo-gate", standalone_mode=False)
    except CliError as error:
        click.echo(error_line(error.message), err=True)
        return int(error.code)
    except OutputRefused as error:  # every writer's one failure: raised wherever a command writes
        click.echo(error_line(error), err=True)
        return int(ExitCode.UNWRITABLE)
    except ProfileError as error:  # a profile built from the inputs fails its own checks
        click.echo(error_line(f"the profile the inputs imply is invalid: {error}"), err=True)
        return int(ExitCode.NOT_OK)
    except click.exceptions.Abort:
        click.echo("topo-gate: interrupted", err=True)
        return int(ExitCode.INTERRUPTED)
    except click.ClickException as error:
        from topo_gate.ab.redact import redact_text

        shown_error = io.StringIO()
        error.show(file=shown_error)
        click.echo(redact_text(shown_error.getvalue()), err=True, nl=False)  # "... --token=SECRET"
        return error.exit_code
    except KeyboardInterrupt:
        click.echo("topo-gate: interrupted", err=True)
        return int(ExitCode.INTERRUPTED)
    except Exception as error:  # noqa: BLE001 -- the CLI promises one line, never a traceback
        if os.environ.get("TOPO_GATE_DEBUG"):
            raise
        message = inert(" ".join(str(error).split()))
        click.echo(f"topo-gate: internal error: {type(error).__name__}: {message}", err=True)
        return int(ExitCode.NOT_OK)
    # click returns ctx.exit()'s code in non-standalone mode (e.g. --help, --version -> 0).
    return returned if isinstance(returned, int) else int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
