#!/usr/bin/env python3
"""The Philly trace on one contended pool, in one command.

The first 4 days of the Philly trace from 2017-10-01 (4,272 jobs) at x1 on
one pool of N 8-GPU nodes (48 and 40 by default), each VC a namespace whose
guarantee is its share of the pool (the Helios VC sizes scaled to N nodes,
largest remainder), replayed by the pooled FIFO/SJF/SRTF baselines (SRTF
knows durations: an oracle), the least-attained-service baseline, the
Kueue-like and KAI-like baselines, gpusched in strict submission order
(StrictFIFO with attainedService off, reclaim anyBorrower) and gpusched as
shipped: BestEffortFIFO with the attained-service ordering (`attainedService`
on every namespace; no durations; --queueing changes its strategy). Prints one markdown
table per pool size.

Usage (from the repository root, after a build):
  python3 bench/sim/philly_pool.py [BUILD_DIR] [--nodes 48,40] [--days 4]
      [--demote-hours 8] [--per-hour 12] [--one-namespace] [--offset-days D]
      [--traces-dir DIR] [--out-dir DIR]
Needs the full Philly trace (config/traces/SOURCE.md, "Full traces"), read
from --traces-dir (default: shared/traces/philly next to the repository).
Prints the tables; the work files go to --out-dir if given, else to a
temporary directory removed at the end.
"""
import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_common  # noqa: E402  (trace and binary checks)

BASE = datetime.datetime(2017, 10, 1)
POLICIES = ["fifo-pool", "sjf-pool", "srtf-pool", "las-pool", "kueue-like", "kai-like", "gpusched",
            "gpusched-attained"]
COLUMNS = [
    ("avg JCT s", "avg_jct_s", "{:,.0f}"),
    ("p95 JCT s", "p95_jct_s", "{:,.0f}"),
    ("avg queueing s", "avg_queueing_s", "{:,.0f}"),
    ("preemptions", "preemptions", "{:,.0f}"),
    ("GPU-s lost", "lost_gpu_seconds", "{:,.0f}"),
    ("quota violations", "quota_violations", "{:.0f}"),
]


def require_traces(*paths):
    """Exits with where to get the full Philly trace if a file is missing."""
    sim_common.require_traces("philly", paths)


def window(trace, days, out, one_namespace=False, offset=0):
    """Writes the jobs submitted in `days` days from `offset` days after the
    first job of 2017-10-01 (all in VC `pool` with `one_namespace`)."""
    rows = list(csv.DictReader(open(trace)))
    stamp = lambda r: datetime.datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S")
    rows = [r for r in rows if int(r["num_gpus"]) > 0 and stamp(r) >= BASE]
    t0 = min(stamp(r) for r in rows)
    since = lambda r: (stamp(r) - t0).total_seconds() - offset * 86400
    keep = [r for r in rows if 0 <= since(r) <= days * 86400]
    keep.sort(key=stamp)
    if one_namespace:
        for r in keep:
            r["cluster"] = "pool"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(keep)
    return len(keep)


