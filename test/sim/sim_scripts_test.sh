#!/usr/bin/env bash
# What a newcomer meets running the simulator without the full traces or a
# build: every bench/sim script (and tools/make_openb_variants.py) exits with
# one line naming what is missing and where to get it (the trace and
# config/traces/SOURCE.md, or the build), never a traceback; and nothing,
# neither those scripts nor `gpusched simulate`, writes into the working
# directory: a grid without --out-dir is refused, with it the files land there.
# usage: sim_scripts_test.sh SOURCE_DIR GPUSCHED_BINARY
set -uo pipefail
src=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cwd="$work/cwd"
mkdir -p "$cwd" "$work/fake-philly"
# The Philly scripts' files, present but empty: they get as far as the binary.
touch "$work/fake-philly/philly_jobs_pollux.csv" "$work/fake-philly/helios_qssf_philly_vc_nodes.csv"
failed=0

# expect_one_line NAME PATTERN COMMAND...: non-zero exit, one stderr line
# matching PATTERN, no traceback, no stdout.
expect_one_line() {
  local name=$1 pattern=$2
  shift 2
  (cd "$cwd" && "$@" >"$work/out" 2>"$work/err")
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [[ $rc -eq 0 ]] || [[ $lines -ne 1 ]] || grep -q Traceback "$work/err" ||
     ! grep -Eq -- "$pattern" "$work/err" || [[ -s "$work/out" ]]; then
    echo "FAIL $name: exit $rc, $lines stderr lines:"
    cat "$work/err" "$work/out"
    failed=$((failed + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

sim="$src/bench/sim"
traces='config/traces/SOURCE.md'
expect_one_line "openb_grid without traces" "openb_pod_list_default.csv.*$traces.*--traces-dir" \
  python3 "$sim/openb_grid.py" "$work/no-build" --traces-dir "$work/none"
expect_one_line "philly_grid without traces" "philly_jobs_pollux.csv.*$traces.*--traces-dir" \
  python3 "$sim/philly_grid.py" "$work/no-build" --traces-dir "$work/none" --out-dir "$work/o"
expect_one_line "philly_pool without traces" "philly_jobs_pollux.csv.*$traces.*--traces-dir" \
  python3 "$sim/philly_pool.py" "$work/no-build" --traces-dir "$work/none"
expect_one_line "make_openb_variants without the trace" "openb_pod_list_default.csv.*$traces" \
  python3 "$src/tools/make_openb_variants.py" --default "$work/none/openb_pod_list_default.csv" \
  --out-dir "$work/variants"
expect_one_line "philly_pool without a build" "no gpusched binary in .*no-build" \
  python3 "$sim/philly_pool.py" "$work/no-build" --traces-dir "$work/fake-philly"
expect_one_line "philly_grid without a build" "no gpusched binary in .*no-build" \
  python3 "$sim/philly_grid.py" "$work/no-build" --traces-dir "$work/fake-philly" \
  --out-dir "$work/o"
expect_one_line "contended without a build" "no gpusched binary in .*no-build" \
  python3 "$sim/contended.py" "$work/no-build"
expect_one_line "topology without traces" "philly_jobs_pollux.csv.*$traces.*--traces-dir" \
  python3 "$sim/topology.py" "$work/no-build" --traces-dir "$work/none" --out-dir "$work/o"
expect_one_line "topology without a build" "no gpusched binary in .*no-build" \
  python3 "$sim/topology.py" "$work/no-build" --traces-dir "$work/fake-philly" --out-dir "$work/o"
expect_one_line "philly_grid --render without a grid" "no .*grid.json" \
  python3 "$sim/philly_grid.py" --render --out-dir "$work/none"

grid=(simulate --protocol fgd --grid
      --nodes-csv "$src/config/traces/openb/openb_node_list_gpu_node.csv"
      --traces "$src/config/traces/openb/openb_pod_list_default_head1000.csv"
      --policies random --seeds 42-42 --threads 1 --quiet)
expect_one_line "simulate --grid without --out-dir" "--out-dir" "$bin" "${grid[@]}"
if ! (cd "$cwd" && "$bin" "${grid[@]}" --out-dir "$work/grid" >/dev/null 2>&1) ||
   [[ ! -s "$work/grid/grid.csv" || ! -s "$work/grid/grid.md" ]]; then
  echo "FAIL simulate --grid --out-dir: no grid.csv and grid.md in --out-dir"
  failed=$((failed + 1))
fi
# A run without --out writes nothing.
(cd "$cwd" && "$bin" simulate --protocol fgd \
  --nodes-csv "$src/config/traces/openb/openb_node_list_gpu_node.csv" \
  --pods-csv "$src/config/traces/openb/openb_pod_list_default_head1000.csv" \
  --policy random --quiet >/dev/null 2>&1) ||
  { echo "FAIL simulate fgd run"; failed=$((failed + 1)); }

if [[ -n "$(ls -A "$cwd")" ]]; then
  echo "FAIL: written into the working directory:"
  ls -lA "$cwd"
  failed=$((failed + 1))
fi
if [[ -n "$(ls -A "$sim" | grep -v -E '\.(py|cc|json|txt)$|^variants$')" ]]; then
  echo "FAIL: left in bench/sim:"
  ls -A "$sim"
  failed=$((failed + 1))
fi
echo "$failed failed"
[[ $failed -eq 0 ]]
