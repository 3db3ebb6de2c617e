#!/usr/bin/env python3
"""The results tables of README.md and docs/*.md, generated from results/.

A generated table sits between two markers in a markdown file:

    <!-- table:NAME -->
    | ... |
    <!-- /table:NAME -->

NAME is a key of TABLES below, which names the results file(s) under
results/ the table is made from and how. Everything between the markers is
the script's: edit the results (rerun the benchmark that writes them), not
the table.

  python3 scripts/tables.py           rewrite every marked table from results/
  python3 scripts/tables.py --check   exit 1 if a committed table differs from
                                      what its results give, naming the table,
                                      the markdown file and the results files
  python3 scripts/tables.py --list    every table: where it is, what it reads

Every table of measured figures is generated: a benchmark's raw output is
kept under results/ (scripts/perf_tables.py reads the speed runs' outputs),
never copied by hand into a table. A note of the old hand-written form

    <!-- hand-written table, no raw output in results/: ... -->

fails --check.

Run from anywhere; paths are relative to the repository root. Python 3
standard library only. The ctest test `tables_up_to_date` runs --check.
"""
import argparse
import csv
import difflib
import glob
import os
import re
import statistics
import sys

from perf_tables import PERF_TABLES
from table_common import ROOT, grouped, load_json, path_of, render

DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT)
                              for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
MARKER = re.compile(r"^<!-- (/?)table:([a-z0-9.-]+) -->$")
HAND_WRITTEN = "<!-- hand-written table"
MINUS = "\u2212"
# The openb traces in the FGD paper's order.
TRACES = ["default", "cpu0", "cpu050", "gpushare20", "gpushare40", "gpuspec10", "multigpu20"]


# ---- reading results ----------------------------------------------------

def md_tables(rel):
    """The markdown tables of a results file: [{"heading", "header", "rows"}],
    each under the last heading line (without its #s) before it."""
    tables, heading, current = [], "", None
    for line in open(path_of(rel), encoding="utf-8").read().splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if current is None:
                current = {"heading": heading, "header": cells, "rows": []}
                tables.append(current)
            elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
                current["rows"].append(cells)
        else:
            current = None
    return tables


def md_table(rel, heading):
    """The one table of `rel` whose heading contains `heading`."""
    found = [t for t in md_tables(rel) if heading in t["heading"]]
    if len(found) != 1:
        raise LookupError(f"{rel}: {len(found)} tables under a heading with '{heading}'")
    return found[0]


def by_first_cell(table):
    """{first cell: {column: cell}} of a table."""
    return {r[0]: dict(zip(table["header"], r)) for r in table["rows"]}


# ---- formatting -----------------------------------------------------------

def signed(v, digits=2):
    """+0.12 / −0.12 (a typographic minus)."""
    text = f"{v:+.{digits}f}"
    return text.replace("-", MINUS)


def minus(text):
    """A results file's ASCII minus signs as typographic ones."""
    return re.sub(r"(^|[\s(])-(?=\d)", lambda m: m.group(1) + MINUS, text)


def bold(text, on=True):
    return f"**{text}**" if on else text


# ---- openb (fgd protocol) ----------------------------------------------------

def grid_means(rel):
    """{(trace, policy): (mean, sd)} of unallocated GPU % at 100 % from a grid.csv."""
    values = {}
    for r in csv.DictReader(open(path_of(rel), encoding="utf-8")):
        values.setdefault((r["trace"], r["policy"]), []).append(r["unallocated_gpu_pct_at_100"])
    # Float mean and .2f, as bench/sim/openb_grid.py rounds (2.985 -> 2.99, 3.625 -> 3.62).
    return {k: (statistics.mean(float(x) for x in v), statistics.stdev(float(x) for x in v))
            for k, v in values.items()}


def authors_fgd(rel):
    """{trace: "mean ± sd"} of the authors' FGD, from a grid.md's calibration."""
    table = md_table(rel, "Calibration against the authors")
    return {r[0]: r[3] for r in table["rows"] if r[1] == "fgd"}


def goal(with_delta, authors_only):
    """authors' FGD, our FGD and gpusched per trace (gpusched bold when below both)."""
    means = grid_means("results/goal/grid.csv")
    authors = authors_fgd("results/goal/grid.md")
    rows = []
    for trace in TRACES:
        if (trace, "gpusched") not in means or (authors_only and trace not in authors):
            continue
        fgd, ours = means[(trace, "fgd")], means[(trace, "gpusched")]
        # Compared as printed: the delta is that of the figures in the row.
        shown = float(f"{ours[0]:.2f}")
        lowest = min([float(f"{fgd[0]:.2f}")] +
                     ([float(authors[trace].split()[0])] if trace in authors else []))
        row = [trace, authors.get(trace, "—"), f"{fgd[0]:.2f} ± {fgd[1]:.2f}",
               bold(f"{ours[0]:.2f} ± {ours[1]:.2f}", shown < lowest)]
        if with_delta:
            row.append(signed(shown - lowest))
        rows.append(row)
    header = ["trace", "authors' FGD", "our FGD", "gpusched"] + ["delta"] * with_delta
    return render(header, rows)


