"""The measured-speed tables of README.md and docs/simulator.md, made from the
raw outputs the benchmarks wrote under results/ (each file names its commit
and machine on its first lines):

  results/perf/policy_bench.json          build/bench/policy_bench (Google Benchmark)
  results/perf/codec_bench.json           build/bench/codec_bench
  results/http/load-*.txt                 bench/http/load.sh
  results/http/attacks.txt                bench/http/attacks.sh
  results/agent/agent_bench.json          build/bench/agent/agent_bench
  results/agent/node-agent-rss.txt        node_agent_cli_test's output
  results/queue-scale/curve/*.txt         build/bench/queue/queue_scale, one row each
  results/queue-scale/5000-nodes-*.txt    the same, 5-minute runs
  results/kube/cold-start-*.txt           KubeSourceTest.ColdStartAtProductionSize
  results/replay-speed/x8-kube-backoff.*  /usr/bin/time -v gpusched simulate

scripts/tables.py registers PERF_TABLES with its own; the commands that write
each file are in README.md ("Performance"). Imported, never run.
"""
import re

from table_common import bucket, grouped, load_json, ms, read_text, render


def found(rel, text, pattern, flags=re.M):
    m = re.search(pattern, text, flags)
    if not m:
        raise LookupError(f"{rel}: no line matching {pattern}")
    return m.groups()


