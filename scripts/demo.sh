#!/usr/bin/env bash
# Builds gpusched and serves the embedded demo cluster (config/demo-cluster.json)
# on 127.0.0.1:8888 (GPUSCHED_LISTEN to change). The server's banner lists the
# sample requests (bodies in config/examples/). Stop with Ctrl-C (SIGINT/SIGTERM
# shut down gracefully). The server keeps what the requests change (a bind
# assumes devices) until it stops: restart it to start again from the demo
# cluster. GPUSCHED_DEMO_BINARY=path serves with an already built binary
# (no package check, no build).
set -euo pipefail
cd "$(dirname "$0")/.."
listen="${GPUSCHED_LISTEN:-127.0.0.1:8888}"
bin="${GPUSCHED_DEMO_BINARY:-}"
if [[ -z "$bin" ]]; then
  scripts/deps.sh curl
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUSCHED_BENCH=OFF >/dev/null
  cmake --build build --target gpusched -j "$(nproc)"
  bin=build/gpusched
fi
echo "demo: the server keeps what requests change (a bind assumes devices) until it is restarted"
exec "$bin" serve --config config/scheduler-policy.json \
  --cluster config/demo-cluster.json --listen "$listen"