def calibration():
    """Random and BestFit against the authors (every trace with their rows)."""
    table = md_table("results/grid/grid.md", "Calibration against the authors")
    rows = [r for r in table["rows"] if r[1] in ("random", "bestfit")]
    rows.sort(key=lambda r: TRACES.index(r[0]))  # stable: random before bestfit
    return render(["trace", "policy", "ours", "authors", "diff", "z", "gate"],
                  [r[:4] + [minus(r[4]), minus(r[5]), r[6]] for r in rows])


def openb_variants(heading):
    table = md_table("results/openb-variants/grid.md", heading)
    return render(table["header"], table["rows"])


# ---- replay protocol ------------------------------------------------------------

REPLAY_NAMES = {"fifo": "FIFO", "sjf": "SJF", "srtf": "SRTF"}


def small(v):
    """Seconds: grouped from 10 on, else two decimals (0.0 for nothing)."""
    return grouped(v) if v >= 10 else ("0.0" if v == 0 else f"{v:.2f}")


def ratio(v):
    return grouped(v) if v >= 1000 else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")


def replay_whole_trace():
    """The whole Philly trace at x1 and x4 (gpusched's x4 JCT in bold)."""
    runs = {}
    for load in (1, 4):
        for r in load_json(f"results/replay-x{load}.json"):
            runs[(load, r["policy"])] = r
    rows = []
    for load, policy in [(1, "fifo"), (1, "gpusched"), (4, "fifo"), (4, "srtf"), (4, "gpusched")]:
        r = runs[(load, policy)]
        rows.append([f"x{load}", REPLAY_NAMES.get(policy, policy),
                     bold(grouped(r["avg_jct_s"]), (load, policy) == (4, "gpusched")),
                     grouped(r["p50_jct_s"]), grouped(r["p95_jct_s"]), grouped(r["p99_jct_s"]),
                     small(r["avg_queueing_s"]), grouped(r["makespan_s"]),
                     f"{r['gpu_utilisation']:.3f}", grouped(r["preemptions"]),
                     grouped(r["lost_gpu_seconds"]), grouped(r["quota_violations"]),
                     ratio(r["fairness_max_min_slowdown"])])
    return render(["load", "policy", "avg JCT", "p50", "p95", "p99", "avg queue", "makespan",
                   "util", "preempt", "lost GPU-s", "quota viol.",
                   "fairness (max/min slowdown)"], rows)


# The reference of the replay protocol's gates, on the same data (the Helios
# artifact's semantics re-implemented; docs/simulator.md): per load and
# policy, average JCT s, average queueing s and preemptions (SRTF).
# test/sim/philly_gate_test.cc holds the same figures.
REPLAY_REFERENCE = {(1, "fifo"): (11585, 105, 0), (1, "sjf"): (11543, 63, 0),
                    (1, "srtf"): (11533, 51, None), (4, "fifo"): (117298, 71375, 0),
                    (4, "sjf"): (58728, 12805, 0), (4, "srtf"): (54762, 8835, 20419)}


def replay_gate_passes(load, jct, queue, ref_jct, ref_queue):
    """G1 (x1): JCT within 1 %, queueing within 10 % or 15 s; G2 (x4): 5 % and
    10 %. The overall figures, as test/sim/philly_gate_test.cc checks them."""
    if load == 1:
        return abs(jct - ref_jct) <= 0.01 * ref_jct and \
            abs(queue - ref_queue) <= max(0.10 * ref_queue, 15)
    return abs(jct - ref_jct) <= 0.05 * ref_jct and abs(queue - ref_queue) <= 0.10 * ref_queue


def replay_gates():
    """FIFO, SJF and SRTF against the reference at x1 and x4, with the gate."""
    runs = {(load, r["policy"]): r for load in (1, 4)
            for r in load_json(f"results/replay-x{load}.json")}
    rows = []
    for (load, policy), (ref_jct, ref_queue, ref_preempt) in REPLAY_REFERENCE.items():
        r = runs[(load, policy)]
        jct, queue = r["avg_jct_s"], r["avg_queueing_s"]
        gate = f"G{1 if load == 1 else 2} " + \
            ("pass" if replay_gate_passes(load, jct, queue, ref_jct, ref_queue) else "FAIL")
        if ref_preempt:
            gate += f" ({grouped(r['preemptions'])} vs {grouped(ref_preempt)} preemptions)"
        rows.append([f"x{load}", REPLAY_NAMES[policy], f"{grouped(jct)} ({grouped(ref_jct)})",
                     f"{grouped(queue)} ({grouped(ref_queue)})", gate])
    return render(["load", "policy", "avg JCT (ref)", "avg queueing (ref)", "gate"], rows)


# ---- contended scenarios ----------------------------------------------------------

