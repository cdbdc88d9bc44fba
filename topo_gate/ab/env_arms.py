"""``ab --arm NAME:VAR=VALUE[,VAR=VALUE...]``: an arm of the user's own environment change.

topo-gate's advice can tell a user to change the launcher's environment away from a default no probe
timed (``VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm`` instead of vLLM's multicast MNNVL,
``NCCL_NVLS_ENABLE=0``); that change is itself unmeasured. An env arm runs CMD with exactly those
variables set (no plan applied), interleaved with the other arms and judged against ``default`` as
the plan is.

The spec is read strictly, so that a typo is a usage error rather than an arm measuring something
else:

- NAME: a letter, then letters, digits, ``_`` or ``-``, at most ``MAX_NAME`` characters; not a
  built-in arm's name (``taken``: ``arms.ARMS``, in any case) nor another ``--arm``'s;
- VAR: an environment name (``[A-Za-z_][A-Za-z0-9_]*``), not one topo-gate sets or removes in every
  arm itself (``TOPO_GATE_*``: the result path, the plugin's profile), given once an arm;
- VALUE: anything, the empty string included. Commas split assignments only where a ``VAR=``
  follows, so a list value stays whole: ``x:NCCL_ALGO=Ring,Tree`` sets one variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: An arm's name is a column of the progress lines and the tables (80 columns) and part of every
#: run's log file name: short, and safe in a path.
MAX_NAME = 16
USAGE = "--arm NAME:VAR=VALUE[,VAR=VALUE...]"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A comma starts a new assignment only where a variable name and "=" follow it.
_NEXT_ASSIGNMENT = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_]*=)")
#: Variables ab sets or removes in every arm itself (``TOPO_GATE_AB_RESULT``, the plugin's
#: ``TOPO_GATE_PROFILE``): an arm setting one would change how ab reads the run, not the launcher.
RESERVED_PREFIX = "TOPO_GATE_"


@dataclass(frozen=True)
class EnvArm:
    """One ``--arm``: its name and the variables it sets, in the order given."""

    name: str
    env: Mapping[str, str]

    def spec(self) -> str:
        """The assignments as the user wrote them (``VAR=VALUE,VAR=VALUE``)."""
        return ",".join(f"{var}={value}" for var, value in self.env.items())


def parse_env_arm(spec: str, taken: Sequence[str]) -> EnvArm:
    """One ``--arm`` spec whose name is none of ``taken`` (lower case); ``ValueError`` (one line,
    naming what is wrong) for a malformed one."""
    name, colon, assignments = spec.partition(":")
    if not colon:
        raise ValueError(f"{USAGE}: no ':' after the arm's name in {spec!r}")
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise ValueError(
            f"{USAGE}: the name {name!r} is not a letter then up to {MAX_NAME - 1} letters, digits, '_' or '-'"
        )
    if name.lower() in taken:
        raise ValueError(f"{USAGE}: {name!r} is a built-in arm (--arms {','.join(taken)})")
    env: dict[str, str] = {}
    for assignment in _NEXT_ASSIGNMENT.split(assignments):
        var, eq, value = assignment.partition("=")
        if not eq or not _VAR.fullmatch(var):
            raise ValueError(f"{USAGE}: {assignment!r} in arm {name!r} is not VAR=VALUE")
        if var.upper().startswith(RESERVED_PREFIX):
            raise ValueError(
                f"{USAGE}: {var} is set or removed by topo-gate in every arm, not an arm's change"
            )
        if var in env:
            raise ValueError(f"{USAGE}: {var} is given twice in arm {name!r}")
        env[var] = value
    return EnvArm(name, env)


def parse_env_arms(specs: Sequence[str], taken: Sequence[str]) -> tuple[EnvArm, ...]:
    """Every ``--arm``, in the order given; ``ValueError`` for a malformed one, one named as one of
    ``taken`` (the built-in arms), or a repeated name."""
    arms = tuple(parse_env_arm(spec, taken) for spec in specs)
    names = [arm.name.lower() for arm in arms]
    repeated = next((arm.name for arm in arms if names.count(arm.name.lower()) > 1), None)
    if repeated is not None:
        raise ValueError(f"{USAGE}: the arm name {repeated!r} is given twice")
    return arms
