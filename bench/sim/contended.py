#!/usr/bin/env python3
"""The contended queueing scenarios, in one command.

Training jobs shaped like PyTorchJobs (tools/make_training_jobs.py: four
namespaces on 24 nodes of 8 GPUs, 40 % multi-node gangs,
training-high/low/best-effort 20/60/20 %) at 60, 80 and 95 % offered load,
seeds 1 to 3, replayed by every policy on the same shared pool: the pooled
FIFO/SJF/SRTF baselines (SRTF knows durations: an oracle), a duration-
agnostic least-attained-service baseline (Tiresias-style), the Kueue-like
baseline (and, as `kueue-like-before`, the same without Kueue's fill-back
and admission order, as it was before), a KAI-like baseline (deserved
quota plus over-quota weight), and gpusched (the queue manager, reclaim
policy anyBorrower as Kueue's reclaimWithinCohort Any): as shipped
(`gpusched`: BestEffortFIFO queues with attained-service order), with
StrictFIFO queues (`gpusched-strict`), and with StrictFIFO and no
attained-service order (`gpusched-strict-noattained`, the first default).
`gpusched-besteffort`, `gpusched-attained` and
`gpusched-besteffort-attained` name their fields explicitly (--policies).
`gpusched-backfill` runs Backfill queues (--policies); gpusched's rows
also measure its estimated start (estimates from the runtime history the
replay has seen).

--coverage: guarantees cover this % of the pool (each namespace's
guarantee is that share of its node pool, its limit the whole pool; the
rest of the pool is guaranteed to nobody). 100 is the scenario as
generated. Every policy reads the same guarantees (the Kueue-like
baseline as nominal quota, with the rest as the cohort's own quota; the
KAI-like one as deserved quota).

Prints one markdown table per (coverage, load): the mean over the seeds of
each metric ("failed" where a run did not complete). --out-dir keeps every
run's raw JSON (a temporary directory otherwise, removed at the end).

Usage (from the repository root, after a build):
  python3 bench/sim/contended.py [BUILD_DIR] [--days 4] [--seeds 1,2,3]
      [--loads 0.6,0.8,0.95] [--coverage 0,50,100] [--policies a,b,...]
      [--out-dir DIR]
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

POLICIES = ["fifo-pool", "sjf-pool", "srtf-pool", "las-pool", "kueue-like-before", "kueue-like",
            "kai-like", "gpusched", "gpusched-strict", "gpusched-strict-noattained"]
# Rows that run another policy with changed quota fields: the queue manager
# with every namespace's queueingStrategy BestEffortFIFO (Kueue's default)
# and/or attained-service ordering.
ATTAINED = {"demoteAfterGpuHours": 8, "preemptionsPerHour": 12}
VARIANTS = {"gpusched-besteffort": ("gpusched", {"queueingStrategy": "BestEffortFIFO"}),
            "gpusched-strict": ("gpusched", {"queueingStrategy": "StrictFIFO"}),
            "gpusched-strict-noattained": ("gpusched", {"queueingStrategy": "StrictFIFO",
                                                        "attainedService": {"enabled": False}}),
            "gpusched-backfill": ("gpusched", {"queueingStrategy": "Backfill"}),
            "gpusched-attained": ("gpusched", {"attainedService": ATTAINED}),
            "gpusched-besteffort-attained": ("gpusched", {"queueingStrategy": "BestEffortFIFO",
                                                          "attainedService": ATTAINED})}
COLUMNS = [
    ("avg JCT s", "avg_jct_s", "{:,.0f}"),
    ("p95 JCT s", "p95_jct_s", "{:,.0f}"),
    ("avg queueing s", "avg_queueing_s", "{:,.0f}"),
    ("GPU util", "gpu_utilisation", "{:.3f}"),
    ("util while jobs wait", "gpu_util_while_waiting", "{:.3f}"),
    ("preemptions", "preemptions", "{:,.0f}"),
    ("GPU-s lost", "lost_gpu_seconds", "{:,.0f}"),
    ("quota violations", "quota_violations", "{:.0f}"),
    ("time to guarantee, mean s", "avg_time_to_guarantee_s", "{:,.0f}"),
    ("time to guarantee, p95 s", "p95_time_to_guarantee_s", "{:,.0f}"),
    ("surplus fairness (Jain)", "surplus_fairness_jain", "{:.3f}"),
    ("longest gang wait s", "max_gang_wait_s", "{:,.0f}"),
    # gpusched only (the queue manager's estimated start; EstimateAccuracy).
    ("est. start median abs err s", "est_median_abs_error_s", "{:,.0f}"),
    ("est. start within 25 %", "est_within_25pct", "{:.3f}"),
    ("naive median abs err s", "est_naive_median_abs_error_s", "{:,.0f}"),
    ("naive within 25 %", "est_naive_within_25pct", "{:.3f}"),
    ("backfill overruns", "est_backfill_overruns", "{:.0f}"),
    # Starts of heads a backfilled unit passed, and those that slipped
    # because of it (docs/simulator.md, "Head slips").
    ("heads passed by backfill", "est_backfill_heads_passed", "{:.0f}"),
    ("head slips", "est_backfill_head_slips", "{:.0f}"),
]


def config_for(base, row, coverage, pools):
    """The config of `row` at `coverage` % of the pool guaranteed."""
    c = json.loads(json.dumps(base))
    fields = VARIANTS.get(row, (row, {}))[1]
    c["quotas"]["default"].update(fields)
    if coverage < 100:
        total = 8 * sum(pools.values())
        c["quotas"]["namespaces"] = {
            ns: dict({"guaranteed": nodes * 8 * coverage // 100, "limit": total,
                      "cohort": "vcs"}, **fields)
            for ns, nodes in pools.items()}
    return c


def run(binary, out, policy, config, result):
    """One replay: its result dict, or None if it failed."""
    p = subprocess.run([binary, "simulate", "--protocol", "replay", "--jobs-json",
                        os.path.join(out, "jobs.json"), "--vc-nodes",
                        os.path.join(out, "pools.csv"), "--policies", policy, "--config", config,
                        "--out", result, "--quiet"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(f"  {policy} ({os.path.basename(config)}) failed: "
              f"{(p.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)
        return None
    return json.load(open(result))[0]


def table(title, policies, sums, counts, seconds, runs):
    print(f"\n#### {title}\n")
    print("| policy | " + " | ".join(c[0] for c in COLUMNS) + " | replay s |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for p in policies:
        if counts[p] < runs:
            print(f"| {p} | " + " | ".join("failed" for _ in COLUMNS) + " | — |")
            continue
        cells = []
        for _, key, fmt in COLUMNS:
            v = sums[p].get(key)
            cells.append("—" if v is None else fmt.format(v / runs))
        print(f"| {p} | " + " | ".join(cells) + f" | {seconds[p] / runs:.2f} |")


def scenario(a, binary, base, load, coverage, work):
    """Every policy on every seed at one load and coverage: prints a table."""
    sums = {p: {} for p in a.policies}
    counts = {p: 0 for p in a.policies}
    seconds = {p: 0.0 for p in a.policies}
    seeds = a.seeds.split(",")
    for seed in seeds:
        out = os.path.join(work, f"load{load}-seed{seed}")
        subprocess.run([sys.executable, os.path.join(a.root, "tools/make_training_jobs.py"),
                        "--seed", seed, "--days", a.days, "--load", load, "--out-dir", out],
                       check=True, stdout=subprocess.DEVNULL)
        pools = {r["vc"]: int(r["node num"]) for r in csv.DictReader(open(out + "/pools.csv"))}
        for p in a.policies:
            config = os.path.join(out, f"{p}-cov{coverage}.json")
            json.dump(config_for(base, p, coverage, pools), open(config, "w"))
            start = time.time()
            r = run(binary, out, VARIANTS.get(p, (p,))[0], config,
                    os.path.join(out, f"{p}-cov{coverage}.out.json"))
            seconds[p] += time.time() - start
            if r is None:
                continue
            counts[p] += 1
            for key, v in (r.get("estimates") or {}).items():
                r["est_" + key] = v
            if not r.get("guarantee_episodes"):  # no episode: no time to guarantee
                r["avg_time_to_guarantee_s"] = r["p95_time_to_guarantee_s"] = None
            for _, key, _ in COLUMNS:
                if r.get(key) is None:  # not defined for this run: the mean is too
                    sums[p][key] = None
                elif key not in sums[p] or sums[p][key] is not None:
                    sums[p][key] = sums[p].get(key, 0) + r[key]
    table(f"offered load {load}, guarantees cover {coverage} % of the pool "
          f"(mean of seeds {a.seeds}, {a.days} days)", a.policies, sums, counts, seconds,
          len(seeds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--days", default="4")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--loads", default="0.6,0.8,0.95")
    ap.add_argument("--coverage", default="100", help="%% of the pool guarantees cover, e.g. 0,50,100")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--out-dir", help="keep the jobs, configs and raw results here "
                                      "(default: a temporary directory, removed at the end)")
    a = ap.parse_args()
    a.policies = a.policies.split(",")
    a.root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = os.path.join(a.build, "gpusched")
    if not os.access(binary, os.X_OK):
        sys.exit(f"no gpusched binary in {a.build}: build it first (or pass the build directory)")
    base = json.load(open(os.path.join(a.root, "bench/sim/replay-policy.json")))
    if a.out_dir:
        return run_all(a, binary, base, a.out_dir)
    with tempfile.TemporaryDirectory(prefix="gpusched-contended-") as work:
        return run_all(a, binary, base, work)


def run_all(a, binary, base, work):
    """Every coverage and load; work files under `work`."""
    for coverage in [int(c) for c in a.coverage.split(",")]:
        for load in a.loads.split(","):
            scenario(a, binary, base, load, coverage, os.path.join(work, f"cov{coverage}"))


if __name__ == "__main__":
    main()
