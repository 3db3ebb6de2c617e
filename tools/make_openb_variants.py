#!/usr/bin/env python3
"""Writes openb-style pod lists derived from openb_pod_list_default.csv.

The FGD authors (Weng et al., USENIX ATC '23) published 23 variants of the
default openb trace. Read side by side with the default, the files show how
each family was made; this tool applies the same methods at any point of a
grid, so a placement policy can be checked beyond the published points:

  gpuspecS   S % of the GPU pods get a GPU-model constraint (gpu_spec); the
             other fields, the names and the order are unchanged. Pods are
             chosen without replacement, sharing pods at 0.77 times the rate
             of the others (as in the published files), and each constraint is
             drawn from the published files' constraints for that pod kind
             (sharing, 1, 2, 4 or 8 GPUs): an 8-GPU pod asks for G2 or G3, a
             sharing pod mostly for T4 or P100 (SPECS below).
  multigpuM  every default pod, in order, then clones of the default's
             multi-GPU pods (uniform, with replacement) appended until M % of
             the GPU request comes from multi-GPU pods (published: 20..50).
  gpushareX  CPU-only pods kept; the number of GPU pods kept, split between
             sharing pods (num_gpu 1, gpu_milli < 1000) and the others so that
             X % of the GPU request comes from sharing pods; each group is
             sampled from the default's pods of that group (published: 20..100).
  cpuK       GPU pods kept; K times the default's CPU-only pods, sampled from
             them (K = 0..3; published cpuXXX = XX.X % of pods CPU-only, e.g.
             cpu050 = 0.34x, cpu300 = 2.78x).

Sampling is without replacement when the sample is not larger than its
population and with replacement otherwise (as in the published cpu and
gpushare files). Resampled files are ordered by creation time and renamed
openb-pod-NNNN; clones are identical rows with their own names.

Deterministic: each variant's random stream is seeded from --seed and the
variant's name. Output files are named openb_pod_list_<variant>.csv, so
`gpusched simulate --grid` calls the trace <variant>. Writes only into
--out-dir (e.g. a build directory), never into the repository.

Usage (from the repository root):
  python3 tools/make_openb_variants.py \
      --default ../shared/traces/openb/openb_pod_list_default.csv \
      --out-dir build/openb-variants [--only gen-gpuspec15,gen-cpu2x] [--list]
"""
import argparse
import csv
import os
import random
import sys
import zlib

# The grid. Names: gen-<family><value>. The TUNE / HELD-OUT split alternates
# along each axis (bench/sim/openb_grid.py).
GPUSPEC = [5, 10, 15, 20, 25, 30, 35, 40]  # % of GPU pods with a model constraint
MULTIGPU = [20, 25, 30, 35, 40, 45, 50]  # % of GPU request from multi-GPU pods
GPUSHARE = [20, 30, 40, 50, 60, 70, 80, 90, 100]  # % of GPU request from sharing pods
CPU = [0, 0.25, 0.5, 0.75, 1.5, 2, 2.5, 3]  # x the default's CPU-only pods
# Added after the first run, to the TUNE half (bench/sim/openb_grid.py): it
# had no point on the CPU cliff, where the cluster's CPU runs out near 100 %
# arrival (public cpu235 = 2.0x, cpu250 = 2.17x).
CPU_CLIFF = [2.25]

# gpu_spec values by pod kind: counts pooled over the published gpuspec05,
# 10, 20, 25 and 33 files (hkust-adsl/kubernetes-scheduler-simulator
# data/csv/ @ 8f3d6417353c).
SPECS = {
    "share": {"T4": 1609, "P100": 839, "G2|P100|T4|V100M16|V100M32": 45},
    "1": {"T4": 1865, "G2": 933, "V100M16|V100M32": 435, "P100|V100M16|V100M32": 268,
          "G3": 209, "P100|T4|V100M16|V100M32": 76, "G2|P100|T4|V100M16|V100M32": 74,
          "A10|G2|T4|V100M16|V100M32": 64, "V100M16|V100M32|V100M32": 63, "V100M32": 48,
          "P100|V100M16": 31, "A10|T4": 21, "V100M16": 17, "P100": 10,
          "A10|G2|P100|T4|V100M16|V100M32|V100M32": 10, "P100|T4": 1, "T4|V100M16|V100M32": 1},
    "2": {"P100|V100M16|V100M32": 6, "T4|V100M16|V100M32": 3, "V100M16|V100M32": 3,
          "V100M32": 3},
    "4": {"G2": 12, "V100M16|V100M32|V100M32": 7, "V100M16|V100M32": 2},
    "8": {"G2": 21, "G3": 16},
}
# Rate at which sharing pods get a constraint, relative to the other GPU pods
# (published files: 16.2 % of sharing pods vs 21.1 % of whole-GPU pods).
SHARE_SPEC_RATE = 0.77


def fmt(x):
    """2 -> "2", 0.5 -> "0.5"."""
    return f"{x:g}"


def grid_names():
    """Every grid variant, axis by axis."""
    return ([f"gen-gpuspec{s:02d}" for s in GPUSPEC] + [f"gen-multigpu{m}" for m in MULTIGPU] +
            [f"gen-gpushare{x}" for x in GPUSHARE] +
            [f"gen-cpu{fmt(k)}x" for k in sorted(CPU + CPU_CLIFF)])


