"""Captures: NVML's raw answers as versioned JSON (``topo-gate/capture/v1``), and isolated collection.

A capture is the unit of replay: every topology-reading command given ``--from FILE`` builds the same
``Node`` from it as it would on the machine that recorded it. Unknown answers are kept with their
reason (``{"unknown": "not_supported", "detail": "..."}``), because "unknown" and "no" lead to
different decisions.

``collect_isolated`` runs ``nvml.collect`` in a child process (``python -m topo_gate.topology.collect``)
that streams one JSON line per query, so a driver crash (SIGSEGV inside libnvidia-ml) becomes
``NvmlCrash`` naming the query in flight, carrying the answers gathered before it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from topo_gate._inputs import InputError, parse_json, read_text
from topo_gate.topology.answers import (
    Capture,
    FabricAnswers,
    GpuAnswers,
    MigDeviceAnswers,
    NvLinkAnswers,
    PairAnswers,
    SystemAnswers,
    Unknown,
    UnknownReason,
)
from topo_gate.topology.errors import CaptureError, NvmlCrash, NvmlUnavailable

__all__ = [
    "FORMAT",
    "Capture",
    "CaptureError",
    "NvmlCrash",
    "NvmlUnavailable",
    "collect_isolated",
    "read_capture",
    "capture_from_dict",
    "capture_to_dict",
    "load_capture",
    "save_capture",
]

FORMAT = "topo-gate/capture/v1"
_MAX_BYTES = 64 * 1024 * 1024  # a 72-GPU capture is ~10 MiB; anything far larger is not a capture


# -- files ------------------------------------------------------------------------------------------


def save_capture(capture: Capture, path: str | os.PathLike[str]) -> Path:
    """Write ``capture`` as JSON, atomically: one GPU field, link or pair per line, for diffs."""
    from topo_gate._atomic import write_atomic  # here: reading a capture (a node check) never writes

    return write_atomic(path, _readable_json(capture_to_dict(capture)) + "\n")


def _readable_json(value: Any, indent: str = "") -> str:
    """JSON with any object or list that fits in 100 columns on one line, the rest expanded."""
    compact = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(compact) <= 100 or not isinstance(value, (dict, list)) or not value:
        return compact
    inner = indent + " "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(key)}: {_readable_json(item, inner)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    items = [inner + _readable_json(item, inner) for item in value]
    return "[\n" + ",\n".join(items) + "\n" + indent + "]"


def load_capture(path: str | os.PathLike[str]) -> Capture:
    """Read a capture file through the guarded input reader (regular file, size and depth caps); any
    problem is a one-line ``CaptureError`` naming the file and the spot."""
    where = str(path)
    try:
        data = parse_json(read_text(path, limit=_MAX_BYTES, what="a capture file"))
    except InputError as error:
        raise CaptureError(f"{where}: {error}") from None
    return capture_from_dict(data, where)


# -- encoding ---------------------------------------------------------------------------------------


def encode_answer(answer: Any) -> Any:
    """An answer as plain JSON data; ``Unknown`` becomes ``{"unknown": reason, "detail": ...}``."""
    if isinstance(answer, Unknown):
        return {"unknown": answer.reason.value, "detail": answer.detail}
    if isinstance(answer, FabricAnswers):
        return {
            "state": answer.state,
            "status": answer.status,
            "clique": answer.clique,
            "cluster_uuid": answer.cluster_uuid,
        }
    if isinstance(answer, tuple):
        return list(answer)
    return answer


def capture_to_dict(capture: Capture) -> dict[str, Any]:
    """The capture as plain data in the v1 layout (see docs/topology.md)."""
    return {
        "format": FORMAT,
        "created": capture.created,
        "tool": {"name": "topo-gate", "version": capture.tool_version},
        "hostname": capture.hostname,
        "binding": capture.binding,
        "synthetic": capture.synthetic,
        "note": capture.note,
        "system": {
            "driver": encode_answer(capture.system.driver),
            "cuda_driver": encode_answer(capture.system.cuda_driver),
            "nvml": encode_answer(capture.system.nvml),
            "device_count": encode_answer(capture.device_count),
        },
        "gpus": [_gpu_to_dict(gpu) for gpu in capture.gpus],
        "pairs": [
            {
                "a": pair.a,
                "b": pair.b,
                **{name: encode_answer(getattr(pair, name)) for name in _PAIR_ANSWERS},
            }
            for pair in capture.pairs
        ],
    }


def _gpu_to_dict(gpu: GpuAnswers) -> dict[str, Any]:
    data: dict[str, Any] = {"index": gpu.index}
    data.update({name: encode_answer(getattr(gpu, name)) for name in _GPU_ANSWERS})
    data["mig_devices"] = [
        {"slot": mig.slot, **{name: encode_answer(getattr(mig, name)) for name in _MIG_ANSWERS}}
        for mig in gpu.mig_devices
    ]
    data["nvlinks"] = [
        {"link": link.link, **{name: encode_answer(getattr(link, name)) for name in _LINK_ANSWERS}}
        for link in gpu.nvlinks
    ]
    data["fabric"] = encode_answer(gpu.fabric)
    for name in _GPU_ACTIVITY:
        answer = getattr(gpu, name)
        if not (isinstance(answer, Unknown) and answer.reason is UnknownReason.NOT_RECORDED):
            data[name] = encode_answer(answer)  # an older capture's gap stays a gap, not a new field
    return data


# Field name -> expected JSON kind of a known answer.
_GPU_ANSWERS = {
    "name": "str",
    "uuid": "str",
    "bus_id": "str",
    "cuda_cc": "int_pair",
    "memory_total": "int",
    "mig_mode": "int_pair",
    "pcie_gen_current": "int",
    "pcie_gen_max": "int",
    "pcie_width_current": "int",
    "pcie_width_max": "int",
    "numa_node": "int",
    "cpu_affinity": "str",
    "nvlink_link_count": "int",
}
#: Read since captures recorded activity; an older capture has none (``NOT_RECORDED``), not an error.
_GPU_ACTIVITY = {"compute_processes": "int", "utilization_gpu": "int"}
_LINK_ANSWERS = {"state": "int", "version": "int", "remote_type": "int", "remote_bus_id": "str"}
_MIG_ANSWERS = {"name": "str", "uuid": "str", "memory_total": "int"}
_PAIR_ANSWERS = {
    "p2p_read": "int",
    "p2p_write": "int",
    "p2p_nvlink": "int",
    "p2p_atomics": "int",
    "p2p_pci": "int",
    "common_ancestor": "int",
}


# -- decoding with validation -----------------------------------------------------------------------


def capture_from_dict(data: Any, where: str = "capture") -> Capture:
    """Build a ``Capture`` from plain data, checking every field; raises ``CaptureError``."""
    root = _Reader(where)
    obj = root.mapping(data, "")
    fmt = obj.get("format")
    if not isinstance(fmt, str) or not (fmt == FORMAT or fmt.startswith(FORMAT + ".")):
        raise CaptureError(f"{where}: not a topo-gate capture (format {fmt!r}; this version reads {FORMAT})")
    if obj.get("incomplete"):
        raise CaptureError(f"{where}: incomplete capture: collection crashed in {obj['incomplete']}")
    system = root.mapping(root.field(obj, "system", ""), "system")
    gpus = tuple(_gpu_from_dict(root, gpu, at) for at, gpu in root.items(obj, "gpus", ""))
    pairs = tuple(
        PairAnswers(
            a=root.index(root.field(pair, "a", at), f"{at}.a", len(gpus)),
            b=root.index(root.field(pair, "b", at), f"{at}.b", len(gpus)),
            **root.answers(pair, _PAIR_ANSWERS, at),
        )
        for at, pair in root.items(obj, "pairs", "")
    )
    if [gpu.index for gpu in gpus] != list(range(len(gpus))):
        raise CaptureError(f"{where}: gpus: indices must be 0..{len(gpus) - 1} in order")
    _check_pairs(pairs, where)
    tool_field = obj.get("tool")
    tool = tool_field if isinstance(tool_field, dict) else {}
    return Capture(
        system=SystemAnswers(
            **root.answers(system, {"driver": "str", "cuda_driver": "int", "nvml": "str"}, "system")
        ),
        gpus=gpus,
        pairs=pairs,
        device_count=root.answer(system.get("device_count", len(gpus)), "int", "system.device_count"),
        created=str(obj.get("created", "")),
        tool_version=str(tool.get("version", "")),
        hostname=obj.get("hostname") if isinstance(obj.get("hostname"), str) else None,
        binding=obj.get("binding") if isinstance(obj.get("binding"), str) else None,
        synthetic=bool(obj.get("synthetic", False)),
        note=obj.get("note") if isinstance(obj.get("note"), str) else None,
    )


def _check_pairs(pairs: tuple[PairAnswers, ...], where: str) -> None:
    seen: set[tuple[int, int]] = set()
    for index, pair in enumerate(pairs):
        if pair.a == pair.b:
            raise CaptureError(
                f"{where}: pairs[{index}]: a GPU is not a pair with itself (a == b == {pair.a})"
            )
        if (pair.a, pair.b) in seen:
            raise CaptureError(f"{where}: pairs[{index}]: GPUs ({pair.a}, {pair.b}) are listed twice")
        seen.add((pair.a, pair.b))
    # NVML answers per ordered pair and the model reads both directions of every pair (a link's class
    # is its weaker direction's): a pair without its reverse was edited or cut short.
    for index, pair in enumerate(pairs):
        if (pair.b, pair.a) not in seen:
            raise CaptureError(
                f"{where}: pairs[{index}]: GPUs ({pair.a}, {pair.b}) are listed but ({pair.b}, {pair.a}) "
                "is not (every pair is answered in both directions)"
            )


def _gpu_from_dict(root: _Reader, gpu: dict[str, Any], at: str) -> GpuAnswers:
    links = tuple(
        NvLinkAnswers(
            link=root.index(root.field(link, "link", where), f"{where}.link", 1 << 16),
            **root.answers(link, _LINK_ANSWERS, where),
        )
        for where, link in root.items(gpu, "nvlinks", at)
    )
    migs = tuple(
        MigDeviceAnswers(
            slot=root.index(root.field(mig, "slot", where), f"{where}.slot", 1 << 16),
            **root.answers(mig, _MIG_ANSWERS, where),
        )
        for where, mig in root.items(gpu, "mig_devices", at)
    )
    return GpuAnswers(
        index=root.index(root.field(gpu, "index", at), f"{at}.index", 1 << 16),
        mig_devices=migs,
        nvlinks=links,
        fabric=root.fabric(root.field(gpu, "fabric", at), f"{at}.fabric"),
        **root.answers(gpu, _GPU_ANSWERS, at),
        **root.answers(gpu, _recorded(gpu, _GPU_ACTIVITY), at),
    )


def _recorded(data: dict[str, Any], fields: dict[str, str]) -> dict[str, str]:
    """The fields of ``fields`` that ``data`` holds (optional answers an older capture lacks)."""
    return {name: kind for name, kind in fields.items() if name in data}


class _Reader:
    """Type checks that fail with ``CaptureError("<file>: <json path>: expected ...")``."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, at: str, expected: str, got: Any) -> CaptureError:
        shown = json.dumps(got)[:40] if _jsonable(got) else type(got).__name__
        return CaptureError(f"{self.where}: {at or 'top level'}: expected {expected}, got {shown}")

    def mapping(self, value: Any, at: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(at, "an object", value)
        return value

    def sequence(self, value: Any, at: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(at, "a list", value)
        return value

    def items(self, obj: dict[str, Any], key: str, at: str) -> list[tuple[str, dict[str, Any]]]:
        """The objects of list ``obj[key]``, each with its JSON path."""
        where = f"{at}.{key}" if at else key
        return [
            (f"{where}[{n}]", self.mapping(item, f"{where}[{n}]"))
            for n, item in enumerate(self.sequence(self.field(obj, key, at), where))
        ]

    def field(self, obj: dict[str, Any], key: str, at: str) -> Any:
        if key not in obj:
            raise CaptureError(f"{self.where}: {at + '.' if at else ''}{key}: missing")
        return obj[key]

    def index(self, value: Any, at: str, limit: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < limit:
            raise self.fail(at, f"an integer in 0..{limit - 1}", value)
        return value

    def answers(self, obj: dict[str, Any], kinds: dict[str, str], at: str) -> dict[str, Any]:
        return {
            name: self.answer(self.field(obj, name, at), kind, f"{at}.{name}") for name, kind in kinds.items()
        }

    def answer(self, value: Any, kind: str, at: str) -> Any:
        if isinstance(value, dict):
            return self.unknown(value, at)
        if kind == "str" and isinstance(value, str):
            return value
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "int_pair" and isinstance(value, list) and len(value) == 2:
            if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                return (value[0], value[1])
        expected = {"str": "a string", "int": "an integer", "int_pair": "two integers"}[kind]
        raise self.fail(at, f"{expected} or an unknown", value)

    def unknown(self, value: dict[str, Any], at: str) -> Unknown:
        try:
            reason = UnknownReason(value.get("unknown"))
        except ValueError:
            known_reasons = ", ".join(r.value for r in UnknownReason)
            raise self.fail(at + ".unknown", f"one of {known_reasons}", value.get("unknown")) from None
        detail = value.get("detail", "")
        if not isinstance(detail, str):
            raise self.fail(at + ".detail", "a string", detail)
        return Unknown(reason, detail)

    def fabric(self, value: Any, at: str) -> Any:
        obj = self.mapping(value, at)
        if "unknown" in obj:
            return self.unknown(obj, at)
        numbers = {
            key: self.index(self.field(obj, key, at), f"{at}.{key}", 1 << 32)
            for key in ("state", "status", "clique")
        }
        cluster = self.field(obj, "cluster_uuid", at)
        if (
            not isinstance(cluster, str)
            or len(cluster) != 32
            or any(c not in "0123456789abcdef" for c in cluster)
        ):
            raise self.fail(f"{at}.cluster_uuid", "32 lowercase hex digits", cluster)
        return FabricAnswers(cluster_uuid=cluster, **numbers)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# -- isolated collection ----------------------------------------------------------------------------


def read_capture(from_path: str | os.PathLike[str] | None = None, *, timeout_s: float = 60) -> Capture:
    """The node every topology-reading command works on: the recorded capture at ``from_path``
    (``--from``), else this machine's NVML answers, collected crash-isolated."""
    return load_capture(from_path) if from_path is not None else collect_isolated(timeout_s=timeout_s)


def collect_isolated(timeout_s: float = 60, binding: str = "pynvml") -> Capture:
    """Collect in a child process; a crash or hang there becomes ``NvmlCrash``, not a dead CLI.

    ``binding`` is the module the child imports as NVML (a replay module in tests). Raises
    ``NvmlUnavailable`` when there is no driver, ``NvmlCrash(query, why, partial)`` when the child
    dies by a signal, hangs past ``timeout_s``, fails in Python, or reports a GPU lost.
    """
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "topo_gate.topology.collect", "--binding", binding]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
        stdout, stderr, returncode = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        stdout = _as_text(expired.stdout)
        in_flight, partial, _ = _read_stream(stdout)
        raise NvmlCrash(in_flight or "startup", f"no answer within {timeout_s:g} s", partial) from None
    in_flight, partial, final = _read_stream(stdout)
    if "unavailable" in final:
        raise NvmlUnavailable(final["unavailable"])
    if "capture" in final:
        capture = capture_from_dict(final["capture"], "collected capture")
        _raise_if_gpu_lost(partial)
        return capture
    if returncode < 0:
        why = f"killed by {signal.Signals(-returncode).name}"
    elif "error" in final:
        why = final["error"]
    else:
        last_line = stderr.strip().splitlines()[-1:] or [f"exit status {returncode}"]
        why = last_line[0]
    raise NvmlCrash(in_flight or "startup", why, partial)


def _read_stream(stdout: str) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """Parse the child's JSON lines: (query in flight, answers so far, final message)."""
    in_flight: str | None = None
    partial: dict[str, Any] = {}
    final: dict[str, Any] = {}
    for line in stdout.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the crash
        if "ask" in message:
            in_flight = message["ask"]
        elif "answer" in message:
            partial[message["answer"]] = message.get("value")
            in_flight = None
        else:
            final = message
    return in_flight, partial, final


def _raise_if_gpu_lost(partial: dict[str, Any]) -> None:
    # A lost GPU makes the rest of the capture suspect: report it like a crash, naming the query.
    for label, value in partial.items():
        if isinstance(value, dict) and value.get("unknown") == UnknownReason.GPU_LOST.value:
            raise NvmlCrash(label, "a GPU fell off the bus (NVML: GPU is lost)", partial)


def _as_text(output: str | bytes | None) -> str:
    if output is None:
        return ""
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else output
