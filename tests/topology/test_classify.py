"""Each capture classifies as a person reading `nvidia-smi topo -m` would expect (expected_nodes.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from capture_paths import CAPTURES, HERE
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.topology.capture import load_capture
from topo_gate.topology.classify import PAIR_CLASSES, classify_node, weakest
from topo_gate.topology.model import Node, build_node

EXPECTED = yaml.safe_load((HERE / "expected_nodes.yaml").read_text())


def topo_m(node: Node) -> str:
    """The link matrix in nvidia-smi's words: NV# for NVLink pairs, the PCIe level otherwise."""
    rows = []
    for a in node.gpus:
        cells = []
        for b in node.gpus:
            pair = node.pairs.get((a.index, b.index))
            if pair is None:
                cells.append("X")
            elif pair.link_class in ("nvswitch", "nvlink"):
                cells.append(f"NV{pair.nvlink_count}")
            else:
                cells.append(_nvlink_or_pcie(node, a.index, b.index))
        rows.append(" ".join(f"{c:<4}" for c in cells).rstrip())
    return "\n".join(rows) + "\n"


def _nvlink_or_pcie(node: Node, a: int, b: int) -> str:
    # topo -m shows NV# whenever links exist, even where P2P over them is refused (MIG).
    links = sum(1 for link in node.gpus[a].links if link.active and link.remote_gpu == b)
    return f"NV{links}" if links else (node.pairs[(a, b)].pcie or "?").upper()


@pytest.fixture(params=sorted(EXPECTED), ids=str)
def case(request: pytest.FixtureRequest) -> tuple[Node, dict]:
    return build_node(load_capture(CAPTURES / f"{request.param}.json")), EXPECTED[request.param]


def test_every_capture_has_expectations() -> None:
    captures = {p.stem for p in CAPTURES.glob("*.json")}
    assert captures == set(EXPECTED)
    assert len({c for c in captures if c.endswith(".synthetic")}) >= 7


def test_interconnect_class(case: tuple[Node, dict]) -> None:
    node, expected = case
    assert node.interconnect == expected["interconnect"], node.interconnect_facts


def test_link_matrix_reads_like_topo_m(case: tuple[Node, dict]) -> None:
    node, expected = case
    assert topo_m(node) == _normalize(expected["topo_m"])


def _normalize(matrix: str) -> str:
    return (
        "\n".join(" ".join(f"{c:<4}" for c in row.split()).rstrip() for row in matrix.strip().splitlines())
        + "\n"
    )


def test_pair_classes(case: tuple[Node, dict]) -> None:
    node, expected = case
    for key, cls in expected.get("pair_classes", {}).items():
        a, b = map(int, key.split("-"))
        assert node.pair_class(a, b) == cls, node.pairs[(a, b)].reason


def test_tp_groups(case: tuple[Node, dict]) -> None:
    node, expected = case
    for tp, classes in expected["tp"].items():
        if classes == "unavailable":
            assert node.all_tp_groups(tp) == [] and node.tp_groups(tp) == []
            assert node.tp_unavailable(tp).startswith(expected["unavailable"][tp])
            continue
        groups = node.all_tp_groups(tp)
        assert [g.group_class for g in groups] == classes
        assert [list(g.gpus) for g in groups] == [
            list(range(i, i + tp)) for i in range(0, tp * len(classes), tp)
        ]
        # the probe measures each distinct class once, on the first group of that class
        assert [g.group_class for g in node.tp_groups(tp)] == list(dict.fromkeys(classes))
        assert node.tp_unavailable(tp) is None


def test_excluded_and_fabric(case: tuple[Node, dict]) -> None:
    node, expected = case
    assert [index for index, _ in node.excluded] == expected["excluded"]
    assert node.fabric["multi_node"] == expected["multi_node"]


def test_tp_larger_than_the_node_is_unavailable_with_a_reason(case: tuple[Node, dict]) -> None:
    node, _ = case
    tp = len(node.gpus) + 1
    assert node.tp_unavailable(tp) == f"needs {tp} GPUs, this node has {len(node.usable)} usable" + (
        " (" + "; ".join(f"GPU {i} excluded: {r}" for i, r in node.excluded) + ")" if node.excluded else ""
    )
    assert node.tp_unavailable(0) is not None


def test_mig_gpu_is_reported_with_its_instances_and_the_reason() -> None:
    node = build_node(load_capture(CAPTURES / "a100-mig-x2.synthetic.json"))
    [(index, reason)] = node.excluded
    assert index == 1 and "MIG enabled (3 instance(s): NVIDIA A100 80GB PCIe MIG 2g.20gb)" in reason
    assert node.to_hardware_dict()["excluded"] == [{"gpu": 1, "reason": reason}]
    assert node.to_hardware_dict()["gpus"][1]["mig"] is True


def test_hardware_dict_lists_every_group_for_every_tp(case: tuple[Node, dict]) -> None:
    node, _ = case
    hardware = node.to_hardware_dict()
    assert set(hardware["tp_groups"]) == {str(tp) for tp in range(1, len(node.usable) + 1)}
    for tp, groups in hardware["tp_groups"].items():
        assert groups == [{"gpus": list(g.gpus), "class": g.group_class} for g in node.all_tp_groups(int(tp))]


# -- properties -------------------------------------------------------------------------------------

classes = st.sampled_from(PAIR_CLASSES)


