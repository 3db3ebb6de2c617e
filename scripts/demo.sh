#!/usr/bin/env bash
# Builds gpusched and serves the embedded demo cluster (config/demo-cluster.json)
# on 127.0.0.1:8888. Stop with Ctrl-C (SIGINT/SIGTERM shut down gracefully).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh curl
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUSCHED_BENCH=OFF >/dev/null
cmake --build build --target gpusched -j "$(nproc)"
exec build/gpusched serve --config config/scheduler-policy.json \
  --cluster config/demo-cluster.json --listen "${GPUSCHED_LISTEN:-127.0.0.1:8888}"