def span(values, fmt, unit):
    """"a–b unit" over runs, or one figure when every run printed the same."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return f"{lo} {unit}" if lo == hi else f"{lo}–{hi} {unit}"


def verdict(ok):
    return "**met**" if ok else "**not met**"


# ---- the queue at production depth (bench/queue/queue_scale) ----------------

def queue_scale_run(rel):
    """The columns of one queue_scale run, from its output."""
    text = read_text(rel)

    def get(pattern):
        return found(rel, text, pattern)

    lat = {verb: list(get(rf"^{re.escape(verb)}\s+n=\d+ p50=([\d.]+) ms "
                          r"p99=([\d.]+) ms max=([\d.]+) ms"))
           for verb in ("filter", "prioritize", "debug/queues?namespace=")}
    binds = re.search(r"^bind\s+n=\d+ p50=([\d.]+) ms p99=([\d.]+) ms", text, re.M)
    lock = get(r"^queue lock during the run: p99 <= ([\d.]+) ms, longest <= ([\d.]+) ms")
    held = []
    for site, cpu, ran, waited in re.findall(
            r"^queue lock site (\S+) .*CPU longest <= ([\d.]+) ms; >= 5 ms: (\d+) holder ran, "
            r"(\d+) holder waited", text, re.M):
        if int(ran) or int(waited):
            who = ("holder ran" if not int(waited) else
                   "holder waited" if not int(ran) else f"{ran} holder ran, {waited} waited")
            held.append((int(ran) + int(waited), f"`{site}`, {who}: CPU ≤ {bucket(cpu)} ms"))
    holds = (f"{sum(n for n, _ in held)} ({'; '.join(t for _, t in held)})" if held
             else "**none**")
    tick = get(r"^tick: p50 <= [\d.]+ ms, p99 <= ([\d.]+) ms")[0]
    tick_cpu = get(r"^tick CPU: p50 <= [\d.]+ ms, p99 <= ([\d.]+) ms")[0]
    memory = int(get(r"^memory: .*: (-?\d+) B per pending pod")[0])
    # --idle: the pending pods are not shown to the server, so nothing is bound.
    idle = re.search(r"^bind\s+n=0 ", text, re.M) is not None
    cold = float(get(r"^cold start .*: ([\d.]+) s")[0])
    stop, stops = get(r"^machine alone: a spinning thread stopped for up to ([\d.]+) ms "
                      r"\((\d+) stops > 1 ms")
    return [f"{ms(lat['filter'][0])} / {ms(lat['filter'][1])} / {ms(lat['filter'][2])} ms",
            f"{ms(lat['prioritize'][0])} / {ms(lat['prioritize'][1])} / "
            f"{ms(lat['prioritize'][2])} ms",
            f"{ms(binds[1])} / {ms(binds[2])} ms" if binds else "— (none)",
            f"{ms(lat['debug/queues?namespace='][1])} / {ms(lat['debug/queues?namespace='][2])} ms",
            f"≤ {bucket(lock[0])} / ≤ {bucket(lock[1])} ms; {holds}",
            f"≤ {bucket(tick)} ms (≤ {bucket(tick_cpu)} ms)",
            "— (none pending)" if idle else
            f"{memory:,} B" if memory > 0 else "— (within RSS noise)", f"{cold:.2f} s",
            f"{ms(stop)} ms, {stops} stops > 1 ms"]


QUEUE_COLUMNS = ["filter p50 / p99 / max", "prioritize p50 / p99 / max", "bind p50 / p99",
                 "`/debug/queues?namespace=` p99 / max", "queue lock p99 / longest; holds ≥ 5 ms",
                 "tick p99 (CPU p99)", "memory per pending pod", "cold start",
                 "machine alone, longest stop"]

# The curve: one 30 s run per row (file, nodes, pending pods, namespaces).
CURVE = "results/queue-scale/curve/{}.txt"
CURVE_ROWS = [
    ("5000-1000", "5,000", "1,000", "500"),
    ("5000-10000", "5,000", "10,000", "500"),
    ("5000-50000", "5,000", "50,000", "500"),
    ("5000-50000-50ns", "5,000", "50,000", "50 (1,000 per namespace)"),
    ("5000-50000-topology", "5,000", "50,000, gangs asking for racks (`--topology`)", "500"),
    ("5000-idle", "5,000", "none (`--idle`)", "500"),
    ("500-50000", "500", "50,000", "500"),
    ("20000-50000", "20,000", "50,000", "500"),
]


def queue_scale_curve():
    rows = [[nodes, pending, ns] + queue_scale_run(CURVE.format(f))
            for f, nodes, pending, ns in CURVE_ROWS]
    return render(["nodes", "pending", "namespaces"] + QUEUE_COLUMNS, rows)


# Five-minute runs of the default row on a quiet machine, and the idle one.
QUEUE_RUNS_LATEST = [
    ("5000-nodes-run15-5min-4ad8ce2.txt", "15 (5 min)"),
    ("5000-nodes-run16-5min-4ad8ce2.txt", "16, the same build again (5 min)"),
    ("5000-nodes-run17-5min-4ad8ce2.txt", "17, the same build again (5 min)"),
    ("5000-nodes-idle-2min-4ad8ce2.txt", "nothing pending (`--idle`, 2 min)"),
    ("5000-nodes-topology-5min-4ad8ce2.txt",
     "gangs asking for racks (`--topology`, 5 min)"),
]


def queue_scale_runs(runs):
    rows = [[label] + queue_scale_run(f"results/queue-scale/{f}") for f, label in runs]
    return render(["run"] + QUEUE_COLUMNS, rows)


def queue_scale_latest():
    return queue_scale_runs(QUEUE_RUNS_LATEST)


# The same goals, judged again on the newest build (the admission snapshot,
# the estimate's simulation at idle priority, the reclaim choice's budget).
QUEUE_RUNS_NEWEST = [
    ("5000-nodes-run42-5min-6d57175.txt", "42, 6d57175 (5 min)"),
    ("5000-nodes-run43-5min-2261f19.txt", "43, 6d57175's server again (2261f19, 5 min)"),
    ("5000-nodes-run44-5min-2261f19.txt", "44, 6d57175's server again (2261f19, 5 min)"),
    ("5000-nodes-idle-2min-2261f19.txt",
     "nothing pending (`--idle`, 2 min; 6d57175's server, 2261f19)"),
]


def queue_scale_newest():
    return queue_scale_runs(QUEUE_RUNS_NEWEST)


# The queue mutex's holders that no filter, prioritize, preempt or bind
# request makes: the tick's steps, the estimate refresh, the status
# publisher and the scrape (the lock goal: no request waits on one of them
# for more than 1 ms).
BACKGROUND_SITES = ["tick-sync", "tick-choose", "tick-view", "tick-commit", "tick-followup",
                    "tick-over-limit", "estimate-copy", "estimate-view", "estimate-publish",
                    "positions", "metrics", "options", "resync"]
QUEUE_RUNS_HOLDS = QUEUE_RUNS_LATEST[:3] + QUEUE_RUNS_LATEST[4:]


def background_holds(rel):
    """Site -> "longest ≤ W ms (CPU ≤ C ms), N holds" of one run."""
    text = read_text(rel)
    out = {}
    for site, longest, cpu, holds in re.findall(
            r"^queue lock site (\S+)\s+p99 <= [\d.]+ ms, longest <= ([\d.]+) ms, "
            r"CPU longest <= ([\d.]+) ms; .*; (\d+) holds", text, re.M):
        if site in BACKGROUND_SITES:
            out[site] = (float(longest), f"≤ {bucket(longest)} ms (CPU ≤ {bucket(cpu)} ms), "
                         f"{grouped(int(holds))}")
    return out


def queue_background_holds():
    runs = [background_holds(f"results/queue-scale/{f}") for f, _ in QUEUE_RUNS_HOLDS]
    rows = []
    for site in BACKGROUND_SITES:
        if not any(site in r for r in runs):
            continue
        cells = [r[site][1] if site in r else "— (not held)" for r in runs]
        worst = max(r[site][0] for r in runs if site in r)
        rows.append([f"`{site}`"] + cells + [verdict(worst <= 1)])
    return render(["site"] + [label for _, label in QUEUE_RUNS_HOLDS] + ["≤ 1 ms"], rows)


# Runs that print the queue mutex's waits per site and the waits of 1 ms or
# more by holder (`queue lock waits >= 1 ms ...`, from a3f0598 on).
QUEUE_RUNS_WAITS = [
    ("5000-nodes-run18-5min-a3f0598.txt", "18, a3f0598 (5 min)"),
    ("5000-nodes-run19-5min-a3f0598.txt", "19, a3f0598 again (5 min)"),
    ("5000-nodes-run20-5min-a3f0598.txt", "20, a3f0598 again (5 min)"),
    ("5000-nodes-run21-5min-1a3db48.txt", "21, requests go first (1a3db48, 5 min)"),
    ("5000-nodes-run22-5min-1a3db48.txt", "22, 1a3db48 again (5 min)"),
    ("5000-nodes-run23-5min-1a3db48.txt", "23, 1a3db48 again (5 min)"),
    ("5000-nodes-run24-5min-ac393e0.txt", "24, and the borrowers' walk (ac393e0, 5 min)"),
    ("5000-nodes-run25-5min-ac393e0.txt", "25, ac393e0 again (5 min)"),
    ("5000-nodes-run26-5min-ac393e0.txt", "26, ac393e0 again (5 min)"),
    ("5000-nodes-run27-5min-75c067b.txt",
     "27, and only changed namespaces copied for estimates (75c067b, 5 min)"),
    ("5000-nodes-run28-5min-75c067b.txt", "28, 75c067b again (5 min)"),
    ("5000-nodes-run29-5min-75c067b.txt", "29, 75c067b again (5 min)"),
    ("5000-nodes-run30-5min-6c2fe37.txt",
     "30, 6c2fe37 (75c067b's queue; `queue_scale` counts the copies, 5 min)"),
    ("5000-nodes-run31-5min-18f073a.txt",
     "31, admission snapshot, first version (18f073a, 5 min)"),
    ("5000-nodes-run32-5min-46327e1.txt",
     "32, admission snapshot: asks are clocks, shared ledger (46327e1, 5 min)"),
    ("5000-nodes-run33-5min-1067cb0.txt",
     "33, the state owner publishes after every hold (1067cb0, 5 min)"),
    ("5000-nodes-run34-5min-00cbabc.txt",
     "34, and the ledger's sums in one merged walk (00cbabc, 5 min)"),
    ("5000-nodes-run35-5min-bf51527.txt",
     "35, 00cbabc's queue again (bf51527, 5 min)"),
    ("5000-nodes-run36-5min-15c12f6.txt",
     "36, a bound pod not asked about again; pods not shown yet on the snapshot (15c12f6, 5 min)"),
    ("5000-nodes-run37-5min-9d8004e.txt",
     "37, and gang members their queue refuses on the snapshot (9d8004e, 5 min)"),
    ("5000-nodes-run38-5min-9d8004e.txt", "38, 9d8004e again (5 min)"),
    ("5000-nodes-run39-5min-e84a597.txt",
     "39, the estimate's simulation at idle priority; prioritize's own name memory (e84a597, 5 min)"),
    ("5000-nodes-run40-5min-31d67af.txt", "40, e84a597's server again (31d67af, 5 min)"),
    ("5000-nodes-run41-5min-31d67af.txt", "41, e84a597's server again (31d67af, 5 min)"),
    ("5000-nodes-run42-5min-6d57175.txt",
     "42, and the reclaim choice's budget counts the ledger (6d57175, 5 min)"),
    ("5000-nodes-run43-5min-2261f19.txt", "43, 6d57175's server again (2261f19, 5 min)"),
    ("5000-nodes-run44-5min-2261f19.txt", "44, 6d57175's server again (2261f19, 5 min)"),
]
REQUEST_SITES = ["admit", "assume-bind", "bound", "backfill", "gang-reserve", "reserved-node",
                 "preempt", "preempt-commit"]


def lock_waits(rel):
    """One run's row: latencies, and the request waits of 1 ms or more by holder."""
    text = read_text(rel)
    filt = found(rel, text, r"^filter\s+n=\d+ p50=([\d.]+) ms p99=([\d.]+) ms max=([\d.]+) ms")
    longest = found(rel, text, r"^queue lock wait admit\s+p99 <= [\d.]+ ms, longest <= ([\d.]+) ms")[0]
    stop = found(rel, text, r"^machine alone: a spinning thread stopped for up to ([\d.]+) ms")[0]
    on_background, on_request = {}, 0
    for site, holder, n in re.findall(
            r'^queue lock waits >= 1 ms \{site="([^"]+)",holder="([^"]+)"\}: (\d+)', text, re.M):
        if site not in REQUEST_SITES:
            continue
        if holder in REQUEST_SITES or holder == "none":
            on_request += int(n)
        else:
            on_background[holder] = on_background.get(holder, 0) + int(n)
    total = sum(on_background.values())
    by = ", ".join(f"`{h}` {n}" for h, n in sorted(on_background.items(), key=lambda kv: -kv[1]))
    return total, [f"{filt[0]} / {filt[1]} / {filt[2]} ms", f"≤ {bucket(longest)} ms",
                   f"{total} ({by})" if total else "**none**", str(on_request), f"{stop} ms"]