def gpus(p):
    return int(p["num_gpu"])


def milli(p):
    return int(p["gpu_milli"])


def is_share(p):
    return gpus(p) == 1 and milli(p) < 1000


def request(p):
    return gpus(p) * milli(p)


def kind(p):
    return "share" if is_share(p) else str(gpus(p))


def sample(rng, pop, n):
    """n rows of pop: without replacement if n <= len(pop), else with."""
    if n <= len(pop):
        return rng.sample(pop, n)
    return [rng.choice(pop) for _ in range(n)]


def pick(rng, weighted):
    """A key of the dict weighted, with probability proportional to its value."""
    x = rng.random() * sum(weighted.values())
    for key, w in weighted.items():
        x -= w
        if x < 0:
            return key
    return key


def renamed(rows):
    """Rows ordered by creation time (stable), named openb-pod-NNNN."""
    rows = sorted(rows, key=lambda p: int(p["creation_time"] or 0))
    return [dict(p, name=f"openb-pod-{i:04d}") for i, p in enumerate(rows)]


def gpuspec(rng, pods, share_pct):
    gpu = [i for i, p in enumerate(pods) if gpus(p) > 0]
    n = round(share_pct / 100 * len(gpu))
    # Weighted sampling without replacement (Efraimidis-Spirakis keys).
    keys = []
    for i in gpu:
        w = SHARE_SPEC_RATE if is_share(pods[i]) else 1.0
        keys.append((rng.random() ** (1 / w), i))
    chosen = sorted(i for _, i in sorted(keys, reverse=True)[:n])
    out = [dict(p) for p in pods]
    for i in chosen:
        out[i]["gpu_spec"] = pick(rng, SPECS[kind(out[i])])
    return out


def multigpu(rng, pods, multi_pct):
    multi = [p for p in pods if gpus(p) > 1]
    total = sum(request(p) for p in pods)
    part = sum(request(p) for p in multi)
    out = [dict(p) for p in pods]
    while part < multi_pct / 100 * total:
        c = dict(rng.choice(multi), name=f"openb-pod-{len(out):04d}")
        out.append(c)
        total += request(c)
        part += request(c)
    return out


def gpushare(rng, pods, share_pct):
    cpu = [p for p in pods if gpus(p) == 0]
    share = [p for p in pods if is_share(p)]
    whole = [p for p in pods if gpus(p) > 0 and not is_share(p)]
    g = len(share) + len(whole)
    ms = sum(request(p) for p in share) / len(share)
    mw = sum(request(p) for p in whole) / len(whole)
    # n * ms / (n * ms + (g - n) * mw) = x
    x = share_pct / 100
    n = g if x >= 1 else round(x * g * mw / (ms * (1 - x) + x * mw))
    return renamed(cpu + sample(rng, share, n) + sample(rng, whole, g - n))


def cpu_scaled(rng, pods, factor):
    cpu = [p for p in pods if gpus(p) == 0]
    gpu = [p for p in pods if gpus(p) > 0]
    return renamed(gpu + sample(rng, cpu, round(factor * len(cpu))))


def make(name, pods, seed):
    """The variant called name (see grid_names) of the default pods."""
    rng = random.Random(seed * 1000003 + zlib.crc32(name.encode()))
    body = name[len("gen-"):]
    if body.startswith("gpuspec"):
        return gpuspec(rng, pods, float(body[len("gpuspec"):]))
    if body.startswith("multigpu"):
        return multigpu(rng, pods, float(body[len("multigpu"):]))
    if body.startswith("gpushare"):
        return gpushare(rng, pods, float(body[len("gpushare"):]))
    if body.startswith("cpu") and body.endswith("x"):
        return cpu_scaled(rng, pods, float(body[len("cpu"):-1]))
    raise ValueError(f"unknown variant {name!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--default", help="openb_pod_list_default.csv")
    ap.add_argument("--out-dir")
    ap.add_argument("--only", default="", help="comma-separated variant names (default: the grid)")
    ap.add_argument("--seed", type=int, default=2023)
    ap.add_argument("--list", action="store_true", help="print the grid's names and exit")
    a = ap.parse_args()
    if a.list:
        print("\n".join(grid_names()))
        return
    if not a.default or not a.out_dir:
        ap.error("--default and --out-dir are required")
    if not os.path.isfile(a.default):
        sys.exit(f"missing {a.default}: this needs the full openb pod list "
                 "openb_pod_list_default.csv (hkust-adsl/kubernetes-scheduler-simulator, "
                 "data/csv/); config/traces/SOURCE.md (\"Full traces\") gives its commit")
    with open(a.default, newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames
        pods = list(reader)
    os.makedirs(a.out_dir, exist_ok=True)
    for name in a.only.split(",") if a.only else grid_names():
        rows = make(name, pods, a.seed)
        path = os.path.join(a.out_dir, f"openb_pod_list_{name}.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        print(f"{path}: {len(rows)} pods", file=sys.stderr)


if __name__ == "__main__":
    main()
