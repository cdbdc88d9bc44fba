"""The CLI's one error path: a one-line message and a documented exit code, never a traceback."""

from __future__ import annotations

from enum import IntEnum

from topo_gate._terminal import shown


class ExitCode(IntEnum):
    """Exit codes of every topo-gate command (README "Exit codes" mirrors this table)."""

    OK = 0
    NOT_OK = 1  # invalid profile, node mismatch, wrong answers seen
    USAGE = 2  # click's own usage errors
    UNREADABLE = 3  # missing/unreadable/garbled input file
    NO_DRIVER = 4  # no NVIDIA driver / NVML
    NVML_CRASH = 5  # NVML collection crashed or a GPU fell off the bus
    TRIALS_FAILED = 6  # trials could not run at all
    DRIFT = 7  # software drift under --strict
    UNWRITABLE = 8  # an output not written: not a regular file, read-only or missing folder, disk full
    INCOMPLETE = 9  # recommend --format env: the plan has flags or config an env file cannot carry
    CANNOT_EXECUTE = 126  # exec: CMD found but not executable (the shell's convention)
    COMMAND_NOT_FOUND = 127  # exec: CMD not found (the shell's convention)
    INTERRUPTED = 130


class CliError(Exception):
    """Raised by command code; the entry point prints ``topo-gate: error: <message>`` and exits."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_line(message: object) -> str:
    """How every error reaches stderr: ``topo-gate: error: <message>``, secrets redacted (a message
    may quote CMD or an option as given: ``--token=SECRET``), control characters escaped."""
    return f"topo-gate: error: {inert(message)}"


def inert(text: object) -> str:
    """User-supplied text made safe for stderr: secrets redacted (``ab.redact``), then ``shown``."""
    from topo_gate.ab.redact import redact_text

    return shown(redact_text(str(text)))


def fail(code: ExitCode, message: str) -> CliError:
    """Build the error to ``raise``: ``raise fail(ExitCode.UNREADABLE, f"{path}: not UTF-8")``."""
    return CliError(code, " ".join(message.split()))