def queue_lock_waits():
    rows = []
    for f, label in QUEUE_RUNS_WAITS:
        total, cells = lock_waits(f"results/queue-scale/{f}")
        rows.append([label] + cells + [verdict(total == 0)])
    return render(["run", "filter p50 / p99 / max", "longest `admit` wait",
                   "request waits ≥ 1 ms on background work (by holder)",
                   "request waits ≥ 1 ms on another request", "machine alone, longest stop",
                   "no request waits on background work ≥ 1 ms"], rows)


# Idle runs (`--idle`, 2 min) of two builds on one day, alternated (ABBA):
# is a slower idle filter the code or the machine?
QUEUE_IDLE_AB = [
    ("idle-ab/1-75c067b.txt", "1st, 75c067b"),
    ("idle-ab/2-4ad8ce2.txt", "2nd, 4ad8ce2"),
    ("idle-ab/3-4ad8ce2.txt", "3rd, 4ad8ce2 again"),
    ("idle-ab/4-75c067b.txt", "4th, 75c067b again"),
]


def queue_idle_ab():
    rows = []
    for f, label in QUEUE_IDLE_AB:
        rel = f"results/queue-scale/{f}"
        text = read_text(rel)
        filt = found(rel, text, r"^filter\s+n=(\d+) p50=([\d.]+) ms p99=([\d.]+) ms max=([\d.]+) ms")
        stop = found(rel, text, r"^machine alone: a spinning thread stopped for up to ([\d.]+) ms "
                                r"\((\d+) stops > 1 ms")
        rows.append([label, grouped(int(filt[0])), f"{filt[1]} / {filt[2]} / {filt[3]} ms",
                     f"{stop[0]} ms, {stop[1]} stops > 1 ms",
                     verdict(float(filt[1]) <= 0.3 and float(filt[2]) <= 0.6)])
    return render(["run (one after another)", "filters", "filter p50 / p99 / max",
                   "machine alone, longest stop", "p50 ≤ 0.3 ms, p99 ≤ 0.6 ms"], rows)


