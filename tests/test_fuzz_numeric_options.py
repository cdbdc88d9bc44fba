"""Hostile numbers in every numeric option of every command (the options are enumerated from the
click command tree as the CLI loads it, so a new option is covered without a line here).

Whatever the text -- NaN, infinities, 1e400, negatives, 5000 digits, other scripts' digits, a
superscript -- parsing the option either gives a finite number inside the option's declared range,
or refuses with a usage error (exit 2) that names the option. Options parsed by callbacks (``--tp
2,4,8``, ``--gpus``) get the same numbers and must refuse in the same way or accept.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topo_gate.ab.verdict import MIN_SUCCESSES
from topo_gate.cli import cli, main
from topo_gate.cli._params import BOUNDS
from topo_gate.evidence.limits import MAX_SERIES
from topo_gate.profile.reader import MAX_TP

pytestmark = pytest.mark.slow

HOSTILE = [
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e-400", "-0", "0", "-1",
    "9" * 5000, "9" * 30, "\u0664", "\u0661\u0662", "\uff14", "\u00b2", "\u00bd", "1_000", " 7 ", "0x10",
    "1e3", "+5", "", "\u0661e\u0663", "4.0", "2,4", "true",
    # past the loaders' and the reader's ranges (BOUNDS): a series' 1000 samples, the reader's TP 65536
    "1001", "1500", "65537", "100000000", "2," + "9" * 30,
]  # fmt: skip


def commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """(name path, command) of every leaf command, loaded the way ``topo-gate NAME`` loads it."""
    context = click.Context(cli)
    for name in cli.list_commands(context):
        command = cli.get_command(context, name)
        assert command is not None
        stack = [((name,), command)]
        while stack:
            path, current = stack.pop()
            if isinstance(current, click.Group):
                stack += [((*path, sub), child) for sub, child in current.commands.items()]
            else:
                yield path, current


def is_numeric(param: click.Parameter) -> bool:
    return isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType))


def value_options() -> list[tuple[tuple[str, ...], click.Command, click.Option]]:
    found = []
    for path, command in commands():
        for param in command.params:
            if isinstance(param, click.Option) and not param.is_flag and not param.count:
                if is_numeric(param) or param.callback is not None:
                    found.append((path, command, param))
    return found


OPTIONS = value_options()
NUMERIC = [entry for entry in OPTIONS if is_numeric(entry[2])]


def base_args(command: click.Command) -> list[str]:
    """The least a command's parser needs: every required parameter given a plain value."""
    args: list[str] = []
    for param in command.params:
        if not param.required:
            continue
        choices = getattr(param.type, "choices", None)
        value = "1" if is_numeric(param) else str(choices[0]) if choices else "x"
        args += [value] if isinstance(param, click.Argument) else [param.opts[0], value]
    return args


def parse(path: tuple[str, ...], command: click.Command, option: click.Option, text: str) -> object:
    """The option's value as the command's parser leaves it, or the usage error it raises."""
    # The option goes first: exec hands everything after its first argument to CMD.
    context = command.make_context(" ".join(path), [option.opts[0], text, *base_args(command)])
    return context.params[option.name]


@pytest.mark.parametrize(
    ("path", "command"), list(commands()), ids=lambda x: " ".join(x) if isinstance(x, tuple) else ""
)
def test_the_base_command_lines_parse(path: tuple[str, ...], command: click.Command) -> None:
    command.make_context(" ".join(path), base_args(command))  # else every refusal would be vacuous


def test_every_numeric_option_is_found() -> None:
    names = {(" ".join(path), option.opts[0]) for path, _, option in NUMERIC}
    # The examples of the issue: their gates failed open on NaN.
    assert {("fleet outliers", "--threshold"), ("probe", "--budget"), ("decide", "--margin")} <= names
    assert len(names) >= 20