def contended(load):
    table = md_table("results/contended.md", f"offered load {load}, guarantees cover 100 %")
    return render(table["header"], table["rows"])


KUEUE_VARIANTS = "results/contended-kueue-variants.md"


def kueue_variants():
    """The Kueue-like baseline before fill-back and admission order, with
    each alone, and with both; the fewest preemptions and GPU-s lost in bold."""
    rows = []
    for load in ("0.6", "0.8", "0.95"):
        table = md_table(KUEUE_VARIANTS, f"offered load {load}, guarantees cover 100 %")
        cells = [dict(zip(table["header"], r)) for r in table["rows"]]
        least = {c: min(num(r[c]) for r in cells) for c in ("preemptions", "GPU-s lost")}
        for r in cells:
            rows.append([load, bold(r["policy"], r["policy"] == "kueue-like"), r["avg JCT s"]] +
                        [bold(r[c], num(r[c]) == least[c]) for c in ("preemptions", "GPU-s lost")] +
                        [r["time to guarantee, mean s"]])
    return render(["load", "policy", "avg JCT s", "preemptions", "GPU-s lost",
                   "time to guarantee, mean s"], rows)


COVERAGE_POLICIES = ["fifo-pool", "kueue-like-before", "kueue-like", "kai-like", "gpusched",
                     "gpusched-strict"]
COVERAGE_COLUMNS = ["avg JCT s", "util while jobs wait", "preemptions", "GPU-s lost",
                    "time to guarantee, mean s", "surplus fairness (Jain)",
                    "longest gang wait s"]


def coverage():
    rows = []
    for cov in (0, 50, 100):
        for load in ("0.6", "0.8", "0.95"):
            table = md_table("results/contended-coverage/coverage.md",
                             f"offered load {load}, guarantees cover {cov} %")
            cells = by_first_cell(table)
            for policy in COVERAGE_POLICIES:
                rows.append([f"{cov} %", load, policy] +
                            [cells[policy][c] for c in COVERAGE_COLUMNS])
    return render(["guarantees cover", "load", "policy"] + COVERAGE_COLUMNS, rows)


ESTIMATE_POLICIES = ["kueue-like", "gpusched-strict", "gpusched-besteffort", "gpusched-backfill"]
ESTIMATE_COLUMNS = ["avg JCT s", "p95 JCT s", "preemptions", "longest gang wait s",
                    "backfill overruns", "heads passed by backfill", "head slips",
                    "est. start median abs err s", "est. start within 25 %",
                    "naive median abs err s", "naive within 25 %"]


def estimates_contended():
    """Backfill against the other queueing strategies, and the estimated start's accuracy."""
    rows = []
    for load in ("0.6", "0.8", "0.95"):
        cells = by_first_cell(md_table("results/estimates/contended.md", f"offered load {load},"))
        for policy in ESTIMATE_POLICIES:
            rows.append([load, policy] + [cells[policy][c] for c in ESTIMATE_COLUMNS])
    return render(["load", "policy"] + ESTIMATE_COLUMNS, rows)


PHILLY_BACKFILL = "results/estimates/philly-backfill/grid.json"


def philly_backfill():
    """Backfill against the shipped default (BestEffortFIFO) on Philly windows at 44 nodes."""
    rows = []
    for g in load_json(PHILLY_BACKFILL)["grid"]:
        r = g["results"]
        k, d, b = r["kueue-like"], r["gpusched"], r["backfill"]
        e = b["estimates"]
        rows.append([window(g), g["namespaces"], grouped(k["avg_jct_s"]), grouped(d["avg_jct_s"]),
                     grouped(b["avg_jct_s"]), f"{100 * (b['avg_jct_s'] / d['avg_jct_s'] - 1):+.0f} %",
                     f"{grouped(d['p95_jct_s'])} / {grouped(b['p95_jct_s'])}",
                     f"{grouped(d['preemptions'])} / {grouped(b['preemptions'])}",
                     f"{grouped(d['max_gang_wait_s'])} / {grouped(b['max_gang_wait_s'])}",
                     grouped(e["backfill_overruns"]),
                     f"{e['backfill_head_slips']} of {e['backfill_heads_passed']}"])
    return render(["window", "namespaces", "Kueue-like avg JCT s", "default avg JCT s",
                   "Backfill avg JCT s", "Backfill vs default", "p95 JCT s (default / Backfill)",
                   "preemptions (default / Backfill)", "longest gang wait s (default / Backfill)",
                   "backfill overruns", "head slips of heads passed"], rows)


# ---- training jobs: whole-gang preemption against the previous version -------------

TRAINING = "results/training-replay/{version}-{policy}-seed{seed}.json"
TRAINING_RUNS = [(policy, version, seed) for policy in ("lowerPriority", "anyBorrower")
                 for version in ("previous", "this") for seed in (1, 2, 3)]