# ---- in-process verbs (policy_bench) ---------------------------------------

POLICY_BENCH = "results/perf/policy_bench.json"
POLICY_ROWS = [("BM_Filter", "filter (`ExtenderService::Filter`)"),
               ("BM_Prioritize", "prioritize"),
               ("BM_FilterPrioritizeCycle",
                "decode + filter + encode + decode + prioritize + encode")]


def duration(us):
    """Microseconds as "105 µs" below 1 ms, "1.57 ms" above."""
    return f"{us:.3g} µs" if us < 1000 else f"{us / 1000:.2f} ms"


def in_us(bench):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[bench["time_unit"]]
    return bench["cpu_time"] * scale


def policy_bench():
    runs = {b["name"]: b for b in load_json(POLICY_BENCH)["benchmarks"]}
    rows = [[label] + [duration(in_us(runs[f"{name}/{n}"])) for n in (500, 5000, 20000)]
            for name, label in POLICY_ROWS]
    return render(["in-process (`policy_bench`, one thread, shipped scoring, CPU time)",
                   "500 names", "5,000 names", "20,000 names"], rows)


CODEC_BENCH = "results/perf/codec_bench.json"


def codec_bench():
    """Decoding an ExtenderArgs with simdjson's DOM and nlohmann's."""
    runs = {b["name"]: in_us(b) for b in load_json(CODEC_BENCH)["benchmarks"]}
    names = (500, 5000, 20000)
    rows = [[label] + [duration(runs[f"{bench}/{n}"]) for n in names]
            for bench, label in (("BM_Decode_Simdjson", "simdjson DOM (what the verbs use)"),
                                 ("BM_Decode_NlohmannDom", "nlohmann DOM"))]
    rows.append(["nlohmann / simdjson"] +
                [f"{runs[f'BM_Decode_NlohmannDom/{n}'] / runs[f'BM_Decode_Simdjson/{n}']:.0f}×"
                 for n in names])
    return render(["decode an `ExtenderArgs` (`codec_bench`, CPU time)", "500 names",
                   "5,000 names", "20,000 names"], rows)