def check(path: tuple[str, ...], command: click.Command, option: click.Option, text: str) -> None:
    try:
        value = parse(path, command, option, text)
    except click.UsageError as error:
        assert f"'{option.opts[0]}'" in error.format_message()
        return
    if not is_numeric(option):
        if (path, option.opts[0]) == (("probe",), "--tp"):  # each TP size in the reader's range
            assert all(BOUNDS["tp"].low <= size <= BOUNDS["tp"].high for size in value)  # type: ignore[attr-defined]
        return  # another callback's type (a tuple of GPU indices, ...) is its command's business
    kind = option.type
    assert isinstance(value, int if isinstance(kind, click.types.IntParamType) else float)
    assert not isinstance(value, bool) and math.isfinite(value)
    if isinstance(kind, click.types._NumberRangeBase):
        if kind.min is not None:
            assert value > kind.min if kind.min_open else value >= kind.min
        if kind.max is not None:
            assert value < kind.max if kind.max_open else value <= kind.max


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize(
    ("path", "command", "option"), OPTIONS, ids=[f"{' '.join(p)} {o.opts[0]}" for p, _, o in OPTIONS]
)
def test_hostile_numbers(path, command, option, text: str) -> None:
    check(path, command, option, text)


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**90), max_value=2**90).map(str),
    st.text(alphabet=st.characters(categories=("Nd",)), min_size=1, max_size=6),
    st.text(alphabet="0123456789.-+eE_ ", min_size=1, max_size=8),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry=st.sampled_from(OPTIONS), text=NUMBERS)
def test_random_numbers(entry, text: str) -> None:
    check(*entry, text)


@pytest.mark.parametrize(
    "argv",
    [
        ["fleet", "outliers", "a.json", "b.json", "c.json", "--threshold", "nan"],
        ["probe", "--device", "cpu", "--tp", "2", "--hidden", "64", "--budget", "nan"],
        ["decide", "e.json", "--margin", "nan"],
        ["report", "e.json", "--out", "r", "--margin", "inf"],
        ["topo", "--timeout", "nan"],
    ],
)
def test_the_issues_examples_are_usage_errors_naming_the_option(
    argv: list[str], tmp_path: Path, capsys
) -> None:
    assert main(argv) == 2
    option = next(token for token in argv if token in ("--threshold", "--budget", "--margin", "--timeout"))
    assert f"Invalid value for '{option}'" in capsys.readouterr().err


#: The options whose values a loader or the reader reads back, and their entry of the bounds table.
BOUNDED = [
    ("probe", "--rounds", "rounds"),
    ("ab", "--runs", "ab-runs"),
    ("ab", "--warmup", "ab-warmup"),
    ("ab", "--tp", "tp"),
    ("recommend", "--tp", "tp"),
    ("exec", "--tp", "tp"),
]


def test_the_bounds_table_is_the_loaders_and_the_readers_range() -> None:
    assert (BOUNDS["tp"].low, BOUNDS["tp"].high) == (1, MAX_TP) == (1, 65536)
    assert (BOUNDS["rounds"].low, BOUNDS["rounds"].high) == (15, MAX_SERIES) == (15, 1000)
    assert (BOUNDS["ab-runs"].low, BOUNDS["ab-runs"].high) == (MIN_SUCCESSES, MAX_SERIES)
    assert (BOUNDS["ab-warmup"].low, BOUNDS["ab-warmup"].high) == (0, MAX_SERIES)


@pytest.mark.parametrize(("name", "flag", "bound"), BOUNDED)
def test_each_bounded_option_has_its_tables_range(name: str, flag: str, bound: str) -> None:
    option = next(o for p, _, o in OPTIONS if p == (name,) and o.opts[0] == flag)
    assert isinstance(option.type, click.IntRange)
    assert (option.type.min, option.type.max) == (BOUNDS[bound].low, BOUNDS[bound].high)
    assert not option.type.min_open and not option.type.max_open


@pytest.mark.parametrize(
    "argv, option",
    [
        (["ab", "--profile", "p.yaml", "--runs", "100000000", "--", "x"], "--runs"),
        (["ab", "--profile", "p.yaml", "--warmup", "1001", "--", "x"], "--warmup"),
        (["probe", "--device", "cpu", "--tp", "2", "--hidden", "64", "--rounds", "1500"], "--rounds"),
        (["probe", "--device", "cpu", "--tp", "1" * 30, "--hidden", "64"], "--tp"),
        (["recommend", "p.yaml", "--launcher", "vllm", "--tp", "65537"], "--tp"),
    ],
)
def test_past_a_loaders_range_is_a_usage_error_before_any_work(
    argv, option, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert f"Invalid value for '{option}'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no evidence, profile, lock or run log written
