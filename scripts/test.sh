#!/usr/bin/env bash
# Builds everything (tests and benchmarks) and runs the whole test suite with ctest.
# Options via environment: BUILD_DIR (default build-test), CMAKE_ARGS (extra cmake flags).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh kubectl 2>/dev/null || scripts/deps.sh
build="${BUILD_DIR:-build-test}"
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 900
