#!/usr/bin/env bash
# The simulator's HTML reports render in a headless browser: each page (a
# placement grid and a contended replay of every policy) is screenshot in
# Chromium; a page whose charts did not draw is caught by comparing with the
# same page without its charts (it must be at least 1.5 times as large), and a
# blank page by its size.
# Usage: report_render_test.sh SOURCE_DIR GPUSCHED_BINARY CHROMIUM
set -euo pipefail
src="$1" bin="$2" chromium="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$src"

shot() {  # shot PAGE.html OUT.png: prints the PNG's size in bytes
  "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size=1100,2600 \
    --screenshot="$2" "file://$1" >/dev/null 2>&1
  stat -c %s "$2"
}

check() {  # check PAGE.html NAME
  local page="$1" name="$2"
  sed 's#<svg.*</svg>##' "$page" > "$work/$name-no-charts.html"
  local with without
  with=$(shot "$page" "$work/$name.png")
  without=$(shot "$work/$name-no-charts.html" "$work/$name-no-charts.png")
  echo "$name: $with bytes with charts, $without without"
  if [ "$with" -lt 40000 ] || [ $((2 * with)) -lt $((3 * without)) ]; then
    echo "FAIL: $name did not render its charts" >&2
    exit 1
  fi
}

"$bin" simulate --protocol fgd --grid --nodes-csv config/traces/openb/openb_node_list_gpu_node.csv \
  --traces config/traces/openb/openb_pod_list_default_head1000.csv --policies random,bestfit,fgd \
  --seeds 42-42 --threads 1 --quiet --out-dir "$work/grid" --html "$work/fgd.html" >/dev/null
grep -q 'Allocation minus the best policy' "$work/fgd.html"
check "$work/fgd.html" fgd

python3 tools/make_training_jobs.py --seed 1 --days 1 --load 0.9 --out-dir "$work/jobs" >/dev/null
"$bin" simulate --protocol replay --jobs-json "$work/jobs/jobs.json" \
  --vc-nodes "$work/jobs/pools.csv" --policies fifo-pool,srtf-pool,kueue-like,gpusched \
  --config bench/sim/replay-policy.json --html "$work/replay.html" 2>/dev/null
for title in 'Job completion time (CDF)' 'Queueing delay (CDF)' 'GPU utilisation over time' \
  'GPUs in use per namespace against its guarantee (gpusched)' '<th>policies</th>'; do
  grep -qF "$title" "$work/replay.html" || { echo "FAIL: no '$title' in the replay report" >&2; exit 1; }
done
check "$work/replay.html" replay
echo "ok"
