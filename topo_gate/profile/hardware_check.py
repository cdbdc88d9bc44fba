"""The parts of ``node.hardware`` that readers act on, checked when a profile is loaded.

``hardware`` is the topology layer's plain-data description of the node (``Node.to_hardware_dict``);
the digest seals whatever it holds. Readers use more of it than ``tp_groups``: the planners read each
GPU's compute capability, ``check`` and ``show`` the GPU list, the pairs and the counts. A sealed
profile whose ``sm`` is ``"².0"`` (``str.isdigit`` says yes, ``int`` says no) or whose GPU list holds
numbers made ``recommend``, ``exec`` and ``check`` die with an internal error, and ``exec`` then did not
start its command. Those fields are checked here, once, with the field named; what the topology layer
never writes (another type, a count that disagrees with the list) is an invalid profile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.validate import describe, expect_int, expect_list, expect_mapping, expect_str

#: CUDA compute capability as the topology layer writes it: "9.0", "12.0" (ASCII digits only).
_SM = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}")


def check_hardware(hardware: Mapping[str, Any]) -> None:
    """``ProfileInvalid`` naming the first field of ``hardware`` a reader could not use."""
    gpus = hardware.get("gpus")
    if gpus is not None:
        for index, gpu in enumerate(expect_list(gpus, "hardware.gpus")):
            where = f"hardware.gpus[{index}]"
            gpu = expect_mapping(gpu, where)
            if "index" in gpu:
                expect_int(gpu["index"], f"{where}.index", minimum=0)
            sm = gpu.get("sm")
            if sm is not None and not (isinstance(sm, str) and _SM.fullmatch(sm)):
                raise ProfileInvalid(
                    f"must be a compute capability like '9.0', or null, found {describe(sm)}", f"{where}.sm"
                )
            for key in ("model", "interconnect"):
                if gpu.get(key) is not None:
                    expect_str(gpu[key], f"{where}.{key}")
    count = hardware.get("gpu_count")
    if count is not None:
        expect_int(count, "hardware.gpu_count", minimum=0)
        if isinstance(gpus, list) and count != len(gpus):
            raise ProfileInvalid(
                f"is {count}, but hardware.gpus lists {len(gpus)} GPUs", "hardware.gpu_count"
            )
    for index, pair in enumerate(expect_list(hardware.get("pairs") or [], "hardware.pairs")):
        where = f"hardware.pairs[{index}]"
        pair = expect_mapping(pair, where)
        ends = expect_list(pair.get("gpus"), f"{where}.gpus")
        if len(ends) != 2:
            raise ProfileInvalid(f"must name 2 GPUs, found {len(ends)}", f"{where}.gpus")
        for end, gpu_index in enumerate(ends):
            expect_int(gpu_index, f"{where}.gpus[{end}]", minimum=0)
        expect_str(pair.get("class"), f"{where}.class")
    for key in ("interconnect", "device"):
        if hardware.get(key) is not None:
            expect_str(hardware[key], f"hardware.{key}")