@given(st.lists(classes, min_size=1, max_size=10))
def test_weakest_is_the_last_in_rank_order_and_order_free(values: list[str]) -> None:
    assert weakest(values) == max(values, key=PAIR_CLASSES.index)
    assert weakest(reversed(values)) == weakest(values)
    assert all(PAIR_CLASSES.index(weakest(values)) >= PAIR_CLASSES.index(v) for v in values)


@given(st.data())
def test_node_class_does_not_depend_on_gpu_numbering(data: st.DataObject) -> None:
    n = data.draw(st.integers(2, 6))
    pair_class = {(a, b): data.draw(classes) for a in range(n) for b in range(a + 1, n)}
    pcie = {k: data.draw(st.sampled_from(["pix", "pxb", "phb", "node", "sys", None])) for k in pair_class}
    perm = data.draw(st.permutations(range(n)))

    def renumber(mapping: dict) -> dict:
        out = {}
        for (a, b), v in mapping.items():
            x, y = sorted((perm[a], perm[b]))
            out[(x, y)] = v
        return out

    usable = list(range(n))
    assert (
        classify_node(usable, pair_class, pcie).name
        == classify_node(usable, renumber(pair_class), renumber(pcie)).name
    )


@given(st.data())
def test_group_class_is_its_weakest_pair(data: st.DataObject) -> None:
    node = build_node(
        load_capture(
            CAPTURES
            / data.draw(
                st.sampled_from(
                    [
                        "rtx-pro-6000-pcie-x8.synthetic.json",
                        "v100-dgx1-old-driver-x8.synthetic.json",
                        "h100-sxm-nvswitch-x8.synthetic.json",
                    ]
                )
            )
        )
    )
    members = tuple(sorted(data.draw(st.sets(st.integers(0, 7), min_size=2, max_size=8))))
    group = node.group(members)
    inside = [node.pair_class(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    assert group.group_class == weakest(inside)


def test_real_h200_capture_agrees_with_the_reference_reading() -> None:
    """The tool's own capture says what the hand-made reference reading of the same machine said."""
    # ../shared/reference beside the repo holds the reading; a checkout without it has nothing to compare.
    reference_path = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "h200-x2.nvml.json"
    if not reference_path.is_file():
        pytest.skip(f"no reference reading at {reference_path}")
    reference = json.loads(reference_path.read_text())
    capture = load_capture(CAPTURES / "h200-x2.real.json")
    assert (
        capture.system.driver == reference["driver"]
        and capture.system.cuda_driver == reference["cuda_driver"]
    )
    for gpu, ref in zip(capture.gpus, reference["gpus"], strict=True):
        assert (gpu.name, list(gpu.cuda_cc), gpu.memory_total) == (ref["name"], ref["cc"], ref["mem"])
        assert [(link.state, link.version, link.remote_type, link.remote_bus_id) for link in gpu.nvlinks] == [
            (r["state"], r["version"], r["remote_type"], r["remote"]) for r in ref["links"]
        ]
    for pair, ref in zip(capture.pairs, reference["pairs"], strict=True):
        assert (pair.p2p_write, pair.p2p_nvlink, pair.p2p_pci, pair.common_ancestor) == (
            ref["write"],
            ref["nvlink"],
            ref["pci"],
            ref["ancestor"],
        )
        # The reference asked READ with the binding's tuple and got ArgumentError; topo-gate passes 0.
        assert ref["read"] == "ERR:ArgumentError" and pair.p2p_read == 0


@pytest.mark.parametrize(
    ("stem", "expected"),
    [
        ("h200-x2.real", {"driver": "580.159.04", "cuda_driver": "13.0", "nvml": "13.580.159.04"}),
        (
            "v100-dgx1-old-driver-x8.synthetic",
            {"driver": "418.87.01", "cuda_driver": "10.1", "nvml": "10.418.87.01"},
        ),
    ],
)
def test_software_dict(stem: str, expected: dict) -> None:
    assert build_node(load_capture(CAPTURES / f"{stem}.json")).software_dict() == expected


def test_software_block_adds_this_environment() -> None:
    from topo_gate.topology.software import software_block

    block = software_block(build_node(load_capture(CAPTURES / "h200-x2.real.json")))
    assert block["cuda_driver"] == "13.0" and set(block) >= {"torch", "nccl", "flashinfer", "python"}


def test_flashinfer_without_metadata_is_read_from_its_build_meta(tmp_path, monkeypatch) -> None:
    # An offline GPU node unpacks FlashInfer onto PYTHONPATH: importable, no dist-info.
    from topo_gate.topology import software

    package = tmp_path / "flashinfer"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('reading the version must not import it')\n")
    (package / "_build_meta.py").write_text('# generated\n__version__ = "0.7.2.post1"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(software, "package_version", lambda *names: None)
    assert software.flashinfer_version() == "0.7.2.post1"
    (package / "_build_meta.py").write_text("version = 'no'\n")
    assert software.flashinfer_version() is None


def test_the_software_block_records_the_launcher_releases_installed(monkeypatch) -> None:
    from topo_gate.topology import software

    versions = {"vllm": "0.34.0", "sglang": None, "tensorrt_llm": "1.2.1"}
    real = software.package_version
    monkeypatch.setattr(software, "package_version", lambda *names: versions.get(names[0], real(*names)))
    recorded = software.python_versions()
    assert {name: recorded[name] for name in versions} == versions
