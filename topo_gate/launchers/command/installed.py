"""The launcher and FlashInfer releases a command line will run, read through its own interpreter.

``exec`` and ``ab`` plan for the release CMD runs (DESIGN.md, principle 8), and that release is the one
installed where CMD's Python finds its packages, not where topo-gate runs (a pipx tool, another venv).
So the versions are asked of CMD's own interpreter, without importing the launcher: a child
``[python, "-I", "-c", SCRIPT]`` prints ``importlib.metadata.version`` of each distribution as one JSON
line. The interpreter is

- the shebang of the launcher's console script (``vllm``, ``sglang``, ``trtllm-serve``,
  ``trtllm-bench``) as CMD finds it: ``shutil.which`` with CMD's ``PATH`` (an ``env PATH=...`` in front
  included); pip's ``/bin/sh`` trampoline for long interpreter paths is read as pip writes it;
- the ``python`` of ``python -m sglang...`` / ``python -m vllm...``, or of ``python script.py``.

Where the interpreter cannot be told for sure -- no entry point in CMD, a wrapper that picks its own
environment (``uv run``), a shell-script wrapper, a non-Python shebang -- the answer is
``Installed(problem=...)`` with the reason in one line, never a guess; so is a child that hangs,
fails, or prints anything but the expected JSON line.

``-I`` keeps the user's working directory (and ``PYTHON*`` variables) from changing what the child
imports; the script then puts back, after its own imports, what CMD's interpreter would also search:
``PYTHONPATH`` from CMD's environment and the user site, so a launcher installed there is still seen.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence

from topo_gate.launchers.command.releases import DISTRIBUTIONS, Installed

#: Console scripts of each launcher (the basename CMD names; ``find_entry`` and ``ab.benchmarks`` know them).
CONSOLE_SCRIPTS: dict[str, frozenset[str]] = {
    "vllm": frozenset({"vllm"}),
    "sglang": frozenset({"sglang"}),
    "trtllm": frozenset({"trtllm-serve", "trtllm-bench"}),
}
#: ``python -m PACKAGE.module``: the top package of each launcher.
PACKAGES: dict[str, str] = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt_llm"}
#: Wrappers that choose the interpreter themselves (a project venv, a fresh tool env): what runs
#: behind them is not what ``PATH`` finds now. (program, subcommand or None)
ENV_CHOOSERS: frozenset[tuple[str, str | None]] = frozenset(
    {
        ("uv", "run"),
        ("uvx", None),
        ("pipx", "run"),
        ("conda", "run"),
        ("mamba", "run"),
        ("micromamba", "run"),
        ("pixi", "run"),
        ("poetry", "run"),
        ("pdm", "run"),
        ("hatch", "run"),
    }
)
_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)*)?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: A version as the child may print it: PEP 440's public and local characters, nothing else.
_VERSION = re.compile(r"[0-9A-Za-z.+!_-]{1,64}")

#: How long the child may take. Measured on a 2-core shared box: the interpreter of a venv holding
#: vLLM 0.33.0, SGLang 0.5.23 and about 110 distributions in all answers in 0.05-0.12 s; 5 s leaves
#: room for a cold page cache or a network filesystem and stays short against a launcher's start.
TIMEOUT_S = 5.0
#: The child's answer: four versions in one JSON line are under 300 bytes; anything near 4 KiB is
#: not the script's answer and is not read further.
MAX_OUTPUT_BYTES = 4096
#: The head of a console script read for its shebang (pip's trampoline takes three lines).
SHEBANG_BYTES = 1024

#: Run by CMD's interpreter. Standard library only; its own imports come first, before the search
#: path is extended as the launcher's interpreter extends it.
SCRIPT = f"""\
import json, os, site, sys
from importlib import metadata
extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if not os.environ.get("PYTHONNOUSERSITE"):
    extra.append(site.getusersitepackages())
sys.path[:0] = extra
found = {{}}
for key, name in {sorted(DISTRIBUTIONS.items())!r}:
    try:
        found[key] = metadata.version(name)
    except metadata.PackageNotFoundError:
        found[key] = None
print(json.dumps(found))
"""


class _Unknown(Exception):
    """Why CMD's interpreter cannot be told or asked (one line)."""


def read_installed(
    cmd: Sequence[str], launcher: str, environ: Mapping[str, str], *, timeout_s: float = TIMEOUT_S
) -> Installed:
    """What ``cmd``'s own interpreter has installed of the launchers and FlashInfer (module docstring).

    ``environ`` is CMD's environment (assignments of an ``env A=B`` in front of the entry point are
    applied to it). Never raises: anything that cannot be read is ``Installed(problem=...)``.
    """
    try:
        python, where, env = _interpreter(cmd, launcher, environ)
        versions = _ask(python, env, timeout_s)
    except _Unknown as why:
        return Installed({}, where="", problem=str(why))
    return Installed(versions, where=where)