TRAINING_COLUMNS = [["avg_jct_s"], ["p95_jct_s"], ["preemptions"], ["reclaim_evictions"],
                    ["lost_gpu_seconds"], ["avg_time_to_guarantee_s", "p95_time_to_guarantee_s"]]


def training_cell(this, previous, keys):
    """Seeds 1 / 2 / 3 of each key (keys joined by "; "). In a "this" row a
    figure below the previous version's is bold; the whole cell when all are."""
    values = [(r[k], p[k] if p else None) for k in keys for r, p in
              zip(this, previous or [None] * len(this))]
    better = [p is not None and v < p for v, p in values]
    texts = [bold(grouped(v), b and not all(better)) for (v, _), b in zip(values, better)]
    n = len(this)
    cell = "; ".join(" / ".join(texts[i:i + n]) for i in range(0, len(texts), n))
    return bold(cell, all(better))


def training_replay():
    """The training-job replay per reclaim policy, this version against the previous."""
    runs = {}
    for policy, version, seed in TRAINING_RUNS:
        (run,) = load_json(TRAINING.format(version=version, policy=policy, seed=seed))
        runs.setdefault((policy, version), []).append(run)
    rows = []
    for policy, label in (("lowerPriority", "`lowerPriority` (shipped)"),
                          ("anyBorrower", "`anyBorrower`")):
        for version in ("previous", "this"):
            previous = runs[(policy, "previous")] if version == "this" else None
            rows.append([label, version] + [training_cell(runs[(policy, version)], previous, keys)
                                            for keys in TRAINING_COLUMNS])
    return render(["reclaim policy", "version", "avg JCT (s)", "p95 JCT (s)", "preemptions",
                   "reclaim evictions", "GPU-s lost", "time to guarantee, mean / p95 (s)"], rows)


# ---- Philly on one pool -------------------------------------------------------------

def philly_pool_runs():
    """{(nodes, "one"|"vc", offset days): {policy: row}} from results/philly-pool/."""
    runs = {}
    for name in ("one-namespace", "held-out", "vcs"):
        for t in md_tables(f"results/philly-pool/{name}.md"):
            m = re.search(r"\+ (\d+) d\).* pool of (\d+) 8-GPU nodes \((one namespace|each VC)",
                          t["heading"])
            if m:
                key = (int(m.group(2)), "one" if m.group(3) == "one namespace" else "vc",
                       int(m.group(1)))
                runs[key] = by_first_cell(t)
    return runs


def num(cell):
    return float(cell.replace(",", ""))


def philly_pool():
    """Attained-service ordering against the oracle on 4-day Philly pools."""
    runs = philly_pool_runs()
    spec = [(48, "one", 0, "days 0–4 (tuned)"), (40, "one", 0, "days 0–4"),
            (48, "one", 4, "days 4–8"), (48, "one", 8, "days 8–12"),
            (48, "one", 12, "days 12–16"), (48, "vc", 0, "days 0–4"),
            (40, "vc", 0, "days 0–4")]
    rows = []
    for nodes, mode, offset, window in spec:
        r = runs[(nodes, mode, offset)]
        srtf, attained = r["srtf-pool"], r["gpusched-attained"]
        vs = num(attained["avg JCT s"]) / num(srtf["avg JCT s"]) * 100 - 100
        rows.append([f"{nodes} nodes", "one" if mode == "one" else "each VC", window,
                     f"{srtf['avg JCT s']} ({srtf['preemptions']})",
                     r["fifo-pool"]["avg JCT s"], r["kueue-like"]["avg JCT s"],
                     r["gpusched"]["avg JCT s"],
                     bold(f"{attained['avg JCT s']} ({attained['preemptions']})", mode == "one"),
                     (f"{vs:+.1f} %" if abs(vs) < 1 else f"{vs:+.0f} %").replace("-", MINUS)])
    return render(["pool", "namespaces", "window", "oracle SRTF (preemptions)", "FIFO (pooled)",
                   "Kueue-like", "gpusched StrictFIFO",
                   "gpusched + attainedService (preemptions)", "vs SRTF"], rows)


# ---- Philly windows grid -----------------------------------------------------------

BASELINES = "results/philly-grid/baselines/grid.json"
HALF = {0: "tune", 4: "held-out", 8: "tune", 12: "held-out", 16: "tune", 20: "held-out"}


def window(g):
    return f"days {g['offset']:g}-{g['offset'] + g['days']:g}"


def kueue_before_after():
    """Kueue-like before and after fill-back on the Philly windows, each VC a namespace."""
    rows = []
    for g in load_json(BASELINES)["grid"]:
        if g["namespaces"] != "vc":
            continue
        b, a = g["results"]["kueue-like-before"], g["results"]["kueue-like"]
        rows.append([window(g), g["nodes"], grouped(b["avg_jct_s"]), grouped(a["avg_jct_s"]),
                     grouped(b["preemptions"]), grouped(a["preemptions"]),
                     f"{b['preemptions'] / a['preemptions']:.2f}",
                     grouped(b["lost_gpu_seconds"]), grouped(a["lost_gpu_seconds"]),
                     f"{b['lost_gpu_seconds'] / a['lost_gpu_seconds']:.2f}"])
    return render(["window", "nodes", "avg JCT s before", "after", "preemptions before", "after",
                   "ratio", "GPU-s lost before", "after", "ratio"], rows)


