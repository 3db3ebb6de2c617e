#include "scheduler/kube/queue_status.h"

#include <algorithm>
#include <cstdlib>

#include "absl/time/clock.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/queue_codec.h"
#include "scheduler/kube/kube_writer.h"

namespace gpusched::kube {
namespace {

constexpr size_t kMaxReasonBytes = 512;

}  // namespace

QueueStatusPublisher::QueueStatusPublisher(
    KubeHttpClient* client, std::function<std::vector<queue::QueuedPod>(int32_t)> positions,
    std::function<bool()> may_write, Options options, Metrics* metrics)
    : client_(client),
      positions_(std::move(positions)),
      may_write_(std::move(may_write)),
      options_(options),
      metrics_(metrics),
      bucket_(options.qps, options.burst),
      thread_([this] { Loop(); }) {}

QueueStatusPublisher::~QueueStatusPublisher() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

std::pair<std::string, std::string> QueueStatusPublisher::Texts(const queue::QueuedPod& pod,
                                                                int32_t exact_up_to) {
  if (pod.position <= exact_up_to) {
    std::string reason =
        pod.reason.empty() ? "admissible now: waiting for kube-scheduler to place it" : pod.reason;
    if (reason.size() > kMaxReasonBytes) reason.resize(kMaxReasonBytes);
    return {StrCat(pod.position), std::move(reason)};
  }
  const int32_t bucket = (pod.position - 1) / 100 * 100 + 1;
  return {StrCat(bucket, "+"), StrCat("gpusched: namespace ", pod.ns, ": more than ", bucket - 1,
                                      " earlier units in the queue go first")};
}

bool QueueStatusPublisher::StartMoved(int64_t written, int64_t estimate, int64_t now_s) {
  if ((written < 0) != (estimate < 0)) return true;
  if (written < 0) return false;
  const int64_t margin = std::max<int64_t>(300, (std::max(estimate, now_s) - now_s) / 10);
  return std::abs(estimate - written) > margin;
}

void QueueStatusPublisher::Loop() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(options_.period))) {
        return;
      }
    }
    if (may_write_()) Round();
  }
}

void QueueStatusPublisher::RunOnce() { Round(); }

void QueueStatusPublisher::Round() {
  absl::MutexLock l(&round_mu_);
  std::vector<queue::QueuedPod> pods = positions_(options_.explained);
  absl::flat_hash_map<std::string, Written> next;
  int64_t patched = 0, failed = 0;
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  for (const queue::QueuedPod& pod : pods) {
    Written w{Texts(pod, options_.exact_up_to), pod.estimated_start_unix};
    auto it = written_.find(pod.uid);
    if (it != written_.end() && it->second.texts == w.texts &&
        !StartMoved(it->second.start, w.start, now_s)) {
      next.emplace(pod.uid, it->second);
      continue;
    }
    {
      absl::MutexLock s(&mu_);
      if (stopping_) return;
    }
    bucket_.Take();
    const std::string start = w.start >= 0 ? codec::FormatRfc3339(w.start) : "";
    auto r = client_->Do("PATCH", PodPath(pod.ns, pod.name),
                         codec::EncodeQueueStatusPatch(w.texts.first, w.texts.second, start),
                         "application/merge-patch+json", std::chrono::seconds(5));
    if (r.ok() && r->status == 200) {
      next.emplace(pod.uid, std::move(w));
      ++patched;
    } else {
      ++failed;  // retried next round (not recorded as written)
    }
  }
  written_ = std::move(next);  // pods no longer pending are forgotten
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_queue_status_patches_total", "Pod queue-position annotations written.",
                  {{"result", "ok"}}, patched);
    metrics_->Inc("gpusched_queue_status_patches_total", "Pod queue-position annotations written.",
                  {{"result", "error"}}, failed);
  }
}

}  // namespace gpusched::kube
