// HistoryStore: the runtime history kept across restarts in a ConfigMap of
// gpusched's own namespace (default gpusched-runtime-history; format in
// codec/history_codec.h), so it outlives the finished pods it was learnt
// from (Job TTLs and the pod garbage collector delete them).
//
//  - Load (at start, before the history is used): reads the ConfigMap;
//    none (404), unreadable (403, transport) or contents that do not decode
//    (hand-edited, truncated, another version) give nothing, with the reason
//    logged. QueueManager::LoadHistory merges what it gives with the
//    finished pods the API still has, each run once.
//  - A background thread writes it at most every `period`, only while
//    `may_write` (the leader, synced) and only when the history changed
//    since the last write: an update with the resourceVersion last seen; a
//    409 (someone else wrote it) reads it again and retries with the new
//    version; a 404 creates it. At most `max_bytes` of history text (the
//    least recently run workloads are left out).
//  - Stop writes once more (the same rules) when the writer thread ran, so
//    the runs recorded since the last round outlive the process. That write
//    gets `stop_timeout` in all, retries included; a failure is logged and
//    Stop returns. A periodic round in flight is given 2 x request_timeout
//    in all, so it delays Stop by no more than that.
//
// Thread-safe. Start spawns the writer thread; Stop (or the destructor)
// joins it and writes the last round. Created by serve's kube wiring.
#ifndef GPUSCHED_KUBE_HISTORY_STORE_H_
#define GPUSCHED_KUBE_HISTORY_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/queue/runtime_estimates.h"

namespace gpusched::kube {

struct HistoryStoreOptions {
  std::string ns = "gpusched-system";
  std::string name = "gpusched-runtime-history";
  std::chrono::milliseconds period{60000};
  size_t max_bytes = 512 * 1024;
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds stop_timeout{3000};  // the write at Stop, in all
};

class HistoryStore {
 public:
  struct Inputs {
    // The history to write and its version (it changes with every run
    // recorded): QueueManager::HistoryToPersist.
    std::function<std::vector<queue::PersistedWorkload>(uint64_t* version)> history;
    std::function<bool()> may_write;
  };
  HistoryStore(KubeHttpClient* client, HistoryStoreOptions options, Inputs inputs,
               Metrics* metrics);
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  // The history the ConfigMap holds (empty if none or unusable; logged).
  std::vector<queue::PersistedWorkload> Load() ABSL_LOCKS_EXCLUDED(mu_);
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the writer thread and, if it ran, writes once more (bounded by
  // stop_timeout). Later calls do nothing.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // One round now (tests): OK if written or nothing to write.
  absl::Status WriteOnce() ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes of history text last written (tests, the log).
  size_t last_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Clock = std::chrono::steady_clock;
  std::string Path() const;
  // One round whose requests all end by `deadline`.
  absl::Status Write(Clock::time_point deadline) ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // The timeout of the next request: request_timeout, cut to what is left
  // before `deadline`; DeadlineExceeded when nothing is.
  absl::StatusOr<std::chrono::milliseconds> Timeout(Clock::time_point deadline) const;
  // GET: 200 (and `rv_` set), 404, or an error.
  absl::StatusOr<int> Fetch(Clock::time_point deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // One create or update of `history`; the HTTP status.
  absl::StatusOr<int> Put(const std::vector<queue::PersistedWorkload>& history,
                          Clock::time_point deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  KubeHttpClient* client_;
  const HistoryStoreOptions options_;
  Inputs inputs_;
  Metrics* metrics_;
  std::thread thread_;

  absl::Mutex write_mu_;                             // one write at a time
  bool fetched_ ABSL_GUARDED_BY(write_mu_) = false;  // exists_ and rv_ known
  bool exists_ ABSL_GUARDED_BY(write_mu_) = false;
  std::string rv_ ABSL_GUARDED_BY(write_mu_);
  bool written_any_ ABSL_GUARDED_BY(write_mu_) = false;
  uint64_t written_version_ ABSL_GUARDED_BY(write_mu_) = 0;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  size_t last_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_HISTORY_STORE_H_
