#!/usr/bin/env python3
"""gpusched against FGD beyond the published openb traces, in one command.

Generates the openb variant grid (tools/make_openb_variants.py: model-
constrained share 5..40 %, multi-GPU share 20..50 %, sharing share 20..100 %,
CPU-only pods 0..3x the default's), runs the fgd protocol (1,213 GPU nodes,
tune 1.3) for FGD (`fgd`), the shipped configuration in-process (`gpusched`,
every pod scored) and as deployed (`gpusched-extender`, what serve answers,
CPU-only pods not sent), over several seeds, and prints one markdown table per
set: mean unallocated GPU % at 100 % arrival per policy, gpusched minus FGD,
and whether gpusched is below FGD.

Sets (fixed; the split alternates along each axis of the grid):
  tune      gen-gpuspec 05 15 25 35, gen-multigpu 20 30 40 50,
            gen-gpushare 20 40 60 80 100, gen-cpu 0 0.5 1.5 2.25 2.5 x
  held-out  gen-gpuspec 10 20 30 40, gen-multigpu 25 35 45,
            gen-gpushare 30 50 70 90, gen-cpu 0.25 0.75 2 3 x
  public    every openb_pod_list_*.csv in --public-dir (the published traces)
Tune the policy on `tune` only; `held-out` and `public` measure it.

Usage (from the repository root, after a build):
  python3 bench/sim/openb_grid.py [BUILD_DIR] [--traces-dir DIR] [--out-dir DIR]
      [--public-dir DIR] [--sets tune,held-out,public] [--seeds 42-46] [--config FILE]
Needs the full openb traces (config/traces/SOURCE.md, "Full traces"), read
from --traces-dir (default: shared/traces/openb next to the repository).
Each run takes about 0.5-1 s; the default (3 sets, 5 seeds, 3 policies) about
10-15 minutes on one core. Work files go to --out-dir (default:
BUILD_DIR/openb-grid/).
"""
import argparse
import csv
import glob
import os
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the tree
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_openb_variants as variants  # noqa: E402
import sim_common  # noqa: E402  (trace and binary checks)


def split():
    """(tune, held_out) variant names: alternate points of each axis."""
    tune, held = [], []
    axes = [
        [f"gen-gpuspec{s:02d}" for s in variants.GPUSPEC],
        [f"gen-multigpu{m}" for m in variants.MULTIGPU],
        [f"gen-gpushare{x}" for x in variants.GPUSHARE],
        [f"gen-cpu{variants.fmt(k)}x" for k in variants.CPU],
    ]
    for axis in axes:
        tune += axis[0::2]
        held += axis[1::2]
    tune += [f"gen-cpu{variants.fmt(k)}x" for k in variants.CPU_CLIFF]
    order = {name: i for i, name in enumerate(variants.grid_names())}
    return sorted(tune, key=order.get), sorted(held, key=order.get)


def run_grid(binary, nodes, paths, policies, seeds, config, out_dir):
    """Runs one `simulate --grid` process; returns {(trace, policy): [unalloc]}."""
    cmd = [binary, "simulate", "--protocol", "fgd", "--grid", "--nodes-csv", nodes, "--traces",
           ",".join(paths), "--policies", ",".join(policies), "--seeds", seeds, "--threads", "1",
           "--quiet", "--out-dir", out_dir]
    if config:
        cmd += ["--config", config]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"gpusched simulate failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    values = {}
    with open(os.path.join(out_dir, "grid.csv"), newline="") as f:
        for r in csv.DictReader(f):
            key = (r["trace"], r["policy"])
            values.setdefault(key, []).append(float(r["unallocated_gpu_pct_at_100"]))
    return values


