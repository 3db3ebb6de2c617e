#!/usr/bin/env python3
"""The Philly windows grid: gpusched against the Kueue-like baseline.

Replays 4-day windows of the Philly trace (days 0-4, 4-8, ..., 20-24 from
2017-10-01: --offsets) on one pool of 40, 44 and 48 8-GPU nodes (--nodes),
with all jobs in one namespace and with each VC a namespace guaranteed its
share of the pool (--namespaces one,vc), for a list of replay policies
(--policies) and gpusched configurations (--variant LABEL=CONFIG.json, each a
row of the policy `gpusched` with that config; --config-for POLICY=CONFIG.json
sets the config of a listed policy, bench/sim/replay-policy.json otherwise).
Runs one replay at a time. Writes every run's raw JSON (raw/), grid.json and
grid.md under --out-dir, and prints per window the avg JCT of every row and
its ratio to the Kueue-like baseline's.

Halves, to tune on one and report the other: --half tune takes the windows
at offsets 0, 8 and 16 days, --half held-out those at 4, 12 and 20 (every
other window; node counts and namespace modes are in both halves).

Usage (from the repository root, after a build):
  python3 bench/sim/philly_grid.py [BUILD_DIR] --out-dir results/philly-grid
      [--half tune|held-out|all] [--offsets 0,4,...] [--nodes 40,44,48]
      [--namespaces one,vc] [--policies kueue-like,gpusched]
      [--variant NAME=CONFIG.json ...] [--config-for POLICY=CONFIG.json ...]
      [--tables avg_jct_s,preemptions,...] [--traces-dir DIR]
Needs the full Philly trace (config/traces/SOURCE.md, "Full traces"), read
from --traces-dir (default: shared/traces/philly next to the repository).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philly_pool  # noqa: E402  (window and VC scaling)
import sim_common  # noqa: E402  (trace and binary checks)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HALVES = {"tune": [0, 8, 16], "held-out": [4, 12, 20], "all": [0, 4, 8, 12, 16, 20]}
BASELINE = "kueue-like"


def pairs(items, what):
    """NAME=PATH arguments as a dict, checked."""
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            sys.exit(f"{what} wants NAME=PATH, got '{item}'")
        if not os.path.isfile(path):
            sys.exit(f"{what} {name}: no file {path}")
        out[name] = os.path.abspath(path)
    return out


def rows_of(a):
    """(label, policy, config) of every row."""
    default = os.path.join(ROOT, "bench/sim/replay-policy.json")
    config_for = pairs(a.config_for, "--config-for")
    rows = [(p, p, config_for.get(p, default)) for p in a.policies.split(",") if p]
    for label, path in pairs(a.variant, "--variant").items():
        rows.append((label, "gpusched", path))
    if not any(label == BASELINE for label, _, _ in rows):
        rows.insert(0, (BASELINE, BASELINE, default))
    return rows


def run_one(binary, jobs, vcs, policy, config, out):
    """One replay; its result dict, or {"error": ...}."""
    start = time.time()
    p = subprocess.run([binary, "simulate", "--protocol", "replay", "--jobs-csv", jobs,
                        "--vc-nodes", vcs, "--policies", policy, "--config", config, "--load",
                        "1", "--out", out, "--quiet"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"}
    r = json.load(open(out))[0]
    r["replay_s"] = round(time.time() - start, 2)
    return r


def window_rows(a, binary, rows, offset, nodes, mode, work):
    """Every row on one window: {label: result}."""
    jobs = os.path.join(work, f"jobs-{mode}-{offset:g}.csv")
    if not os.path.exists(jobs):
        philly_pool.window(a.trace, a.days, jobs, mode == "one", offset)
    vcs = os.path.join(work, f"vcs-{mode}-{nodes}.csv")
    philly_pool.scaled_vcs(None if mode == "one" else a.vc_csv, nodes, vcs)
    results = {}
    for label, policy, config in rows:
        out = os.path.join(a.out_dir, "raw", f"{label}-d{offset:g}-n{nodes}-{mode}.json")
        results[label] = run_one(binary, jobs, vcs, policy, config, out)
    return results


def cell(r, base, key="avg_jct_s"):
    """`key` of a result, with its ratio to the baseline's."""
    if "error" in r:
        return "failed"
    v = r.get(key)
    if v is None:
        return "—"
    text = f"{v:,.0f}" if abs(v) >= 10 or float(v).is_integer() else f"{v:.3f}"
    if base is None or "error" in base or not base.get(key):
        return text
    return f"{text} ({v / base[key]:.2f})"