# ---- over loopback (bench/http/load.sh) ------------------------------------

LOAD = "results/http/load-{config}-{run}.txt"
LOAD_CONFIGS = ["shipped", "no-quotas"]
LOAD_RUNS = [1, 2]
LOAD_ROWS = [  # label, cluster, names, figure, goal, goal text
    ("500 names, p99", "5000", "500", "p99_ms", 0.8, "≤ 0.8 ms"),
    ("5,000 names, p50", "5000", "5000", "p50_ms", 0.8, "≤ 0.8 ms"),
    ("5,000 names, p99", "5000", "5000", "p99_ms", 2.0, "≤ 2 ms"),
    ("20,000 names, 20,000-node cluster, p99", "20000", "20000", "p99_ms", 8.0, "≤ 8 ms"),
]


def load_run(rel):
    text = read_text(rel)
    cycles = {(c, n): dict(re.findall(r"(\w+)=([\d.]+)", rest))
              for c, n, rest in re.findall(r"^cluster=(\d+) names=(\d+)\s+(cycles=.*)$", text, re.M)}
    rps = float(found(rel, text, r"^Requests/sec:\s+([\d.]+)")[0])
    cache = int(found(rel, text, r"^gpusched_cache_bytes (\d+)")[0])
    nodes = int(found(rel, text, r"^gpusched_cluster_nodes (\d+)")[0])
    return cycles, rps, cache / nodes


