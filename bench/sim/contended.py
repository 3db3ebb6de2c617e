#!/usr/bin/env python3
"""The contended queueing scenarios, in one command.

Training jobs shaped like PyTorchJobs (tools/make_training_jobs.py: four
namespaces with guarantees on 24 nodes of 8 GPUs, 40 % multi-node gangs,
training-high/low/best-effort 20/60/20 %) at 60, 80 and 95 % offered load,
seeds 1 to 3, replayed by every policy on the same shared pool: the pooled
FIFO/SJF/SRTF baselines (SRTF knows durations: an oracle), a duration-
agnostic least-attained-service baseline (Tiresias-style), a Kueue-like
baseline, and gpusched (the queue manager, reclaim policy anyBorrower as
Kueue's reclaimWithinCohort Any), with each namespace's queue StrictFIFO (the
default) and BestEffortFIFO (`gpusched-besteffort`). Prints one markdown table per load: the
mean over the seeds of each metric.

Usage (from the repository root, after a build):
  python3 bench/sim/contended.py [BUILD_DIR] [--days 4] [--seeds 1,2,3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

POLICIES = ["fifo-pool", "sjf-pool", "srtf-pool", "las-pool", "kueue-like", "gpusched",
            "gpusched-besteffort", "gpusched-attained", "gpusched-besteffort-attained"]
# Rows that run another policy with a changed config: the queue manager with
# every namespace's queueingStrategy BestEffortFIFO (Kueue's default).
ATTAINED = {"demoteAfterGpuHours": 8, "preemptionsPerHour": 12}
VARIANTS = {"gpusched-besteffort": ("gpusched", {"queueingStrategy": "BestEffortFIFO"}),
            "gpusched-attained": ("gpusched", {"attainedService": ATTAINED}),
            "gpusched-besteffort-attained": ("gpusched", {"queueingStrategy": "BestEffortFIFO",
                                                          "attainedService": ATTAINED})}
COLUMNS = [
    ("avg JCT s", "avg_jct_s", "{:,.0f}"),
    ("p95 JCT s", "p95_jct_s", "{:,.0f}"),
    ("avg queueing s", "avg_queueing_s", "{:,.0f}"),
    ("GPU util", "gpu_utilisation", "{:.3f}"),
    ("preemptions", "preemptions", "{:,.0f}"),
    ("GPU-s lost", "lost_gpu_seconds", "{:,.0f}"),
    ("quota violations", "quota_violations", "{:.0f}"),
    ("time to guarantee, mean s", "avg_time_to_guarantee_s", "{:,.0f}"),
    ("time to guarantee, p95 s", "p95_time_to_guarantee_s", "{:,.0f}"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--days", default="4")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--loads", default="0.6,0.8,0.95")
    a = ap.parse_args()
    binary = os.path.join(a.build, "gpusched")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    config = os.path.join(root, "bench/sim/replay-policy.json")
    work = tempfile.mkdtemp(prefix="gpusched-contended-")
    configs = {}
    for row, (_, default_fields) in VARIANTS.items():
        c = json.load(open(config))
        c["quotas"]["default"].update(default_fields)
        configs[row] = os.path.join(work, f"{row}.json")
        json.dump(c, open(configs[row], "w"))
    for load in a.loads.split(","):
        sums = {p: {} for p in POLICIES}
        seconds = {p: 0.0 for p in POLICIES}
        seeds = a.seeds.split(",")
        for seed in seeds:
            out = os.path.join(work, f"load{load}-seed{seed}")
            subprocess.run([sys.executable, os.path.join(root, "tools/make_training_jobs.py"),
                            "--seed", seed, "--days", a.days, "--load", load, "--out-dir", out],
                           check=True, stdout=subprocess.DEVNULL)
            for p in POLICIES:
                result = os.path.join(out, f"{p}.json")
                start = time.time()
                subprocess.run([binary, "simulate", "--protocol", "replay", "--jobs-json",
                                os.path.join(out, "jobs.json"), "--vc-nodes",
                                os.path.join(out, "pools.csv"), "--policies",
                                VARIANTS.get(p, (p,))[0], "--config", configs.get(p, config),
                                "--out", result, "--quiet"],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                seconds[p] += time.time() - start
                r = json.load(open(result))[0]
                for _, key, _ in COLUMNS:
                    sums[p][key] = sums[p].get(key, 0) + r.get(key, 0)
        print(f"\n### offered load {load} (mean of seeds {a.seeds}, {a.days} days)\n")
        print("| policy | " + " | ".join(c[0] for c in COLUMNS) + " | replay s |")
        print("|---" * (len(COLUMNS) + 2) + "|")
        for p in POLICIES:
            cells = []
            for _, key, fmt in COLUMNS:
                ttg = key.endswith("time_to_guarantee_s")
                if ttg and not (p.startswith("gpusched") or p == "kueue-like"):
                    cells.append("—")
                else:
                    cells.append(fmt.format(sums[p][key] / len(seeds)))
            print(f"| {p} | " + " | ".join(cells) + f" | {seconds[p] / len(seeds):.2f} |")


if __name__ == "__main__":
    main()