def scaled_vcs(vc_csv, nodes, out):
    """The VC sizes scaled to `nodes` in all (largest remainder, every VC >= 0)."""
    if vc_csv is None:
        vcs = [("pool", nodes)]
    else:
        vcs = [(r["vc"], int(r["node num"])) for r in csv.DictReader(open(vc_csv))]
    total = sum(n for _, n in vcs)
    exact = [(vc, n * nodes / total) for vc, n in vcs]
    floor = {vc: int(x) for vc, x in exact}
    left = nodes - sum(floor.values())
    for vc, x in sorted(exact, key=lambda e: e[1] - int(e[1]), reverse=True)[:left]:
        floor[vc] += 1
    with open(out, "w") as f:
        f.write("vc,node num\n")
        for vc, _ in vcs:
            f.write(f"{vc},{floor[vc]}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--nodes", default="48,40")
    ap.add_argument("--days", type=float, default=4)
    ap.add_argument("--offset-days", type=float, default=0,
                    help="start this many days after 2017-10-01 (other windows than the tuned one)")
    ap.add_argument("--demote-hours", type=float, default=8)
    ap.add_argument("--per-hour", type=int, default=12)
    ap.add_argument("--queueing", default="BestEffortFIFO",
                    help="queueingStrategy of gpusched-attained's namespaces")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--one-namespace", action="store_true",
                    help="every job in one namespace guaranteed the whole pool")
    ap.add_argument("--traces-dir", default=os.path.join(sim_common.DEFAULT_TRACES, "philly"),
                    help="philly_jobs_pollux.csv and helios_qssf_philly_vc_nodes.csv "
                         "(default: shared/traces/philly next to the repository)")
    ap.add_argument("--out-dir", help="keep the jobs, configs and raw results here "
                                      "(default: a temporary directory, removed at the end)")
    a = ap.parse_args()
    shared = a.traces_dir
    require_traces(os.path.join(shared, "philly_jobs_pollux.csv"),
                   os.path.join(shared, "helios_qssf_philly_vc_nodes.csv"))
    binary = sim_common.require_binary(a.build)
    if a.out_dir:
        os.makedirs(a.out_dir, exist_ok=True)
        return run(a, binary, shared, a.out_dir)
    with tempfile.TemporaryDirectory(prefix="gpusched-philly-pool-") as work:
        return run(a, binary, shared, work)


def run(a, binary, shared, work):
    """Every policy on every pool size; work files under `work`."""
    root = sim_common.ROOT
    jobs = os.path.join(work, "jobs.csv")
    count = window(os.path.join(shared, "philly_jobs_pollux.csv"), a.days, jobs, a.one_namespace,
                   a.offset_days)
    config = os.path.join(root, "bench/sim/replay-policy.json")
    attained = json.load(open(config))
    attained["quotas"]["default"]["attainedService"] = {
        "demoteAfterGpuHours": a.demote_hours, "preemptionsPerHour": a.per_hour}
    attained["quotas"]["default"]["queueingStrategy"] = a.queueing
    # The `gpusched` row is strict submission order: attained-service order
    # is on by default, so it is turned off explicitly.
    strict = json.load(open(config))
    strict["quotas"]["default"]["attainedService"] = {"enabled": False}
    strict["quotas"]["default"]["queueingStrategy"] = "StrictFIFO"
    configs = {"gpusched-attained": os.path.join(work, "attained.json"),
               "gpusched": os.path.join(work, "strict.json")}
    json.dump(attained, open(configs["gpusched-attained"], "w"))
    json.dump(strict, open(configs["gpusched"], "w"))
    policies = a.policies.split(",")
    for nodes in a.nodes.split(","):
        vcs = os.path.join(work, f"vcs-{nodes}.csv")
        scaled_vcs(None if a.one_namespace else
                   os.path.join(shared, "helios_qssf_philly_vc_nodes.csv"), int(nodes), vcs)
        print(f"\n#### {count} jobs ({a.days:g} days from 2017-10-01 + {a.offset_days:g} d), x1, one pool of {nodes} "
              f"8-GPU nodes ({'one namespace' if a.one_namespace else 'each VC a namespace'}); attainedService: demote after {a.demote_hours:g} GPU-hours, "
              f"{a.per_hour} preemptions an hour per namespace, {a.queueing}\n")
        print("| policy | " + " | ".join(c[0] for c in COLUMNS) + " | replay s |")
        print("|---" * (len(COLUMNS) + 2) + "|")
        for p in policies:
            result = os.path.join(work, f"{p}-{nodes}.json")
            start = time.time()
            proc = subprocess.run([binary, "simulate", "--protocol", "replay", "--jobs-csv",
                                   jobs, "--vc-nodes", vcs, "--policies",
                                   p.replace("-attained", ""), "--config", configs.get(p, config),
                                   "--load", "1", "--out", result, "--quiet"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            seconds = time.time() - start
            if proc.returncode != 0:
                why = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                print(f"| {p} | " + " | ".join("failed" for _ in COLUMNS) + f" | {why} |",
                      flush=True)
                continue
            r = json.load(open(result))[0]
            cells = [fmt.format(r.get(key, 0)) for _, key, fmt in COLUMNS]
            print(f"| {p} | " + " | ".join(cells) + f" | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