def _interpreter(
    cmd: Sequence[str], launcher: str, environ: Mapping[str, str]
) -> tuple[str, str, dict[str, str]]:
    """(the interpreter's path, where it was found in words, CMD's environment)."""
    env = dict(environ)
    for index, token in enumerate(cmd):
        name = os.path.basename(token)
        following = cmd[index + 1] if index + 1 < len(cmd) else None
        if (name, following) in ENV_CHOOSERS or (name, None) in ENV_CHOOSERS:
            raise _Unknown(f"{' '.join(cmd[index : index + 2])} chooses the interpreter itself")
        if _ASSIGNMENT.match(token) and index > 0:
            key, _, value = token.partition("=")
            env[key] = value  # env A=B: CMD's environment from here on
            continue
        if name in CONSOLE_SCRIPTS[launcher]:
            script = _found(token, env)
            python = _shebang(script, env)
            return python, f"in the interpreter of {script} ({python})", env
        if _PYTHON.fullmatch(name):
            python = _found(token, env)
            what = " ".join(
                [name, *(cmd[index + 1 : index + 3] if following == "-m" else cmd[index + 1 : index + 2])]
            )
            return python, f"in {python} ({what})", env
        if _is_script(token, env):
            raise _Unknown(
                f"{token} is a wrapper script: the interpreter the {PACKAGES[launcher]} behind it runs on "
                "cannot be told"
            )
    raise _Unknown(f"CMD names no {launcher} console script and no python running it")


def _found(program: str, env: Mapping[str, str]) -> str:
    """``program`` as CMD's ``execvp`` finds it (``PATH`` of CMD's environment)."""
    path = shutil.which(program, path=env.get("PATH", os.defpath)) if os.sep not in program else program
    if path is None or not os.path.isfile(path):
        raise _Unknown(f"{program}: not found on CMD's PATH")
    return os.path.abspath(path)


def _is_script(program: str, env: Mapping[str, str]) -> bool:
    """Whether ``program`` (a wrapper in front of the entry point) is a script: what it runs is its own."""
    try:
        return _head(_found(program, env)).startswith(b"#!")
    except _Unknown:
        return False


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(SHEBANG_BYTES)
    except OSError as error:
        raise _Unknown(f"{path}: cannot read its first line: {error.strerror or error}") from None


def _shebang(script: str, env: Mapping[str, str]) -> str:
    """The Python a console script runs on: its ``#!`` line, ``#!/usr/bin/env python3`` through CMD's
    ``PATH``, or pip's ``/bin/sh`` trampoline (``'''exec' /long/path/python "$0" "$@"``)."""
    lines = _head(script).split(b"\n")
    if not lines[0].startswith(b"#!"):
        raise _Unknown(f"{script} has no #! line: not a Python console script")
    words = lines[0][2:].decode("utf-8", "replace").split()
    if not words:
        raise _Unknown(f"{script}: an empty #! line")
    program, rest = words[0], words[1:]
    if os.path.basename(program) == "env":
        rest = [word for word in rest if not word.startswith("-")]
        if not rest:
            raise _Unknown(f"{script}: #!{program} names no program")
        program = _found(rest[0], env)
    elif os.path.basename(program) == "sh" and len(lines) > 1 and lines[1].startswith(b"'''exec' "):
        trampoline = lines[1][len(b"'''exec' ") :].decode("utf-8", "replace").split()
        program = trampoline[0] if trampoline else ""
    if not _PYTHON.fullmatch(os.path.basename(program)):
        raise _Unknown(f"{script} runs on {os.path.basename(program) or '?'}, not Python: a wrapper script")
    return program


def _ask(python: str, env: Mapping[str, str], timeout_s: float) -> dict[str, str | None]:
    """The child's versions: one JSON line, in ``timeout_s``, at most ``MAX_OUTPUT_BYTES``."""
    try:
        child = subprocess.Popen(
            [python, "-I", "-c", SCRIPT],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
        )
    except OSError as error:
        raise _Unknown(f"{python}: cannot run: {error.strerror or error}") from None
    try:
        output, why = _bounded_output(child, timeout_s)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    if why:
        raise _Unknown(f"{python} {why}")
    if child.returncode != 0:
        raise _Unknown(f"{python} failed (exit {child.returncode}) reading the installed versions")
    return _versions(python, output)


def _bounded_output(child: subprocess.Popen[bytes], timeout_s: float) -> tuple[bytes, str | None]:
    """What the child printed until it closed stdout, and why reading stopped early (None: it did not)."""
    assert child.stdout is not None
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return b"", f"did not answer within {timeout_s:g} s"
            chunk = os.read(child.stdout.fileno(), MAX_OUTPUT_BYTES + 1)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_OUTPUT_BYTES:
                return b"", f"printed more than {MAX_OUTPUT_BYTES} bytes: not the versions asked for"
    remaining = max(deadline - time.monotonic(), 0.0)
    try:
        child.wait(remaining)
    except subprocess.TimeoutExpired:
        return b"", f"did not answer within {timeout_s:g} s"
    return b"".join(chunks), None


def _versions(python: str, output: bytes) -> dict[str, str | None]:
    garbage = _Unknown(f"{python} answered with something other than the versions asked for")
    try:
        data = json.loads(output.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise garbage from None
    if not isinstance(data, dict) or set(data) != set(DISTRIBUTIONS):
        raise garbage
    for value in data.values():
        if value is not None and not (isinstance(value, str) and _VERSION.fullmatch(value)):
            raise garbage
    return data
