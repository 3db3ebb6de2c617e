#!/usr/bin/env bash
# The queue at production depth, over HTTP (bench/queue/queue_scale.cc): the
# README's curve. Each row's whole output goes to OUT_DIR/ROW.txt, headed by
# the machine, the commit and the row's flags; scripts/tables.py makes the
# README's table from those files (table queue-scale-curve).
# Usage: bench/queue/scale.sh [BUILD_DIR] [SECONDS] [OUT_DIR]
#   (defaults: build, 30, results/queue-scale/curve; BUILD_DIR configured with
#   -DGPUSCHED_BENCH=ON; run it with nothing else on the machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
seconds="${2:-30}"
out="${3:-results/queue-scale/curve}"
mkdir -p "$out"
cmake --build "$build" --target gpusched queue_scale
machine="machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)"
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!results' || echo '+changes')"
type="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")"
row() {  # ROW FLAGS...
  local name=$1
  shift
  echo "== $name: $*"
  {
    echo "$machine, commit $commit, $type, $seconds s"
    echo "flags: $*"
    "$build/bench/queue/queue_scale" "$build/gpusched" --seconds "$seconds" "$@" 2>&1
  } >"$out/$name.txt"
  grep -E "^(filter|prioritize|queue lock during|memory:)" "$out/$name.txt"
}
common=(--namespaces 500 --gangs 1000)
# Queue depth at 5,000 nodes (5,000 names per request).
for pending in 1000 10000 50000; do
  row "5000-$pending" --nodes 5000 --pending "$pending" "${common[@]}" --names 5000
done
# 1,000 pending pods per namespace instead of 100.
row 5000-50000-50ns --nodes 5000 --pending 50000 --namespaces 50 --gangs 1000 --names 5000
# Gangs asking for racks of 16 nodes, half of them required.
row 5000-50000-topology --nodes 5000 --pending 50000 "${common[@]}" --names 5000 --topology
# The queue empty (no pending pod; requests for pods not shown yet): what the
# queue costs when nothing waits.
row 5000-idle --nodes 5000 --pending 50000 "${common[@]}" --names 5000 --idle
# Cluster size at 50,000 pending pods (every node named in the request).
for nodes in 500 20000; do
  row "$nodes-50000" --nodes "$nodes" --pending 50000 "${common[@]}" --names "$nodes"
done
