"""Rich rendering of a node: GPUs, a ``nvidia-smi topo -m``-style matrix with P2P, TP groups.

Also ``node_report(node)``, the plain data behind ``topo-gate topo --json`` (everything the tables
show, plus the raw capture).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from topo_gate._terminal import shown
from topo_gate.report.text import file_text
from topo_gate.topology.answers import Unknown
from topo_gate.topology.capture import capture_to_dict
from topo_gate.topology.classify import P2P_CAPABILITIES
from topo_gate.topology.fingerprint import fingerprint_inputs, node_fingerprint
from topo_gate.topology.model import Node, value

_STYLE = {
    "nvswitch": "bold green",
    "nvlink": "green",
    "pix": "cyan",
    "pxb": "cyan",
    "phb": "yellow",
    "node": "yellow",
    "sys": "magenta",
    "no-p2p": "bold red",
    "single-gpu": "dim",
}
# One letter per P2P capability for the compact P2P matrix.
_P2P_LETTERS = {"read": "R", "write": "W", "nvlink": "N", "atomics": "A", "pci": "P"}


def node_report(node: Node, source: str | None) -> dict[str, Any]:
    """Everything ``topo`` knows, as plain JSON data."""
    capture = node.capture
    return {
        "source": {
            "capture": source,
            "synthetic": capture.synthetic,
            "note": capture.note,
            "hostname": capture.hostname,
            "created": capture.created,
            "binding": capture.binding,
        },
        "interconnect": {"class": node.interconnect, "facts": list(node.interconnect_facts)},
        "fingerprint": node_fingerprint(node),
        "fingerprint_inputs": fingerprint_inputs(node),
        "hardware": node.to_hardware_dict(),
        "software": node.software_dict(),
        "pairs": [
            {
                "gpus": [a, b],
                "class": pair.link_class,
                "nvlinks": pair.nvlink_count,
                "pcie": pair.pcie,
                "p2p": pair.p2p,
                "reason": pair.reason,
            }
            for (a, b), pair in sorted(node.pairs.items())
        ],
        "tp": {
            str(tp): {
                "groups": [_group_dict(g) for g in node.all_tp_groups(tp)],
                "measure": [_group_dict(g) for g in node.tp_groups(tp)],
                "unavailable": node.tp_unavailable(tp),
            }
            for tp in range(1, len(node.gpus) + 1)
        },
        "unknown": _unknown_facts(node),
        "capture": capture_to_dict(capture),
    }


def _group_dict(group: Any) -> dict[str, Any]:
    return {"gpus": list(group.gpus), "class": group.group_class, "reason": group.reason}


def render_node(node: Node, source: str | None, console: Console) -> None:
    console.print(_header(node, source))
    if not node.gpus:
        console.print("No GPUs.")
        return
    console.print(_GpuTables(node))
    console.print(_matrix(node))
    console.print(_tp_table(node))
    for index, reason in node.excluded:
        console.print(file_text(f"GPU {index} excluded from TP groups: {reason}", style="yellow"))
    unknown = _unknown_facts(node)
    if unknown:
        console.print(Text("Unknown (NVML gave no answer):", style="bold"))
        for line in unknown:
            console.print(file_text(f"  {line}", style="dim"))


def _header(node: Node, source: str | None) -> Group:
    capture = node.capture
    models = sorted({shown(gpu.name or "unknown model") for gpu in node.gpus})
    title = Text.assemble(
        (f"{len(node.gpus)}x {', '.join(models) or 'no GPU'}", "bold"),
        "  interconnect ",
        (node.interconnect, _STYLE.get(node.interconnect, "bold")),
        f"  ({'; '.join(node.interconnect_facts)})",
    )
    software = node.software_dict()
    lines = [
        title,
        file_text(
            f"driver {software['driver'] or 'unknown'}, CUDA driver {software['cuda_driver'] or 'unknown'}, "
            f"fabric: {node.fabric.get('why')}",
            style="dim",
        ),
        Text(f"fingerprint {node_fingerprint(node)}", style="dim"),
    ]
    if source:
        where = f"from capture {source} ({capture.hostname or 'unknown host'}, {capture.created})"
        lines.append(Text(shown(where) + (" -- SYNTHETIC" if capture.synthetic else ""), style="dim"))
    if capture.note:
        lines.append(Text(shown(capture.note), style="italic dim"))
    return Group(*lines)


class _GpuTables:
    """The GPU facts as one table where the terminal is wide enough, else as two narrower ones.

    Every column keeps its values whole (no ellipsis): a bus id or a PCIe width cut to ``ge…`` is
    worse than no table. At 80 columns the facts are split into "what the GPU is" and "where it
    sits"; below what even that needs, cells fold onto more lines rather than lose characters.
    """

    def __init__(self, node: Node) -> None:
        self.node = node

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        whole = _gpu_table(self.node, _GPU_COLUMNS)
        natural = Measurement.get(console, options.update_width(10_000), whole).maximum
        if natural <= options.max_width:
            yield whole
            return
        yield _gpu_table(self.node, _GPU_WHAT, title="GPUs (NVML order = PCI bus order)")
        yield _gpu_table(self.node, _GPU_WHERE, title="GPUs: PCIe and CPU placement")


_GPU_WHAT = ("GPU", "model", "SM", "memory", "NVLinks", "MIG")
_GPU_WHERE = ("GPU", "PCIe now / max", "NUMA", "CPU affinity", "bus id")
_GPU_COLUMNS = (*_GPU_WHAT, *_GPU_WHERE[1:])


def _gpu_table(
    node: Node, columns: tuple[str, ...], title: str = "GPUs (NVML order = PCI bus order)"
) -> Table:
    # One model on the node (the usual case) is named in the header, not on every row.
    show_model = len({gpu.name for gpu in node.gpus}) > 1
    shown_columns = [column for column in columns if column != "model" or show_model]
    table = Table(title=title, title_justify="left")
    for column in shown_columns:
        table.add_column(column, overflow="fold")
    for gpu in node.gpus:
        cells = _gpu_cells(gpu)
        table.add_row(*(cells[column] for column in shown_columns))
    return table


def _gpu_cells(gpu: Any) -> dict[str, str | Text]:
    a = gpu.answers
    versions = sorted({link.version for link in gpu.links if link.active and link.version})
    nvlinks = f"{gpu.active_nvlinks}" + (f" (v{', '.join(versions)})" if versions else "")
    return {
        "GPU": str(gpu.index),
        "model": file_text(gpu.name or "?"),
        "SM": file_text(gpu.sm or "?"),
        "memory": f"{gpu.memory_gib} GiB" if gpu.memory_gib is not None else "?",
        "NVLinks": nvlinks,
        "MIG": {True: f"on ({len(a.mig_devices)})", False: "off", None: "?"}[gpu.mig_enabled],
        "PCIe now / max": f"gen{_show(a.pcie_gen_current)} x{_show(a.pcie_width_current)} / "
        f"gen{_show(a.pcie_gen_max)} x{_show(a.pcie_width_max)}",
        "NUMA": _show(a.numa_node),
        "CPU affinity": file_text(_show(a.cpu_affinity)),
        "bus id": file_text(gpu.bus_id or "?"),
    }


def _matrix(node: Node) -> Group:
    # Title and legend are lines of their own, not the table's: a table as narrow as one GPU column
    # would fold them into its own width, a word a line.
    table = Table()
    table.add_column("")
    for gpu in node.gpus:
        table.add_column(f"GPU{gpu.index}", justify="center")
    for row in node.gpus:
        cells: list[Text] = [Text(f"GPU{row.index}", style="bold")]
        for col in node.gpus:
            cells.append(_cell(node, row.index, col.index))
        table.add_row(*cells)
    legend = (
        "NV# = NVLinks (direct or to NVSwitch); P2P ok for: "
        + ", ".join(f"{_P2P_LETTERS[cap]} {cap}" for cap in P2P_CAPABILITIES)
        + "; red = no P2P"
    )
    return Group(
        Text("Links (like nvidia-smi topo -m) and P2P", style="italic"), table, Text(legend, style="dim")
    )


def _cell(node: Node, a: int, b: int) -> Text:
    if a == b:
        return Text("X", style="dim")
    pair = node.pairs.get((a, b))
    if pair is None:
        return Text("?", style="red")
    if pair.link_class in ("nvswitch", "nvlink"):
        link = f"NV{pair.nvlink_count}" if pair.nvlink_count else "NV?"
    else:
        link = (pair.pcie or "?").upper()
    letters = "".join(_P2P_LETTERS[cap] if pair.p2p[cap] == "ok" else "-" for cap in P2P_CAPABILITIES)
    return Text(f"{link} {letters}", style=_STYLE.get(pair.link_class, ""))


def _tp_table(node: Node) -> Group:
    table = Table()
    table.add_column("TP", overflow="fold")
    table.add_column("groups: class", overflow="fold")
    table.add_column("probe measures", overflow="fold")
    for tp in range(1, len(node.gpus) + 1):
        unavailable = node.tp_unavailable(tp)
        if unavailable:
            table.add_row(str(tp), Text(unavailable, style="dim"), "-")
            continue
        groups = ", ".join(f"{_gpus(g.gpus)}: {g.group_class}" for g in node.all_tp_groups(tp))
        measure = Text()
        for n, group in enumerate(node.tp_groups(tp)):
            measure.append(
                ("; " if n else "") + f"{_gpus(group.gpus)} {group.group_class}",
                _STYLE.get(group.group_class, ""),
            )
        table.add_row(str(tp), groups, measure)
    return Group(Text("Tensor-parallel groups (contiguous, as launchers place ranks)", style="italic"), table)


def _unknown_facts(node: Node) -> list[str]:
    """Each distinct unknown answer once: 'numa_node: not_supported (GPU 0, 1)'."""
    seen: dict[tuple[str, str], list[int]] = {}
    for gpu in node.gpus:
        a = gpu.answers
        for name in (
            "name",
            "uuid",
            "bus_id",
            "cuda_cc",
            "memory_total",
            "mig_mode",
            "numa_node",
            "cpu_affinity",
            "nvlink_link_count",
            "fabric",
            "pcie_gen_max",
            "pcie_width_max",
        ):
            answer = getattr(a, name)
            if isinstance(answer, Unknown):
                seen.setdefault((name, answer.reason.value), []).append(gpu.index)
        for link in a.nvlinks:
            for name in ("state", "version", "remote_type", "remote_bus_id"):
                answer = getattr(link, name)
                if isinstance(answer, Unknown):
                    key = (f"nvlink {name}", answer.reason.value)
                    if gpu.index not in seen.get(key, []):
                        seen.setdefault(key, []).append(gpu.index)
    for pair in node.capture.pairs:
        for name in ("p2p_read", "p2p_write", "p2p_nvlink", "p2p_atomics", "p2p_pci", "common_ancestor"):
            answer = getattr(pair, name)
            if isinstance(answer, Unknown):
                key = (name, answer.reason.value)
                if pair.a not in seen.get(key, []):
                    seen.setdefault(key, []).append(pair.a)
    return [f"{name}: {reason} (GPU {', '.join(map(str, gpus))})" for (name, reason), gpus in seen.items()]


def _show(answer: Any) -> str:
    known = value(answer)
    return "?" if known is None else str(known)


def _gpus(gpus: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, gpus)) + "]"
