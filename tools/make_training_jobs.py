#!/usr/bin/env python3
"""Writes a replay workload of training jobs shaped like PyTorchJobs.

Output: a jobs file for `gpusched simulate --protocol replay --jobs-json` and
a namespace pool file for `--vc-nodes` (each namespace's guarantee is its pool
of 8-GPU nodes). The jobs mix multi-node gangs (a PyTorchJob's master and
workers: 2, 3 or 4 pods of 8 GPUs, all-or-nothing; the replay's per-namespace
baselines need every job to fit its namespace's pool) with single-node jobs
(1, 2, 4 or 8 GPUs), in the priority classes deploy/priorityclasses.yaml ships
(training-high, training-low, training-best-effort). Arrivals are Poisson,
durations log-normal (median 1 h, at most 24 h), and the offered load is
`--load` times the pool's GPU capacity over the submission window.

Deterministic for a given --seed. Run from the repository root, e.g.:
  python3 tools/make_training_jobs.py --seed 1 --out-dir /tmp/training
"""
import argparse
import json
import math
import os
import random

# namespace -> nodes of its guarantee (8 GPUs each)
POOLS = {"team-a": 8, "team-b": 6, "team-c": 6, "research": 4}
# namespace -> share of the submitted jobs (team-a and research submit more
# than their guarantee: they borrow, and the others reclaim)
SUBMIT_SHARE = {"team-a": 0.35, "team-b": 0.2, "team-c": 0.15, "research": 0.3}
CLASSES = [("training-high", 0.2), ("training-low", 0.6), ("training-best-effort", 0.2)]


def pick(rng, weighted):
    x = rng.random()
    for value, w in weighted:
        x -= w
        if x < 0:
            return value
    return weighted[-1][0]


def job_shape(rng):
    """(pods, gpus per pod, gang) of one job."""
    if rng.random() < 0.4:  # a PyTorchJob: master + workers, one gang
        return rng.choice([2, 2, 3, 4]), 8, True
    return 1, rng.choice([1, 2, 4, 8]), False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=float, default=2)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--out-dir", default=".")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    capacity = 8 * sum(POOLS.values())
    window = a.days * 86400
    mean_gpu_seconds = 0.0  # estimated from a large sample of shapes
    sample = random.Random(a.seed + 1)
    for _ in range(20000):
        pods, gpus, _ = job_shape(sample)
        mean_gpu_seconds += pods * gpus * min(86400, math.exp(sample.gauss(math.log(3600), 1.0)))
    mean_gpu_seconds /= 20000
    rate = a.load * capacity / mean_gpu_seconds  # jobs per second
    jobs, t, n = [], 0.0, 0
    while True:
        t += rng.expovariate(rate)
        if t > window:
            break
        pods, gpus, gang = job_shape(rng)
        ns = pick(rng, list(SUBMIT_SHARE.items()))
        jobs.append({
            "name": f"ptj-{n:05d}",
            "namespace": ns,
            "priorityClass": pick(rng, CLASSES),
            "gpusPerPod": gpus,
            "pods": pods,
            "gang": gang,
            "submit": round(t, 1),
            "duration": round(min(86400, math.exp(rng.gauss(math.log(3600), 1.0))), 1),
        })
        n += 1
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "jobs.json"), "w") as f:
        json.dump(jobs, f, indent=0)
    with open(os.path.join(a.out_dir, "pools.csv"), "w") as f:
        f.write("vc,node num\n")
        for ns, nodes in POOLS.items():
            f.write(f"{ns},{nodes}\n")
    print(f"{len(jobs)} jobs over {a.days} days, {capacity} GPUs, offered load {a.load}")


if __name__ == "__main__":
    main()
