"""What the conformance run (``scripts/conformance.py``) compares at each point of its grid.

A *setting* is everything a launcher's dispatch reads except the message size: the node (capability,
TP size, group class), the served model (hidden size, element size, architecture), the release and
the knobs (the user's flags and env, or a plan's). At each setting the run asks two questions for a
list of message sizes: what the route model says (``topo_gate.launchers.routes.route``) and what the
release's own dispatch code picks, executed on CPU with the device state stood in. Both answer in
topo-gate's backend names (``None``: NCCL), per pattern (``allreduce``, ``allreduce_rmsnorm``).

An *adapter* is a module ``scripts/conformance_<name>.py`` that executes one launcher's (or
library's) code. It exposes:

- ``LAUNCHER``: the route model it is checked against (``"vllm"``, ``"sglang"``, ``"flashinfer"``);
- ``installed_release() -> str``: the release importable in this interpreter, as ``knobs.SUPPORTED``
  spells it (the route model is asked for that release);
- ``real_routes(setting, sizes) -> {pattern: [backend or None, ...]}``: what the release's own code
  picks at each size of ``sizes`` (bytes), for the patterns the adapter executes;
- ``STAND_INS``: per predicate the adapter cannot run as it is, the citation, why, and the stand-in
  it uses (docs/launchers.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass

from topo_gate.launchers.routes.base import Context, Knobs


@dataclass(frozen=True)
class Setting:
    """One point of the grid without its message size."""

    launcher: str
    release: str
    capability: tuple[int, int]
    tp: int
    group_class: str
    hidden: int
    knobs: Knobs
    itemsize: int = 2
    architecture: str | None = None
    flashinfer: str | None = None

    def context(self) -> Context:
        """The route model's view of this setting."""
        return Context(
            tp=self.tp,
            capability=self.capability,
            group_class=self.group_class,
            hidden=self.hidden,
            itemsize=self.itemsize,
            architecture=self.architecture,
            release=self.release,
            flashinfer=self.flashinfer,
        )