def table(title, names, values, policies):
    """Markdown: FGD mean, each gpusched policy's mean, difference, below?"""
    ours = [p for p in policies if p != "fgd"]
    head = "| variant | FGD |"
    rule = "|---|---|"
    for p in ours:
        head += f" {p} | diff | below |"
        rule += "---|---|---|"
    lines = [f"\n### {title}\n", head, rule]
    wins = {p: 0 for p in ours}
    worst = {p: None for p in ours}
    n = 0
    for name in names:
        fgd = values.get((name, "fgd"))
        if not fgd:
            continue
        n += 1
        f = statistics.mean(fgd)
        row = f"| {name} | {f:.2f} |"
        for p in ours:
            v = values.get((name, p))
            if not v:
                row += " — | — | — |"
                continue
            g = statistics.mean(v)
            d = g - f
            wins[p] += d < 0
            worst[p] = d if worst[p] is None else max(worst[p], d)
            row += f" {g:.2f} | {d:+.2f} | {'yes' if d < 0 else '**no**'} |"
        lines.append(row)
    for p in ours:
        if worst[p] is not None:
            lines.append(f"\n{p}: below FGD on {wins[p]}/{n}; largest diff {worst[p]:+.2f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--traces-dir", default=os.path.join(sim_common.DEFAULT_TRACES, "openb"),
                    help="folder with openb_node_list_gpu_node.csv and openb_pod_list_default.csv "
                         "(default: shared/traces/openb next to the repository)")
    ap.add_argument("--out-dir", help="the generated variants and each set's grid.csv / grid.md "
                                      "(default: BUILD_DIR/openb-grid)")
    ap.add_argument("--public-dir", default="", help="published pod lists (default: --traces-dir)")
    ap.add_argument("--sets", default="tune,held-out,public")
    ap.add_argument("--seeds", default="42-46")
    ap.add_argument("--policies", default="fgd,gpusched,gpusched-extender")
    ap.add_argument("--config", default=os.path.join(ROOT, "config", "scheduler-policy.json"),
                    help="gpusched policy (default: the shipped config/scheduler-policy.json, "
                         "wherever the script is run from)")
    ap.add_argument("--only", default="", help="comma-separated variants (overrides --sets)")
    a = ap.parse_args()
    nodes = os.path.join(a.traces_dir, "openb_node_list_gpu_node.csv")
    default = os.path.join(a.traces_dir, "openb_pod_list_default.csv")
    public = sorted(glob.glob(os.path.join(a.public_dir or a.traces_dir, "openb_pod_list_*.csv")))
    chosen = ["only"] if a.only else a.sets.split(",")
    need = [nodes, default]
    if "public" in chosen and not public:
        need.append(os.path.join(a.public_dir or a.traces_dir, "openb_pod_list_*.csv"))
    if a.only:
        need += [os.path.join(a.traces_dir, f"openb_pod_list_{n}.csv")
                 for n in a.only.split(",") if not n.startswith("gen-")]
    sim_common.require_traces("openb", need)
    binary = sim_common.require_binary(a.build)
    work = a.out_dir or os.path.join(a.build, "openb-grid")
    gen_dir = os.path.join(work, "variants")
    tune, held = split()
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_openb_variants.py"),
                    "--default", default, "--out-dir", gen_dir, "--only", ",".join(tune + held)],
                   check=True, stderr=subprocess.DEVNULL)
    gen_path = lambda n: os.path.join(gen_dir, f"openb_pod_list_{n}.csv")  # noqa: E731
    sets = {
        "tune": ("TUNE", tune, [gen_path(n) for n in tune]),
        "held-out": ("HELD-OUT", held, [gen_path(n) for n in held]),
        "public": ("public openb traces", [variants_name(p) for p in public], public),
    }
    policies = a.policies.split(",")
    print(f"seeds {a.seeds}; mean unallocated GPU % at 100 % arrival; diff = gpusched - FGD")
    if a.only:
        names = a.only.split(",")
        sets["only"] = ("selected", names, [gen_path(n) if n.startswith("gen-") else
                                            os.path.join(a.traces_dir, f"openb_pod_list_{n}.csv")
                                            for n in names])
    for key in chosen:
        title, names, paths = sets[key]
        values = run_grid(binary, nodes, paths, policies, a.seeds, a.config,
                          os.path.join(work, key))
        print(table(title, names, values, policies), flush=True)


def variants_name(path):
    """openb_pod_list_gpuspec10.csv -> gpuspec10."""
    return os.path.basename(path)[len("openb_pod_list_"):-len(".csv")]


if __name__ == "__main__":
    main()
