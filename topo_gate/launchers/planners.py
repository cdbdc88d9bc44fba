"""Each launcher's planner by the launcher's name: what ``recommend``, ``exec``, ``ab``, the plugins
and the outlook call to plan for a command line they have read."""

from __future__ import annotations

from topo_gate.launchers.sglang import sglang_plan
from topo_gate.launchers.trtllm import trtllm_plan
from topo_gate.launchers.vllm import vllm_plan

PLANNERS = {"sglang": sglang_plan, "vllm": vllm_plan, "trtllm": trtllm_plan}
