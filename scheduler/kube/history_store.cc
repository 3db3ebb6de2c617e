#include "scheduler/kube/history_store.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "gpusched/util/strings.h"
#include "scheduler/codec/history_codec.h"
#include "scheduler/codec/kube_codec.h"

namespace gpusched::kube {

HistoryStore::HistoryStore(KubeHttpClient* client, HistoryStoreOptions options, Inputs inputs,
                           Metrics* metrics)
    : client_(client),
      options_(std::move(options)),
      inputs_(std::move(inputs)),
      metrics_(metrics) {}

HistoryStore::~HistoryStore() { Stop(); }

std::string HistoryStore::Path() const {
  return StrCat("/api/v1/namespaces/", options_.ns, "/configmaps/", options_.name);
}

size_t HistoryStore::last_bytes() const {
  absl::MutexLock l(&mu_);
  return last_bytes_;
}

std::vector<queue::PersistedWorkload> HistoryStore::Load() {
  const std::string what = StrCat("ConfigMap ", options_.ns, "/", options_.name);
  auto res = client_->Do("GET", Path(), "", "application/json", options_.request_timeout);
  if (!res.ok() || res->status != 200) {
    std::cerr << "gpusched: runtime history: " << what << " not read ("
              << (res.ok()
                      ? StrCat("HTTP ", res->status, " ", codec::DecodeStatus(res->body).message)
                      : std::string(FromAbsl(res.status().message())))
              << "): history starts from the finished pods the API still has\n";
    return {};
  }
  auto cm = codec::DecodeHistoryConfigMap(res->body);
  {
    absl::MutexLock w(&write_mu_);
    fetched_ = true;
    exists_ = true;
    rv_ = codec::ConfigMapResourceVersion(res->body);
  }
  if (!cm.ok()) {
    std::cerr << "gpusched: runtime history: " << what << " ignored: " << cm.status().message()
              << " (it is rewritten from the history learnt from now on)\n";
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_runtime_history_load_errors_total",
                    "Runtime history ConfigMaps ignored because their contents did not decode.",
                    {});
    }
    return {};
  }
  size_t runs = 0;
  for (const auto& w : cm->history) runs += w.runs.size();
  std::cerr << "gpusched: runtime history: " << runs << " runs of " << cm->history.size()
            << " workloads read from " << what << "\n";
  return std::move(cm->history);
}

void HistoryStore::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock l(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(options_.period))) {
          return;
        }
      }
      // A round in flight when Stop comes delays it by at most this.
      absl::Status st = Write(Clock::now() + 2 * options_.request_timeout);
      if (!st.ok()) {
        std::cerr << "gpusched: runtime history: write failed, retried in "
                  << options_.period.count() / 1000 << "s: " << st.message() << "\n";
      }
    }
  });
}

void HistoryStore::Stop() {
  bool ran = false;
  {
    absl::MutexLock l(&mu_);
    ran = !stopping_ && thread_.joinable();
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (!ran) return;
  absl::Status st = Write(Clock::now() + options_.stop_timeout);
  if (!st.ok()) {
    std::cerr << "gpusched: runtime history: the write at stop failed (" << st.message()
              << "): runs recorded since the last write are known again only from their "
                 "finished pods\n";
  }
}

absl::StatusOr<std::chrono::milliseconds> HistoryStore::Timeout(Clock::time_point deadline) const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return absl::DeadlineExceededError("out of time");
  return std::min(left, options_.request_timeout);
}

absl::StatusOr<int> HistoryStore::Fetch(Clock::time_point deadline) {
  auto timeout = Timeout(deadline);
  if (!timeout.ok()) return timeout.status();
  auto res = client_->Do("GET", Path(), "", "application/json", *timeout);
  if (!res.ok()) return res.status();
  if (res->status != 200 && res->status != 404) {
    return absl::UnavailableError(
        StrCat("read: HTTP ", res->status, " ", codec::DecodeStatus(res->body).message));
  }
  fetched_ = true;
  exists_ = res->status == 200;
  rv_ = exists_ ? codec::ConfigMapResourceVersion(res->body) : "";
  return res->status;
}

absl::StatusOr<int> HistoryStore::Put(const std::vector<queue::PersistedWorkload>& history,
                                      Clock::time_point deadline) {
  auto timeout = Timeout(deadline);
  if (!timeout.ok()) return timeout.status();
  codec::HistoryEncoding enc = codec::EncodeHistoryConfigMap(
      options_.ns, options_.name, exists_ ? rv_ : "", history, options_.max_bytes);
  const std::string target =
      exists_ ? Path() : StrCat("/api/v1/namespaces/", options_.ns, "/configmaps");
  auto res = client_->Do(exists_ ? "PUT" : "POST", target, enc.body, "application/json", *timeout);
  if (!res.ok()) return res.status();
  if (res->status == 200 || res->status == 201) {
    exists_ = true;
    rv_ = codec::ConfigMapResourceVersion(res->body);
    absl::MutexLock l(&mu_);
    last_bytes_ = enc.history_bytes;
  }
  return res->status;
}

absl::Status HistoryStore::WriteOnce() {
  // Three rounds of a read and a write, each request its own timeout.
  return Write(Clock::now() + 6 * options_.request_timeout);
}

absl::Status HistoryStore::Write(Clock::time_point deadline) {
  if (inputs_.may_write && !inputs_.may_write()) return absl::OkStatus();
  uint64_t version = 0;
  std::vector<queue::PersistedWorkload> history = inputs_.history(&version);
  absl::MutexLock w(&write_mu_);
  if (written_any_ ? version == written_version_ : history.empty()) return absl::OkStatus();
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (!fetched_) {
      auto f = Fetch(deadline);
      if (!f.ok()) return f.status();
    }
    auto st = Put(history, deadline);
    if (!st.ok()) return st.status();
    if (*st == 200 || *st == 201) {
      written_any_ = true;
      written_version_ = version;
      if (metrics_ != nullptr) {
        metrics_->Inc("gpusched_runtime_history_writes_total",
                      "Writes of the runtime history ConfigMap.", {});
      }
      return absl::OkStatus();
    }
    // 409: written by someone else since (or created meanwhile); 404:
    // deleted. Read it again and retry with what the API has now.
    if (*st != 409 && *st != 404) return absl::UnavailableError(StrCat("HTTP ", *st));
    fetched_ = false;
  }
  return absl::AbortedError("the ConfigMap kept changing (3 conflicts in a row)");
}

}  // namespace gpusched::kube
