#!/usr/bin/env bash
# A whole mutation run split over N processes side by side, for a many-core machine: a module's
# mutants run one after another, so more cores finish a module no sooner unless its mutants are
# shared out. Each process judges every N-th mutant of each module (scripts/mutation.py --shard K/N);
# their results are joined into the one run they share (scripts/mutation_report.py --shards).
# Usage: scripts/mutation_sharded.sh N OUT_DIR [scripts/mutation.py options] [MODULE-SUBSTRING ...]
# Writes OUT_DIR/shard-K.json and .log per shard and OUT_DIR/run.md (docs/mutation.md's section).
set -euo pipefail
cd "$(dirname "$0")/.."
count=$1
out=$2
shift 2
mkdir -p "$out"
for ((k = 0; k < count; k++)); do
  python scripts/mutation.py --jobs 1 --shard "$k/$count" --results "$out/shard-$k.json" "$@" \
    >"$out/shard-$k.log" 2>&1 &
done
# A shard below the bar exits 1: the joined run below says which modules and why.
wait || true
python scripts/mutation_report.py --shards "$out"/shard-*.json | tee "$out/run.md"