def markdown(grid, rows, key):
    labels = [label for label, _, _ in rows]
    lines = [f"#### {key}\n", "| window | nodes | namespaces | " + " | ".join(labels) + " |",
             "|---" * (len(labels) + 3) + "|"]
    for g in grid:
        base = g["results"].get(BASELINE)
        cells = [cell(g["results"][label], base, key) for label in labels]
        lines.append(f"| days {g['offset']:g}-{g['offset'] + g['days']:g} | {g['nodes']} | "
                     f"{g['namespaces']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n{key} (ratio to {BASELINE}).\n"


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--out-dir", required=True, help="where the raw runs and the tables go")
    ap.add_argument("--half", choices=sorted(HALVES), default="all")
    ap.add_argument("--offsets", help="days from 2017-10-01, comma-separated (overrides --half)")
    ap.add_argument("--days", type=float, default=4)
    ap.add_argument("--nodes", default="40,44,48")
    ap.add_argument("--namespaces", default="one,vc", help="one, vc (each VC a namespace) or both")
    ap.add_argument("--policies", default="kueue-like,gpusched")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=CONFIG.json")
    ap.add_argument("--config-for", action="append", default=[], metavar="POLICY=CONFIG.json")
    ap.add_argument("--tables", default="avg_jct_s",
                    help="result fields tabulated in grid.md, e.g. avg_jct_s,preemptions")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite grid.md from the grid.json already in --out-dir")
    ap.add_argument("--traces-dir", default=os.path.join(sim_common.DEFAULT_TRACES, "philly"),
                    help="philly_jobs_pollux.csv and helios_qssf_philly_vc_nodes.csv "
                         "(default: shared/traces/philly next to the repository)")
    return ap.parse_args()


def render(a):
    """Rewrites grid.md from --out-dir's grid.json with --tables."""
    path = os.path.join(a.out_dir, "grid.json")
    if not os.path.isfile(path):
        sys.exit(f"--render: no {path} (run the grid into --out-dir first)")
    saved = json.load(open(path))
    rows = [(r["label"], r["policy"], r["config"]) for r in saved["rows"]]
    tables = "\n".join(markdown(saved["grid"], rows, key) for key in a.tables.split(","))
    with open(os.path.join(a.out_dir, "grid.md"), "w") as f:
        f.write(tables)
    print(tables)


def main():
    a = parse()
    if a.render:
        return render(a)
    a.trace = os.path.join(a.traces_dir, "philly_jobs_pollux.csv")
    a.vc_csv = os.path.join(a.traces_dir, "helios_qssf_philly_vc_nodes.csv")
    philly_pool.require_traces(a.trace, a.vc_csv)
    binary = sim_common.require_binary(a.build)
    rows = rows_of(a)
    os.makedirs(os.path.join(a.out_dir, "raw"), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpusched-philly-grid-") as work:  # window CSVs
        grid = run_grid(a, binary, rows, work)
    json.dump({"rows": [{"label": l, "policy": p, "config": os.path.relpath(c, ROOT)}
                        for l, p, c in rows],
               "grid": grid}, open(os.path.join(a.out_dir, "grid.json"), "w"), indent=1)
    tables = "\n".join(markdown(grid, rows, key) for key in a.tables.split(","))
    with open(os.path.join(a.out_dir, "grid.md"), "w") as f:
        f.write(tables)
    print("\n" + tables)


def run_grid(a, binary, rows, work):
    """Every row on every window, node count and namespace mode."""
    offsets = ([float(x) for x in a.offsets.split(",")] if a.offsets else HALVES[a.half])
    grid = []
    for offset in offsets:
        for nodes in [int(n) for n in a.nodes.split(",")]:
            for mode in a.namespaces.split(","):
                results = window_rows(a, binary, rows, offset, nodes, mode, work)
                grid.append({"offset": offset, "days": a.days, "nodes": nodes,
                             "namespaces": mode, "results": results})
                base = results.get(BASELINE)
                print(f"days {offset:g}-{offset + a.days:g}, {nodes} nodes, {mode}: " +
                      ", ".join(f"{label} {cell(r, base)}" for label, r in results.items()),
                      flush=True)
    return grid


if __name__ == "__main__":
    main()
