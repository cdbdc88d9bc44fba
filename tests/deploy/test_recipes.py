"""deploy/: the Kubernetes manifests validate against the Kubernetes API schemas (offline, shipped
by the kubernetes-validate package), their topo-gate commands parse, and the profile set in the
ConfigMap is a usable set; the Slurm recipe and its runner are valid shell."""

from __future__ import annotations

import copy
import shlex
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import topo_gate
from topo_gate.cli.exec_ import command as exec_command
from topo_gate.cli.probe import command as probe_command
from topo_gate.profile.set_check import check_set

REPO = Path(__file__).resolve().parents[2]
KUBERNETES = REPO / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.37.0"  # the newest schema kubernetes-validate 1.37.0 ships
MANIFESTS = sorted(KUBERNETES.glob("*.yaml"))


def load(name: str) -> dict:
    return yaml.safe_load((KUBERNETES / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_validates_strictly(path):
    for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_validator_rejects_a_broken_manifest():
    """Proof the check can fail: a misspelt field and a wrong type are both refused."""
    job = load("01-probe-job.yaml")
    misspelt = copy.deepcopy(job)
    misspelt["spec"]["completionMod"] = misspelt["spec"].pop("completionMode")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSION, strict=True)
    wrong_type = copy.deepcopy(job)
    wrong_type["spec"]["completions"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSION, strict=True)


def test_the_probe_job_is_indexed_one_pod_per_gpu_node():
    spec = load("01-probe-job.yaml")["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    argv = shlex.split(container["args"][0].replace("$(NODE_NAME)", "gpu-node-1"))
    assert argv[:3] == ["exec", "topo-gate", "probe"]
    parsed = probe_command.make_context("probe", argv[3:])
    assert str(parsed.params["evidence_out"]) == "/fleet/evidence/gpu-node-1.evidence.json"
    assert parsed.params["tps"] == (2, 4, 8) and parsed.params["model"] == "llama-3.1-70b"


def test_the_merge_job_merges_validates_and_checks_outliers():
    [container] = load("02-merge-job.yaml")["spec"]["template"]["spec"]["containers"]
    script = container["args"][0]
    assert "topo-gate fleet merge /fleet/evidence/*.evidence.json --out /fleet/profiles/" in script
    assert "topo-gate validate /fleet/profiles" in script
    assert "topo-gate fleet outliers /fleet/evidence/*.evidence.json" in script


def test_the_configmap_is_a_usable_profile_set(tmp_path):
    data = load("03-profiles-configmap.yaml")["data"]
    for name, text in data.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert check_set(tmp_path).ok
    bundled = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
    assert data["h200-x2.yaml"] == bundled.read_text(encoding="utf-8")  # kept verbatim: digest intact
    fingerprint = topo_gate.load_profile(bundled).node.fingerprint
    assert topo_gate.gate(tmp_path, tp=2, nbytes=14336, fingerprint=fingerprint).backend == "pcie_ipc"


def test_the_launcher_runs_topo_gate_exec_on_the_mounted_set():
    pod = load("04-launcher-deployment.yaml")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "profiles")
    volume = next(v for v in pod["volumes"] if v["name"] == "profiles")
    assert volume["configMap"]["name"] == load("03-profiles-configmap.yaml")["metadata"]["name"]
    argv = container["command"] + container["args"]
    assert argv[0] == "topo-gate"
    parsed = exec_command.make_context("exec", argv[2:])
    assert parsed.params["profile"] == mount["mountPath"] == "/profiles"
    assert parsed.params["cmd"][:2] == ("vllm", "serve")
    assert str(parsed.params["tp"]) == parsed.params["cmd"][parsed.params["cmd"].index("-tp") + 1]


@pytest.mark.parametrize("script", ["deploy/slurm/fleet.sbatch", "scripts/slurm_fleet.sh"])
def test_the_slurm_scripts_are_valid_bash(script):
    subprocess.run(["bash", "-n", str(REPO / script)], check=True)


def test_the_slurm_recipe_probes_one_task_per_node_then_merges_and_checks():
    text = (REPO / "deploy" / "slurm" / "fleet.sbatch").read_text(encoding="utf-8")
    assert "srun --ntasks-per-node=1" in text and "topo-gate probe $probe_args" in text
    assert '"$fleet_dir/evidence/$name.evidence.json"' in text
    assert text.index("srun") < text.index("topo-gate fleet merge") < text.index("topo-gate fleet outliers")
