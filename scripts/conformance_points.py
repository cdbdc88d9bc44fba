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
  it uses (docs/conformance.md lists them).

and optionally:

- ``user_settings(release) -> [Knobs, ...]``: knob sets a user may run with that the route model of
  ``release`` reads (flags, env), checked
  besides every knob set the launcher's planner may emit (``topo_gate.launchers.<launcher>.candidates``);
- ``limits(setting) -> [bytes, ...]``: the size limits the release's own tables put at this setting
  (the run checks the receivable sizes on each side of every one, as it does the route model's);
- ``settings(release) -> [Setting, ...]``: the adapter's own grid, where the launcher grid's axes mean
  nothing to it (a library that sees only TP size and element size).

Where the release's code reads the device, it is told what ``Setting.device()`` says: the hardware
facts of the setting's group class, stated here and not taken from the route model.
"""

from __future__ import annotations

from dataclasses import dataclass

from topo_gate.launchers.routes.base import Context, Knobs

#: Group classes (``topology.classify``) whose every GPU pair has NVLink (an NVSwitch fabric, or a
#: full mesh of NVLink bridges).
_NVLINK_EVERY_PAIR = frozenset({"nvswitch", "nvlink-mesh"})
#: Classes with NVLink between paired GPUs only (bridges): every pair of a 2-GPU group.
_NVLINK_PAIRS = frozenset({"nvlink-bridge"})
#: NVLink multicast (NVLS) exists only behind an NVSwitch of the Hopper generation or later.
_MULTICAST_FABRIC, _MULTICAST_MAJOR = frozenset({"nvswitch"}), 9
#: The class of groups whose GPUs cannot access each other's memory.
_NO_P2P = "no-p2p"
#: The group classes the grid crosses (``topology.classify``'s names, single-GPU and mixed aside).
GROUP_CLASSES = ("nvswitch", "nvlink-bridge", "pcie-switch", "pcie-hostbridge", "cross-socket", "no-p2p")


@dataclass(frozen=True)
class DeviceState:
    """What a launcher's device queries would answer on a group of this class."""

    nvlink_every_pair: bool
    p2p: bool
    multicast: bool


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

    def device(self) -> DeviceState:
        """The answers of the device queries the release makes (NVML, CUDA) for this group."""
        every_pair = self.group_class in _NVLINK_EVERY_PAIR or (
            self.tp == 2 and self.group_class in _NVLINK_PAIRS
        )
        multicast = self.group_class in _MULTICAST_FABRIC and self.capability[0] >= _MULTICAST_MAJOR
        return DeviceState(nvlink_every_pair=every_pair, p2p=self.group_class != _NO_P2P, multicast=multicast)

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
