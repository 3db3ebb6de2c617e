#!/usr/bin/env bash
# HTTP load run: a 5,000-node cluster file, gpusched serve on loopback, then
#  - filter+prioritize cycles on one keep-alive connection (500 / 5,000 / 20,000 names),
#  - wrk throughput of filter at 5,000 names.
# Usage: [CONFIG=policy.json] bench/http/load.sh [BUILD_DIR]
#   (CONFIG default: config/scheduler-policy.json; BUILD_DIR default: build-bench, Release)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build-bench}"
scripts/deps.sh wrk
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target gpusched gen_inputs cycle_latency -j "$(nproc)"
work="$(mktemp -d)"
server=""
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
port="${PORT:-18899}"
"$build/bench/http/gen_inputs" "$work" 5000 500 5000
mv "$work/cluster-5000.json" "$work/c5000.json"
"$build/bench/http/gen_inputs" "$work" 20000 20000

serve() {  # serve CLUSTER_FILE
  "$build/gpusched" serve --config "${CONFIG:-config/scheduler-policy.json}" --cluster "$1" \
    --listen "127.0.0.1:$port" --threads "${THREADS:-2}" >"$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return; sleep 0.2; done
  echo "server did not start"; cat "$work/serve.log"; exit 1
}

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
serve "$work/c5000.json"
for k in 500 5000; do
  printf 'cluster=5000 names=%-6s ' "$k"
  "$build/bench/http/cycle_latency" 127.0.0.1 "$port" "$work/filter-$k.json" 3000
done
echo "wrk: filter, 5000 names, 2 threads x 4 connections, 10 s"
BODY_FILE="$work/filter-5000.json" wrk -t2 -c4 -d10s --latency -s bench/http/filter.lua \
  "http://127.0.0.1:$port/scheduler/filter" | sed -n '1,20p'
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^gpusched_cache_bytes|^gpusched_cluster_nodes'
kill "$server"; wait "$server" 2>/dev/null || true

serve "$work/cluster-20000.json"
printf 'cluster=20000 names=20000 '
"$build/bench/http/cycle_latency" 127.0.0.1 "$port" "$work/filter-20000.json" 500