def philly_baselines():
    """FIFO, Kueue-like and KAI-like on every Philly window."""
    rows = []
    for g in load_json(BASELINES)["grid"]:
        r = g["results"]
        rows.append([f"{window(g)} ({HALF[int(g['offset'])]})", g["nodes"], g["namespaces"],
                     grouped(r["fifo-pool"]["avg_jct_s"]), grouped(r["kueue-like"]["avg_jct_s"]),
                     grouped(r["kai-like"]["avg_jct_s"]), grouped(r["kueue-like"]["preemptions"]),
                     grouped(r["kai-like"]["preemptions"]),
                     grouped(r["kueue-like"]["max_gang_wait_s"])])
    return render(["window", "nodes", "namespaces", "fifo-pool", "Kueue-like", "KAI-like",
                   "Kueue-like preemptions", "KAI-like preemptions",
                   "Kueue-like longest gang wait s"], rows)


SHIPPED_DEFAULT = "results/philly-grid/default/grid.json"


def philly_default():
    """The shipped default against Kueue-like on every Philly window, 40 / 44 / 48 nodes."""
    cells = {}
    for g in load_json(SHIPPED_DEFAULT)["grid"]:
        cells[(int(g["offset"]), g["namespaces"], g["nodes"])] = g["results"]
    rows = []
    for offset in sorted({k[0] for k in cells}):
        for ns in ("one", "vc"):
            kueue, ours = [], []
            for nodes in (40, 44, 48):
                r = cells[(offset, ns, nodes)]
                k, o = r["kueue-like"]["avg_jct_s"], r["gpusched"]["avg_jct_s"]
                kueue.append(grouped(k))
                ours.append((grouped(o), o / k))
            ratios = " / ".join(f"**{q:.2f}**" if q > 1.1 else f"{q:.2f}" for _, q in ours)
            label = "tune" if HALF[offset] == "tune" else "held out"
            rows.append([f"days {offset}-{offset + 4} ({label})",
                         "one" if ns == "one" else "each VC", " / ".join(kueue),
                         " / ".join(v for v, _ in ours) + f" ({ratios})"])
    return render(["window", "namespaces", "Kueue-like, 40 / 44 / 48 nodes",
                   "shipped default, 40 / 44 / 48 nodes (ratio)"], rows)


# ---- topology-aware gangs ----------------------------------------------------------------

TOPOLOGY = "results/topology/runs.csv"
TOPOLOGY_HELD_OUT = "results/topology/seeds-4-6/runs.csv"
TOPO_POLICIES = {"gpusched": "gpusched, no levels (today)",
                 "gpusched-topology": "gpusched with topology levels",
                 "gpusched-topology-domainfit": "gpusched with levels and DomainFit 30",
                 "kueue-tas": "Kueue-TAS-like"}


def topology_means(path=TOPOLOGY, model="levels"):
    """{(scenario, policy): {column: mean over seeds}} and {scenario: half}, in file order,
    under slowdown model `model` (rows written before the models were named are "span"); a
    scenario run under the other model only keeps its rows, its means' "model" saying which."""
    runs, halves, models = {}, {}, {}
    for row in csv.DictReader(open(path_of(path), encoding="utf-8")):
        m = row.get("slowdown_model") or "span"
        runs.setdefault((row["scenario"], row["policy"], m), []).append(row)
        halves[row["scenario"]] = row["half"]
        models.setdefault(row["scenario"], set()).add(m)
    means = {}
    for (scenario, policy, m), rows in runs.items():
        if m != model and model in models[scenario]:
            continue
        means[(scenario, policy)] = {
            c: statistics.mean(float(r[c]) for r in rows) for c in rows[0]
            if c not in ("scenario", "half", "topology", "policy", "singles", "ties",
                         "slowdown_model", "level_factors")}
        means[(scenario, policy)]["seeds"] = len(rows)
        means[(scenario, policy)]["model"] = m
    return means, halves


def pct(v):
    return f"{100 * v:.0f} %"


def topology_compare():
    """Every placement on every scenario with single pods (mean of the seeds)."""
    means, halves = topology_means()
    rows = []
    for (scenario, policy), m in means.items():
        if scenario.endswith("gangs-only"):
            continue
        label = f"{scenario} ({halves[scenario]})"
        if m["model"] != "levels":
            label = f"{scenario} ({halves[scenario]}, {m['model']} model, s = {m['slowdown']:g})"
        rows.append([label, TOPO_POLICIES.get(policy, policy),
                     pct(m["one_domain_share"]), f"{m['required_spread']:.1f}",
                     grouped(m["gang_wait_mean_s"]), grouped(m["gang_wait_p95_s"]),
                     grouped(m["avg_jct_s"]), grouped(m["avg_gang_jct_s"]),
                     f"{m['utilisation']:.2f}", pct(m["whole_group"]), pct(m["whole_top"]),
                     pct(m["top_spread_share"])])
    return render(["scenario", "placement", "gangs in one domain", "required gangs spread",
                   "gang wait mean s", "gang wait p95 s", "avg JCT s", "avg gang JCT s",
                   "GPUs allocated", "racks/cliques whole", "blocks/cliques whole",
                   "gangs over blocks/cliques"], rows)


