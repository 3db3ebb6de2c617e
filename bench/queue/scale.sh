#!/usr/bin/env bash
# The queue at production depth, over HTTP (bench/queue/queue_scale.cc):
# the README's curve. Usage: bench/queue/scale.sh [BUILD_DIR] [SECONDS]
# (a Release build: cmake -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
seconds="${2:-60}"
run() {
  echo "== $*"
  "$build/bench/queue/queue_scale" "$build/gpusched" --seconds "$seconds" "$@" 2>&1 |
    grep -E "^(cluster|cold|filter|prioritize|bind|debug|queue lock|tick|memory)"
}
# Queue depth at 5,000 nodes (500 namespaces, 1,000 gangs, 5,000 names per request).
for pending in 1000 10000 50000; do
  run --nodes 5000 --pending "$pending" --namespaces 500 --gangs 1000 --names 5000
done
# Cluster size at 50,000 pending pods (every node named in the request).
for nodes in 500 20000; do
  run --nodes "$nodes" --pending 50000 --namespaces 500 --gangs 1000 --names "$nodes"
done
# The queue empty (no pending pod; requests for pods not shown yet): what the
# queue costs when nothing waits.
run --nodes 5000 --pending 50000 --namespaces 500 --gangs 1000 --names 5000 --idle
