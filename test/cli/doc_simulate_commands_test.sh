#!/usr/bin/env bash
# Runs every `gpusched simulate` command of the fenced code blocks of README.md
# and docs/simulator.md, as written from the repository root, and fails if one
# exits non-zero. The commands run in a scratch directory laid out like the
# repository (config/ and build/gpusched linked) so their outputs do not land
# in the tree. A `gpusched serve ... &` line of a block is started first for
# the block's --extender runs, on a free port instead of the documented 8888.
# usage: doc_simulate_commands_test.sh SOURCE_DIR GPUSCHED_BINARY
set -euo pipefail
src=$1
bin=$2
work=$(mktemp -d)
server=""
cleanup() {
  if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
ln -s "$src/config" "$work/config"
mkdir -p "$work/build"
ln -s "$bin" "$work/build/gpusched"

# A free loopback port: the first of a range that nothing listens on.
port=""
for p in $(seq 18900 18999); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    port=$p
    break
  fi
done
[[ -n "$port" ]] || { echo "no free port"; exit 1; }

# One command per line: code-block lines with continuations joined, "#"
# comments dropped, a blank line between blocks ("---").
extract() {
  awk '
    /^```/ { inblock = !inblock; if (!inblock) print "---"; next }
    !inblock { next }
    {
      line = $0
      sub(/^[ \t]+/, "", line)
      if (line ~ /^#/) next
      if (line ~ /\\$/) { sub(/\\$/, "", line); acc = acc line; next }
      print acc line
      acc = ""
    }' "$1"
}

count=0
failed=0
for doc in README.md docs/simulator.md; do
  while IFS= read -r cmd; do
    if [[ "$cmd" == "---" ]]; then
      if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""; fi
      continue
    fi
    cmd=${cmd//127.0.0.1:8888/127.0.0.1:$port}
    cmd=${cmd//\$ /}
    if [[ "$cmd" =~ ^(build/)?gpusched\ serve\ .*\&[[:space:]]*$ ]]; then
      cmd=${cmd%&*}
      [[ "$cmd" == gpusched* ]] && cmd="build/$cmd"
      (cd "$work" && exec $cmd >"$work/serve.log" 2>&1) &
      server=$!
      for _ in $(seq 1 50); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
        sleep 0.1
      done
      continue
    fi
    [[ "$cmd" =~ ^(build/)?gpusched\ simulate ]] || continue
    [[ "$cmd" == gpusched* ]] && cmd="build/$cmd"
    count=$((count + 1))
    echo "== $doc: $cmd"
    if ! (cd "$work" && $cmd --quiet >"$work/out.log" 2>&1); then
      echo "FAILED ($doc): $cmd"
      tail -5 "$work/out.log"
      failed=$((failed + 1))
    fi
  done < <(extract "$src/$doc")
done
echo "$count simulate commands, $failed failed"
[[ $count -gt 0 && $failed -eq 0 ]]