def topology_singles():
    """Domains left whole with and without the single pods (same gangs, same arrivals)."""
    means, _ = topology_means()
    rows = []
    for cluster in ("racks", "cliques"):
        for (scenario, policy), m in means.items():
            if scenario != f"{cluster}-0.8":
                continue
            alone = means.get((f"{cluster}-0.8-gangs-only", policy))
            if alone is None:
                continue
            rows.append([cluster, TOPO_POLICIES.get(policy, policy), pct(alone["whole_group"]),
                         pct(m["whole_group"]),
                         signed(100 * (m["whole_group"] - alone["whole_group"]), 1) + " pts",
                         pct(alone["one_domain_share"]), pct(m["one_domain_share"]),
                         grouped(alone["gang_wait_mean_s"]), grouped(m["gang_wait_mean_s"])])
    return render(["cluster (load 0.8)", "placement", "racks/cliques whole, gangs only",
                   "with single pods", "change", "gangs in one domain, gangs only",
                   "with single pods", "gang wait mean s, gangs only", "with single pods"], rows)


def topology_domainfit():
    """DomainFit's effect at load 0.8 with single pods: seeds 1-3 (tuned on) and 4-6 (held out)."""
    rows = []
    for path, seeds in ((TOPOLOGY, "1–3"), (TOPOLOGY_HELD_OUT, "4–6 (held out)")):
        means, _ = topology_means(path)
        for cluster, ties in (("racks", ""), ("racks", "-random-ties"), ("cliques", ""),
                              ("cliques", "-random-ties")):
            for (scenario, policy), m in means.items():
                if scenario != f"{cluster}-0.8{ties}":
                    continue
                rows.append([cluster, "random" if ties else "node index", seeds,
                             TOPO_POLICIES.get(policy, policy),
                             pct(m["whole_group"]), pct(m["whole_top"]),
                             pct(m["one_domain_share"]), grouped(m["gang_wait_mean_s"]),
                             grouped(m["gang_wait_p95_s"]), grouped(m["single_wait_mean_s"]),
                             grouped(m["avg_single_jct_s"]), grouped(m["avg_jct_s"]),
                             f"{m['utilisation']:.3f}"])
    return render(["cluster (load 0.8)", "equal scores", "seeds", "placement",
                   "racks/cliques whole",
                   "blocks/cliques whole", "gangs in one domain", "gang wait mean s",
                   "gang wait p95 s", "single-pod wait mean s", "single-pod JCT s",
                   "avg JCT s", "GPUs allocated"], rows)


TOPOLOGY_NO_CLIMB = "results/topology/no-climb/runs.csv"
TOPOLOGY_NO_CLIMB_HELD_OUT = "results/topology/seeds-4-6/no-climb/runs.csv"


def topology_models():
    """Both slowdown models on the same runs (racks, load 0.8): seeds 1-3 and held-out 4-6."""
    rows = []
    for path, seeds in ((TOPOLOGY, "1–3"), (TOPOLOGY_HELD_OUT, "4–6 (held out)")):
        levels, _ = topology_means(path, "levels")
        span, _ = topology_means(path, "span")
        for ties in ("", "-random-ties"):
            for (scenario, policy), m in levels.items():
                if scenario != f"racks-0.8{ties}":
                    continue
                o = span[(scenario, policy)]
                rows.append(["random" if ties else "node index", seeds,
                             TOPO_POLICIES.get(policy, policy), pct(m["top_spread_share"]),
                             grouped(o["avg_gang_jct_s"]), grouped(m["avg_gang_jct_s"]),
                             grouped(o["avg_jct_s"]), grouped(m["avg_jct_s"])])
    return render(["equal scores", "seeds", "placement", "gangs over blocks",
                   "avg gang JCT s, span model", "levels model", "avg JCT s, span model",
                   "levels model"], rows)


