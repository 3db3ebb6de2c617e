// Memory of the source's pod -> Job map (scheduler/kube/pod_jobs.h) at
// 50,000 Job-controlled pods: the heap bytes it holds (malloc's usable size
// of every live allocation, counted by replacing operator new/delete in
// this binary), per pod, with Kubernetes-shaped names (36-character uids,
// "team-NN" namespaces, 30-character Job names). Two shapes: one pod per
// Job (the most Jobs) and 10 pods per Job (indexed or parallel Jobs).
// Also the time to fill the map and one RefillJobs-style walk.
//
// Run: pod_jobs_bench (counters bytes_per_pod, pods).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "scheduler/kube/pod_jobs.h"

namespace {

std::atomic<int64_t> live_bytes{0};

void* Allocate(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}

void Free(void* p) {
  if (p == nullptr) return;
  live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(size_t n) { return Allocate(n); }
void* operator new[](size_t n) { return Allocate(n); }
void operator delete(void* p) noexcept { Free(p); }
void operator delete[](void* p) noexcept { Free(p); }
void operator delete(void* p, size_t) noexcept { Free(p); }
void operator delete[](void* p, size_t) noexcept { Free(p); }

namespace gpusched::kube {
namespace {

constexpr int kPods = 50'000;

// A uid as the API server makes them (a version-4 UUID's shape).
std::string Uid(uint64_t i, uint64_t salt) {
  char b[40];
  const uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ salt;
  std::snprintf(b, sizeof b, "%08x-%04x-4%03x-8%03x-%012llx", static_cast<unsigned>(x >> 32),
                static_cast<unsigned>(x >> 16 & 0xffff), static_cast<unsigned>(x >> 4 & 0xfff),
                static_cast<unsigned>(i & 0xfff),
                static_cast<unsigned long long>(x & 0xffffffffffffULL));
  return b;
}

struct Pod {
  std::string uid, ns, job, job_uid;
};

std::vector<Pod> Pods(int pods_per_job) {
  std::vector<Pod> out;
  out.reserve(kPods);
  for (int i = 0; i < kPods; ++i) {
    const int job = i / pods_per_job;
    char name[40];
    std::snprintf(name, sizeof name, "llama-7b-finetune-sweep-%06d", job);
    out.push_back({Uid(i, 0x1234), "team-" + std::to_string(job % 50), name, Uid(job, 0x5678)});
  }
  return out;
}

void BM_PodJobsMemory(benchmark::State& state) {
  const std::vector<Pod> pods = Pods(static_cast<int>(state.range(0)));
  int64_t bytes = 0;
  for (auto _ : state) {
    const int64_t before = live_bytes.load();
    auto* map = new PodJobs();
    for (const Pod& p : pods) map->Set(p.uid, p.ns, p.job, p.job_uid);
    bytes = live_bytes.load() - before;
    benchmark::DoNotOptimize(map->size());
    state.PauseTiming();
    delete map;
    state.ResumeTiming();
  }
  state.counters["pods"] = kPods;
  state.counters["bytes_per_pod"] = static_cast<double>(bytes) / kPods;
}
BENCHMARK(BM_PodJobsMemory)
    ->ArgName("pods_per_job")
    ->Arg(1)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond);

// One Job changed: the walk that finds its pods among 50,000.
void BM_PodJobsRefillWalk(benchmark::State& state) {
  const std::vector<Pod> pods = Pods(10);
  PodJobs map;
  for (const Pod& p : pods) map.Set(p.uid, p.ns, p.job, p.job_uid);
  const absl::flat_hash_set<std::string> changed = {pods[12345].ns + "/" + pods[12345].job};
  int found = 0;
  for (auto _ : state) {
    found = 0;
    map.ForEachPodOf(changed,
                     [&](const std::string&, std::string_view, std::string_view) { ++found; });
    benchmark::DoNotOptimize(found);
  }
  state.counters["pods_found"] = found;
}
BENCHMARK(BM_PodJobsRefillWalk)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusched::kube

BENCHMARK_MAIN();
