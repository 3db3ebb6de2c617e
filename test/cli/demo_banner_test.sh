#!/usr/bin/env bash
# scripts/demo.sh with a built binary: what it prints names each sample
# request once (the server's banner; the script adds none), every body it
# names is in config/examples/, and the server answers the filter sample.
# usage: demo_banner_test.sh SOURCE_DIR GPUSCHED_BINARY
set -uo pipefail
export LC_ALL=C  # ${#body} counts bytes
src=$1
bin=$2
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
port=""
for p in $(seq 18800 18899); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n "$port" ]] || { echo "no free port"; exit 1; }
GPUSCHED_DEMO_BINARY=$bin GPUSCHED_LISTEN=127.0.0.1:$port "$src/scripts/demo.sh" >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  grep -q '/metrics' "$work/out" && break
  sleep 0.1
done
cat "$work/out"
failed=0
dups=$(grep -E '^\s*curl ' "$work/out" | sed 's/^ *//' | sort | uniq -d)
if [[ -n "$dups" ]]; then
  echo "FAIL: printed more than once:"
  echo "$dups"
  failed=$((failed + 1))
fi
for sample in scheduler/filter scheduler/prioritize scheduler/preempt scheduler/bind \
              debug/queues debug/pods/ /metrics; do
  n=$(grep -cE "^\s*curl .*$port/$sample|^\s*curl .*$port$sample" "$work/out")
  if [[ $n -ne 1 ]]; then
    echo "FAIL: $sample is in $n sample lines"
    failed=$((failed + 1))
  fi
done
for body in $(grep -oE '@config/examples/[a-z-]+\.json' "$work/out" | sed 's/^@//'); do
  [[ -f "$src/$body" ]] || { echo "FAIL: no $body"; failed=$((failed + 1)); }
done
# The filter sample as printed, over bash's /dev/tcp (no curl needed).
body=$(cat "$src/config/examples/filter-request.json")
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
  "${#body}" "$body" >&3
answer=$(cat <&3)
exec 3<&-
if [[ "$answer" != *'"NodeNames":["dgx-a100-01"'* ]]; then
  echo "FAIL: the filter sample's answer: $answer"
  failed=$((failed + 1))
fi
echo "$failed failed"
[[ $failed -eq 0 ]]