def topology_climb():
    """Preferred gangs climbing levels or not (racks, load 0.8), under both slowdown models."""
    rows = []
    for climb_path, no_path, seeds in ((TOPOLOGY, TOPOLOGY_NO_CLIMB, "1–3"),
                                       (TOPOLOGY_HELD_OUT, TOPOLOGY_NO_CLIMB_HELD_OUT,
                                        "4–6 (held out)")):
        for model in ("levels", "span"):
            climb, _ = topology_means(climb_path, model)
            no, _ = topology_means(no_path, model)
            for ties in ("", "-random-ties"):
                for policy in ("gpusched-topology", "gpusched-topology-domainfit"):
                    key = (f"racks-0.8{ties}", policy)
                    if key not in no:
                        continue
                    a, b = no[key], climb[key]
                    change = 100 * (b["avg_jct_s"] - a["avg_jct_s"]) / a["avg_jct_s"]
                    rows.append([model, "random" if ties else "node index", seeds,
                                 TOPO_POLICIES.get(policy, policy),
                                 f"{pct(a['top_spread_share'])} → {pct(b['top_spread_share'])}",
                                 f"{grouped(a['gang_wait_mean_s'])} → "
                                 f"{grouped(b['gang_wait_mean_s'])}",
                                 f"{grouped(a['single_wait_mean_s'])} → "
                                 f"{grouped(b['single_wait_mean_s'])}",
                                 f"{grouped(a['avg_gang_jct_s'])} → "
                                 f"{grouped(b['avg_gang_jct_s'])}",
                                 f"{grouped(a['avg_jct_s'])} → {grouped(b['avg_jct_s'])}",
                                 signed(change, 1) + " %"])
    return render(["slowdown model", "equal scores", "seeds", "placement",
                   "gangs over blocks, no climb → climb", "gang wait mean s",
                   "single-pod wait mean s", "avg gang JCT s", "avg JCT s", "avg JCT change"],
                  rows)


# The block factor's sensitivity runs: held-out seeds 4-6, levels model, F(blocks) from each
# oversubscription ratio R across blocks (docs/simulator.md, "Slowdown models").
TOPOLOGY_SENSITIVITY = [(r, f"results/topology/sensitivity/blocks-{r}to1/runs.csv")
                        for r in (1, 2, 4, 7, 15)]


def blocks_factor(path):
    """F(blocks) the runs of `path` used (the third of their level_factors)."""
    row = next(csv.DictReader(open(path_of(path), encoding="utf-8")))
    return float(row["level_factors"].split(":")[2])


def topology_sensitivity():
    """Gang and average JCT of each placement as the block crossing gets dearer."""
    rows = []
    for ratio, path in TOPOLOGY_SENSITIVITY:
        means, _ = topology_means(path, "levels")
        for scenario in dict.fromkeys(s for s, _ in means):
            today = means[(scenario, "gpusched")]
            levels = means[(scenario, "gpusched-topology")]
            tas = means[(scenario, "kueue-tas")]
            factor = blocks_factor(path)

            def change(a, b, column):
                return signed(100 * (b[column] - a[column]) / a[column], 1) + " %"

            rows.append([f"{ratio}:1", f"{factor:.3f}", scenario,
                         " / ".join(grouped(m["avg_gang_jct_s"]) for m in (today, levels, tas)),
                         " / ".join(grouped(m["avg_jct_s"]) for m in (today, levels, tas)),
                         f"{change(today, levels, 'avg_gang_jct_s')}, "
                         f"{change(today, levels, 'avg_jct_s')}",
                         f"{change(tas, levels, 'avg_gang_jct_s')}, "
                         f"{change(tas, levels, 'avg_jct_s')}"])
    return render(["oversubscription across blocks", "F(blocks)", "scenario (seeds 4–6)",
                   "avg gang JCT s: today / levels / Kueue-TAS-like",
                   "avg JCT s: today / levels / Kueue-TAS-like",
                   "levels vs today: gang, all", "levels vs Kueue-TAS-like: gang, all"], rows)


# ---- the registry -------------------------------------------------------------------

