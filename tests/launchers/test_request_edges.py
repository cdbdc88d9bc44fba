"""A plan request's edges (``launchers/plan/request.py``, ``plan/flow.py``): a command line already read
stands for the args, env and release on its own, so a request given one of them beside it is refused;
a request without a TP size falls back in the reader's words; and a command read for one launcher is
refused by every other launcher's planner.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest

# The lines as a user hands them to ``exec``, one per launcher, and the bundled profile they plan on.
from test_read_once import COMMANDS, FINGERPRINT, PROFILE

from topo_gate.launchers import PLANNERS, PlanRequest
from topo_gate.launchers.command.releases import Installed
from topo_gate.launchers.command.user_command import read_command
from topo_gate.launchers.plan.request import shape_problem


@pytest.mark.parametrize(
    "beside",
    [{"user_args": ("--max-model-len", "8192")}, {"user_env": {}}, {"installed": Installed()}],
    ids=["user_args", "user_env", "installed"],
)
def test_a_command_with_any_one_of_what_it_stands_for_beside_it_is_refused(beside: dict[str, Any]) -> None:
    command = read_command("vllm", COMMANDS["vllm"], {}, None)
    with pytest.raises(ValueError, match="takes its args, env and release from it alone"):
        PlanRequest(PROFILE, tp=2, command=command, **beside)


def test_a_request_without_a_tp_size_is_refused_in_the_readers_words() -> None:
    request = PlanRequest(PROFILE, tp=None)  # type: ignore[arg-type]  # a caller without types
    assert shape_problem(request) == "tp must be a positive integer, got None"


@pytest.mark.parametrize(
    ("planner", "read_for"),
    [(planner, read_for) for planner in COMMANDS for read_for in COMMANDS if planner != read_for],
)
def test_a_command_read_for_another_launcher_is_refused_by_every_planner(planner: str, read_for: str) -> None:
    command = read_command(read_for, COMMANDS[read_for], {}, None)
    with pytest.raises(ValueError, match=f"a {planner} plan asked for a {read_for} command line"):
        PLANNERS[planner](PlanRequest(PROFILE, tp=2, fingerprint=FINGERPRINT, command=command))


@pytest.mark.parametrize("planner", list(COMMANDS))
def test_a_command_for_the_same_launcher_is_planned_whatever_string_object_names_it(planner: str) -> None:
    # The launcher's name in a command read at run time need not be the planner's own string object:
    # the names are compared by value (a name built here is equal to, but not, the literal).
    command = read_command(planner, COMMANDS[planner], {}, None)
    entry = command.line.entry._replace(launcher="".join(list(planner)))
    command = replace(command, line=command.line._replace(entry=entry))
    assert command.launcher == planner and command.launcher is not planner
    PLANNERS[planner](PlanRequest(PROFILE, tp=2, fingerprint=FINGERPRINT, command=command))


def test_a_request_cannot_change_once_made() -> None:
    # One request is read by every candidate of a plan and by the outlook's re-plans: a change
    # midway would price candidates against different requests.
    request = PlanRequest(PROFILE, tp=2)
    with pytest.raises(FrozenInstanceError):
        request.tp = 4  # type: ignore[misc]
