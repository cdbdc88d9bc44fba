#!/usr/bin/env bash
# Run the Slurm fleet recipe (deploy/slurm/fleet.sbatch) for real on this one machine: install Slurm
# from Debian's packages, start munge, slurmctld and one slurmd per node name (all on localhost),
# submit the recipe with the CPU (gloo) harness over those nodes, then check what it produced: one
# evidence file per node, a merged profile that validates as a profile set and records every node,
# and an outlier report with a verdict from the closed set for every node.
#
#   sudo bash scripts/slurm_fleet.sh            # needs root (apt-get, daemons); about 2-5 minutes
#   TOPO_GATE_FLEET_NODES=4 bash scripts/slurm_fleet.sh
#
# Everything it starts is stopped on exit (by PID); the config, spool and logs live in a temp folder.
# topo-gate must be on PATH (e.g. an activated venv with `pip install -e .` and torch for --device cpu).
set -euo pipefail

nodes=${TOPO_GATE_FLEET_NODES:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/topo-gate-slurm.XXXXXX)
pids=()

say() { printf 'slurm_fleet: %s\n' "$*" >&2; }
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

command -v topo-gate >/dev/null || { say "topo-gate is not on PATH (activate the venv)"; exit 2; }
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  say "installing slurm-wlm and munge from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

# munge: Slurm's authentication. The package creates /etc/munge/munge.key; make one if it did not.
mkdir -p "$work/munge" /run/munge
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; chmod 400 /etc/munge/munge.key; }
munged --force --foreground --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
  --log-file="$work/munge/munged.log" --seed-file="$work/munge/munged.seed" >"$work/munge/munged.out" 2>&1 &
pids+=($!)

# One slurmd per node name, each on its own port, all on localhost: Slurm schedules them as separate
# nodes, so `srun --ntasks-per-node=1` runs one task per node name exactly as on a real cluster.
cpus=$(nproc)
node_lines=""
for i in $(seq 1 "$nodes"); do
  node_lines+="NodeName=fleet$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((17000 + i)) CPUs=$cpus State=UNKNOWN"$'\n'
done
cat > "$work/slurm.conf" <<CONF
ClusterName=topo-gate-fleet
SlurmctldHost=localhost
SlurmctldPort=16817
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
$node_lines
PartitionName=fleet Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
mkdir -p "$work/state" "$work/fleet"
export SLURM_CONF=$work/slurm.conf

slurmctld -D -i -f "$SLURM_CONF" > "$work/slurmctld.out" 2>&1 &
pids+=($!)
for i in $(seq 1 "$nodes"); do
  mkdir -p "$work/spool/fleet$i"
  slurmd -D -N "fleet$i" -f "$SLURM_CONF" > "$work/slurmd-fleet$i.out" 2>&1 &
  pids+=($!)
done

say "waiting for $nodes nodes to be idle"
for _ in $(seq 1 60); do
  idle=$( (sinfo -h -N -t idle -o '%N' 2>/dev/null || true) | sort -u | wc -l)
  [ "$idle" -ge "$nodes" ] && break
  sleep 2
done
sinfo -N -l || true
[ "${idle:-0}" -ge "$nodes" ] || { say "nodes did not come up; logs in $work"; tail -n 20 "$work"/*.log >&2 || true; exit 1; }

# The recipe itself, unchanged: only the probe options differ (CPU harness, small sizes).
say "submitting deploy/slurm/fleet.sbatch on $nodes nodes"
set +e
TOPO_GATE_FLEET_DIR=$work/fleet TOPO_GATE_PROFILE=cpu-gloo.yaml \
  TOPO_GATE_PROBE_ARGS="--device cpu --tp 2 --hidden 256 --max-tokens 4 --patterns allreduce" \
  sbatch --wait --nodes="$nodes" --output="$work/fleet/job.out" "$repo/deploy/slurm/fleet.sbatch"
job_status=$?
set -e
cat "$work/fleet/job.out"

# What the recipe must have produced, whatever the verdicts.
evidence=("$work"/fleet/evidence/*.evidence.json)
[ "${#evidence[@]}" -eq "$nodes" ] || { say "expected $nodes evidence files, found ${#evidence[@]}"; exit 1; }
topo-gate validate "$work/fleet/profiles"
python3 - "$work/fleet" "$nodes" "$job_status" <<'PY'
import json, sys
from pathlib import Path
import yaml
fleet, nodes, job_status = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
profile = yaml.safe_load((fleet / "profiles" / "cpu-gloo.yaml").read_text())
record = profile["fleet"]
assert record["count"] == nodes, record
assert sorted(n["name"] for n in record["nodes"]) == [f"fleet{i}" for i in range(1, nodes + 1)], record
report = json.loads((fleet / "outliers.json").read_text())
verdicts = {n["node"]: n["verdict"] for n in report["nodes"]}
assert set(verdicts) == {f"fleet{i}" for i in range(1, nodes + 1)}, verdicts
assert set(verdicts.values()) <= {"pass", "slower", "faster", "no data", "error"}, verdicts
# The job's exit status is the outlier check's: 0 without an outlier, 1 with one.
assert job_status == (1 if report["outliers"] else 0), (job_status, report["outliers"])
print(f"slurm_fleet: OK: {nodes} nodes probed, merged profile records {record['count']} nodes; "
      f"outlier verdicts {verdicts}; job exit {job_status}")
PY