TABLES = {
    "openb-calibration": (["results/grid/grid.md"], calibration),
    "openb-goal": (["results/goal/grid.csv", "results/goal/grid.md"],
                   lambda: goal(with_delta=True, authors_only=False)),
    "openb-goal-published": (["results/goal/grid.csv", "results/goal/grid.md"],
                             lambda: goal(with_delta=False, authors_only=True)),
    "openb-variants-tune": (["results/openb-variants/grid.md"],
                            lambda: openb_variants("TUNE")),
    "openb-variants-held-out": (["results/openb-variants/grid.md"],
                                lambda: openb_variants("HELD-OUT")),
    "openb-variants-public": (["results/openb-variants/grid.md"],
                              lambda: openb_variants("public openb traces")),
    "replay-whole-trace": (["results/replay-x1.json", "results/replay-x4.json"],
                           replay_whole_trace),
    "replay-gates": (["results/replay-x1.json", "results/replay-x4.json"], replay_gates),
    "contended-0.6": (["results/contended.md"], lambda: contended("0.6")),
    "contended-0.8": (["results/contended.md"], lambda: contended("0.8")),
    "contended-0.95": (["results/contended.md"], lambda: contended("0.95")),
    "kueue-variants": ([KUEUE_VARIANTS], kueue_variants),
    "contended-coverage": (["results/contended-coverage/coverage.md"], coverage),
    "estimates-contended": (["results/estimates/contended.md"], estimates_contended),
    "estimates-philly-backfill": ([PHILLY_BACKFILL], philly_backfill),
    "training-replay": ([TRAINING.format(version=v, policy=p, seed=n) for p, v, n in TRAINING_RUNS],
                        training_replay),
    "philly-pool": (["results/philly-pool/one-namespace.md", "results/philly-pool/held-out.md",
                     "results/philly-pool/vcs.md"], philly_pool),
    "kueue-before-after-philly": ([BASELINES], kueue_before_after),
    "philly-baselines": ([BASELINES], philly_baselines),
    "philly-default": ([SHIPPED_DEFAULT], philly_default),
    "topology-compare": ([TOPOLOGY], topology_compare),
    "topology-singles": ([TOPOLOGY], topology_singles),
    "topology-domainfit": ([TOPOLOGY, TOPOLOGY_HELD_OUT], topology_domainfit),
    "topology-models": ([TOPOLOGY, TOPOLOGY_HELD_OUT], topology_models),
    "topology-climb": ([TOPOLOGY, TOPOLOGY_HELD_OUT, TOPOLOGY_NO_CLIMB,
                        TOPOLOGY_NO_CLIMB_HELD_OUT], topology_climb),
    "topology-sensitivity": ([p for _, p in TOPOLOGY_SENSITIVITY], topology_sensitivity),
}
TABLES.update(PERF_TABLES)


# ---- markdown files ------------------------------------------------------------------

def blocks(lines):
    """(name, first line index inside, index of the closing marker) of each block."""
    out, open_at = [], {}
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            if re.match(r"\s*<!--\s*/?\s*table:", line):
                raise ValueError(f"line {i + 1}: not a marker as written: {line}")
            continue
        closing, name = m.group(1) == "/", m.group(2)
        if not closing:
            if name in open_at:
                raise ValueError(f"table:{name} opened twice (line {i + 1})")
            open_at[name] = i + 1
        elif name not in open_at:
            raise ValueError(f"/table:{name} without its opening marker (line {i + 1})")
        else:
            out.append((name, open_at.pop(name), i))
    if open_at:
        raise ValueError("no closing marker for " + ", ".join(f"table:{n}" for n in open_at))
    return out


def body(table_lines):
    """What sits between the markers: the table, then a blank line (so the
    closing marker cannot be read as one more row)."""
    return table_lines + [""]


def hand_written_problems(doc, lines):
    """A measured table must be generated: a hand-written one is a problem."""
    return [f"{doc}:{i + 1}: a hand-written table of measured figures; keep the benchmark's "
            "raw output under results/ and generate the table (scripts/perf_tables.py)"
            for i, line in enumerate(lines) if line.startswith(HAND_WRITTEN)]


def process(doc, check, used):
    """Rewrites (or checks) the blocks of one markdown file; returns the
    problems found."""
    text = open(path_of(doc), encoding="utf-8").read()
    lines = text.split("\n")
    try:
        found = blocks(lines)
    except ValueError as e:
        return [f"{doc}: {e}"]
    problems = []
    for name, start, end in reversed(found):
        if name not in TABLES:
            problems.append(f"{doc}:{start}: table:{name} is not a table scripts/tables.py knows")
            continue
        used.add(name)
        sources, make = TABLES[name]
        try:
            want = body(make())
        except (OSError, LookupError, KeyError, ValueError, ZeroDivisionError) as e:
            problems.append(f"{doc}:{start}: table:{name}: cannot read {', '.join(sources)}: {e}")
            continue
        have = lines[start:end]
        if have == want:
            continue
        if check:
            diff = difflib.unified_diff(have, want, f"{doc} (committed)",
                                        f"from {', '.join(sources)}", lineterm="", n=0)
            problems.append(f"{doc}:{start}: table:{name} differs from what "
                            f"{', '.join(sources)} give (run scripts/tables.py):\n" +
                            "\n".join(list(diff)[2:]))
        else:
            lines[start:end] = want
    problems.reverse()  # in the file's order
    problems = hand_written_problems(doc, lines) + problems
    if not check and "\n".join(lines) != text:
        with open(path_of(doc), "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"rewrote {doc}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 if a committed table differs from its results")
    ap.add_argument("--list", action="store_true", help="every table and what it reads")
    a = ap.parse_args()
    if a.list:
        for name, (sources, _) in TABLES.items():
            where = [d for d in DOCS if f"<!-- table:{name} -->" in
                     open(path_of(d), encoding="utf-8").read()]
            print(f"{name}: {', '.join(where) or '(in no file)'} <- {', '.join(sources)}")
        return 0
    used, problems = set(), []
    for doc in DOCS:
        problems += process(doc, a.check, used)
    for name in sorted(set(TABLES) - used):
        problems.append(f"table:{name} is in no markdown file (README.md, docs/*.md)")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"{len(used)} tables {'match their results' if a.check else 'generated'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
