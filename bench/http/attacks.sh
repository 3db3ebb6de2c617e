#!/usr/bin/env bash
# Hostile-client run: gpusched serve with the deployed policy
# (deploy/scheduler-policy.json: 32 MiB bodies, 30 s reads, 90 s idle; the
# other caps at their defaults) on a 5,000-node cluster, then each attack of
# bench/http/attack.cc in turn, SECONDS_EACH seconds each, on a fresh server. For each:
# the well-behaved filters' latency (5,000 names, a new connection every
# 50 ms, same source address as the attack) and the server's peak RSS (the
# deployment's memory limit is 1 GiB).
# Usage: [SECONDS_EACH=20] bench/http/attacks.sh [BUILD_DIR]
#   (default build-bench, made Release if new; an existing one keeps its build type)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build-bench}"
if [ -f "$build/CMakeCache.txt" ]; then  # an existing build keeps its type
  cmake -S . -B "$build" -DGPUSCHED_BENCH=ON >/dev/null
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" --target gpusched gen_inputs attack -j "$(nproc)"
work="$(mktemp -d)"
server=""
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
port="${PORT:-18898}"
"$build/bench/http/gen_inputs" "$work" 5000 5000

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
status=0
for mode in none answers headers-only stalled-bodies slowloris many-headers; do
  "$build/gpusched" serve --config deploy/scheduler-policy.json --cluster "$work/cluster-5000.json" \
    --listen "127.0.0.1:$port" >"$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
  "$build/bench/http/attack" 127.0.0.1 "$port" "$server" "$mode" "${SECONDS_EACH:-20}" \
    "$work/filter-5000.json" || status=1
  grep -E 'closed a connection|refused HTTP' "$work/serve.log" | sed 's/^/    log: /' | head -3 || true
  kill "$server"; wait "$server" 2>/dev/null || true
done
exit "$status"
