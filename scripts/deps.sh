#!/usr/bin/env bash
# Installs the Debian bookworm packages gpusched needs, if any are missing.
# Usage: scripts/deps.sh [extra-package ...]   (run as root on Debian)
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libboost-dev libssl-dev nlohmann-json3-dev libabsl-dev libsimdjson-dev
      libyaml-cpp-dev libjemalloc-dev libgtest-dev libgmock-dev libbenchmark-dev
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
      openssl curl "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