def http_load():
    runs = {c: [load_run(LOAD.format(config=c, run=r)) for r in LOAD_RUNS] for c in LOAD_CONFIGS}
    rows = []
    for label, cluster, names, key, goal, goal_text in LOAD_ROWS:
        values = {c: [float(cycles[(cluster, names)][key]) for cycles, *_ in runs[c]]
                  for c in LOAD_CONFIGS}
        worst = max(max(v) for v in values.values())
        rows.append([label] + [span(values[c], ms, "ms") for c in LOAD_CONFIGS] +
                    [f"{goal_text}: {verdict(worst <= goal)}"])
    rps = {c: [r for _, r, _ in runs[c]] for c in LOAD_CONFIGS}
    least = min(min(v) for v in rps.values())
    rows.append(["`wrk -t2 -c4`, filter only, 5,000 names"] +
                [span(rps[c], grouped, "req/s") for c in LOAD_CONFIGS] +
                [f"≥ 4,000 req/s: {verdict(least >= 4000)}"])
    cache = {c: [b for _, _, b in runs[c]] for c in LOAD_CONFIGS}
    most = max(max(v) for v in cache.values())
    rows.append(["cluster cache per GPU node (`gpusched_cache_bytes` / nodes), 5,000 nodes"] +
                [span(cache[c], grouped, "B") for c in LOAD_CONFIGS] +
                [f"≤ 1.5 KiB: {verdict(most <= 1536)}"])
    return render(["measurement", "shipped", "no quotas", "target"], rows)


# ---- hostile clients (bench/http/attacks.sh) --------------------------------

ATTACKS = "results/http/attacks.txt"
ATTACK_ROWS = [
    ("none", "none"),
    ("answers", "6 clients, ~33 MB filters of 3 M unknown nodes (~190 MB answers), "
                "`SO_RCVBUF` 4096, never reading"),
    ("headers-only", "200 connections sending only the header of a 32 MiB POST"),
    ("stalled-bodies", "8 clients sending all but the last byte of 32 MiB bodies"),
    ("slowloris", "300 connections dribbling headers"),
    ("many-headers", "4 clients sending 10,000 header fields (~109 KB)"),
]


def attacks():
    text = read_text(ATTACKS)
    rows = []
    for mode, label in ATTACK_ROWS:
        n, failed, p50, p99, top, rss = found(
            ATTACKS, text, rf"^mode={re.escape(mode)}\s+filters=(\d+) failed=(\d+) "
            r"p50_ms=([\d.]+) p99_ms=([\d.]+) max_ms=([\d.]+) peak_rss_mib=(\d+)")
        rows.append([label, f"{int(n) - int(failed)} of {n}", f"{p50} ms", f"{p99} ms",
                     f"{top} ms", f"{rss} MiB"])
    return render(["attack", "filters answered 200", "p50", "p99", "max", "server peak RSS"],
                  rows)


# ---- the node agent (agent_bench) ---------------------------------------------

AGENT_BENCH = "results/agent/agent_bench.json"
AGENT_RSS = "results/agent/node-agent-rss.txt"


def agent_bench():
    runs = {b["name"]: b for b in load_json(AGENT_BENCH)["benchmarks"]}
    allocate, grpc = runs["BM_PreferAndAllocate"], runs["BM_PreferAndAllocateGrpc/real_time"]
    decode, reconcile = runs["BM_DecodeNodePods"], runs["BM_ReconcilePlan/process_time/real_time"]
    grpc_wall_ms = grpc["real_time"] / 1000
    plan_ms = (in_us(reconcile) + in_us(decode)) / 1000
    rss_text = read_text(AGENT_RSS)
    rss_mb = int(found(AGENT_RSS, rss_text, r"node-agent VmRSS:\s+(\d+) kB")[0]) / 1024
    return render(["measurement", "CPU", "goal"], [
        ["GetPreferredAllocation + Allocate for one container, 100 pods on the node "
         "(pod list in memory)", duration(in_us(allocate)), ""],
        ["the same over the plugin's unix socket, as the kubelet calls it (client side)",
         f"{duration(in_us(grpc))} ({duration(grpc['real_time'])} wall)",
         f"Allocate ≤ 5 ms: {verdict(grpc_wall_ms <= 5)}"],
        ["decode of the node's pod list from the API, 110 pods (45 kB)",
         duration(in_us(decode)), ""],
        ["PodResources List of 110 pods over a unix socket, resolved and compared with 110 "
         "drifted records", duration(in_us(reconcile)),
         f"reconciliation of 110 pods ≤ 20 ms CPU: {verdict(plan_ms <= 20)} "
         f"({plan_ms:.2f} ms with the decode)"],
        ["agent RSS, serving both resources after a kubelet restart (`node_agent_cli_test`)",
         f"{rss_mb:.0f} MB", f"≤ 30 MB: {verdict(rss_mb <= 30)}"],
    ])


