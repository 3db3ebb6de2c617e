#!/usr/bin/env bash
# Builds gpusched and serves the embedded demo cluster (config/demo-cluster.json)
# on 127.0.0.1:8888. Stop with Ctrl-C (SIGINT/SIGTERM shut down gracefully).
# The server keeps what the requests change (a bind assumes devices) until it
# stops: restart it to start again from the demo cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh curl
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUSCHED_BENCH=OFF >/dev/null
cmake --build build --target gpusched -j "$(nproc)"
listen="${GPUSCHED_LISTEN:-127.0.0.1:8888}"
post="curl -s -XPOST -H 'Content-Type: application/json'"
cat <<TRY
sample requests (bodies in config/examples/; state persists until restart):
  $post --data @config/examples/filter-request.json http://$listen/scheduler/filter
  $post --data @config/examples/prioritize-request.json http://$listen/scheduler/prioritize
  $post --data @config/examples/preempt-request.json http://$listen/scheduler/preempt
  $post --data @config/examples/bind-request.json http://$listen/scheduler/bind
  curl -s http://$listen/debug/queues
  curl -s http://$listen/debug/pods/team-a/bert-xl-0
  curl -s http://$listen/metrics
TRY
exec build/gpusched serve --config config/scheduler-policy.json \
  --cluster config/demo-cluster.json --listen "$listen"