# ---- cold start from the API (the kube test) ---------------------------------

COLD_START = "results/kube/cold-start-{allocator}-{run}.txt"
COLD_ROWS = [("glibc", "glibc malloc (as the test links)"),
             ("jemalloc", "jemalloc preloaded (the server's allocator)")]


def cold_start():
    rows = []
    for allocator, label in COLD_ROWS:
        seconds = []
        for run in (1, 2):
            rel = COLD_START.format(allocator=allocator, run=run)
            seconds.append(float(found(rel, read_text(rel),
                                       r"^cold start from the API: .* in ([\d.]+) s")[0]))
        rows.append([label, ", ".join(f"{s:.2f} s" for s in seconds)])
    return render(["`ColdStartAtProductionSize`, 20,000 nodes, 200,000 pods", "runs"], rows)


# ---- replay speed (/usr/bin/time -v) -------------------------------------------

REPLAY_SPEED = "results/replay-speed/x8-kube-backoff"


def minutes(seconds):
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def replay_speed():
    rel = REPLAY_SPEED + ".txt"
    text = read_text(rel)
    wall = found(rel, text, r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)")[0]
    parts = [float(p) for p in wall.split(":")]
    wall_s = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    cpu_s = sum(float(found(rel, text, rf"{kind} time \(seconds\): ([\d.]+)")[0])
                for kind in ("User", "System"))
    rss = int(found(rel, text, r"Maximum resident set size \(kbytes\): (\d+)")[0]) / 1024
    result = load_json(REPLAY_SPEED + ".json")
    run = result[0] if isinstance(result, list) else result
    return render(["replay", "wall", "CPU", "peak RSS", "avg JCT s", "preemptions"], [
        ["whole Philly trace ×8, one pool, `bench/sim/replay-policy.json`, `--kube-backoff`",
         minutes(wall_s), minutes(cpu_s), f"{rss:.0f} MiB", grouped(run["avg_jct_s"]),
         grouped(run["preemptions"])]])


PERF_TABLES = {
    "queue-scale-curve": ([CURVE.format(f) for f, *_ in CURVE_ROWS], queue_scale_curve),
    "queue-scale-latest": ([f"results/queue-scale/{f}" for f, _ in QUEUE_RUNS_LATEST],
                           queue_scale_latest),
    "queue-scale-newest": ([f"results/queue-scale/{f}" for f, _ in QUEUE_RUNS_NEWEST],
                           queue_scale_newest),
    "queue-background-holds": ([f"results/queue-scale/{f}" for f, _ in QUEUE_RUNS_HOLDS],
                               queue_background_holds),
    "queue-lock-waits": ([f"results/queue-scale/{f}" for f, _ in QUEUE_RUNS_WAITS],
                         queue_lock_waits),
    "queue-idle-ab": ([f"results/queue-scale/{f}" for f, _ in QUEUE_IDLE_AB], queue_idle_ab),
    "policy-bench": ([POLICY_BENCH], policy_bench),
    "codec-bench": ([CODEC_BENCH], codec_bench),
    "http-load": ([LOAD.format(config=c, run=r) for c in LOAD_CONFIGS for r in LOAD_RUNS],
                  http_load),
    "http-attacks": ([ATTACKS], attacks),
    "agent-bench": ([AGENT_BENCH, AGENT_RSS], agent_bench),
    "cold-start": ([COLD_START.format(allocator=a, run=r) for a, _ in COLD_ROWS for r in (1, 2)],
                   cold_start),
    "replay-speed": ([REPLAY_SPEED + ".txt", REPLAY_SPEED + ".json"], replay_speed),
}
