#include "scheduler/kube/quota_status.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/quota_object_codec.h"

namespace gpusched::kube {
namespace {

std::string StatusPath(const queue::QuotaObjectStatus& s) {
  const codec::QuotaObjectApi& api = codec::QuotaObjectApiOf(queue::QuotaObjectKind::kGpuQuota);
  return StrCat("/apis/", api.group, "/", api.version, "/namespaces/", s.ns, "/", api.plural, "/",
                s.name, "/status");
}

// lastTransitionTime per condition: kept while the condition's status is
// what it was, `now` when it flips or is new.
std::vector<std::string> Since(const queue::QuotaObjectStatus& next, const auto* prev,
                               const std::string& now) {
  std::vector<std::string> since;
  for (const queue::QuotaCondition& c : next.conditions) {
    std::string t = now;
    if (prev != nullptr) {
      for (size_t i = 0; i < prev->status.conditions.size(); ++i) {
        const queue::QuotaCondition& p = prev->status.conditions[i];
        if (p.type == c.type && p.status == c.status && i < prev->since.size()) t = prev->since[i];
      }
    }
    since.push_back(std::move(t));
  }
  return since;
}

}  // namespace

QuotaStatusWriter::QuotaStatusWriter(KubeHttpClient* client, Inputs inputs, Options options,
                                     Metrics* metrics)
    : client_(client),
      in_(std::move(inputs)),
      options_(options),
      metrics_(metrics),
      bucket_(options.qps, options.burst),
      thread_([this] { Loop(); }) {}

QuotaStatusWriter::~QuotaStatusWriter() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

std::string QuotaStatusWriter::Now() const {
  if (in_.now_rfc3339) return in_.now_rfc3339();
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

void QuotaStatusWriter::Loop() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(options_.period))) {
        return;
      }
    }
    Round();
  }
}

void QuotaStatusWriter::RunOnce() { Round(); }

void QuotaStatusWriter::Round() {
  if (!in_.may_write()) return;
  absl::MutexLock l(&round_mu_);
  const std::optional<queue::ResolvedQuotas> resolved = in_.resolved();
  if (!resolved) {
    written_.clear();  // the objects are not the source: nothing to keep current
    return;
  }
  const std::vector<queue::QuotaObjectStatus> statuses =
      queue::QuotaObjectStatuses(*resolved, in_.report());
  std::map<std::string, Written> next;
  int64_t patched = 0, failed = 0;
  const std::string now = Now();
  for (const queue::QuotaObjectStatus& s : statuses) {
    const std::string key = StrCat(s.ns, "/", s.name);
    auto prev = written_.find(key);
    const Written* before = prev == written_.end() ? nullptr : &prev->second;
    if (before != nullptr && before->status == s) {
      next.emplace(key, *before);
      continue;
    }
    {
      absl::MutexLock m(&mu_);
      if (stopping_) return;
    }
    Written w{s, Since(s, before, now)};
    bucket_.Take();
    auto r = client_->Do("PATCH", StatusPath(s), codec::EncodeQuotaObjectStatusPatch(s, w.since),
                         "application/merge-patch+json", std::chrono::seconds(5));
    if (r.ok() && r->status == 200) {
      next.emplace(key, std::move(w));
      ++patched;
    } else {
      if (before != nullptr) {
        Written stale = *before;
        stale.status.observed_generation = -1;  // differs from any status: retried next round
        next.emplace(key, std::move(stale));
      }
      ++failed;
    }
  }
  written_ = std::move(next);  // deleted objects are forgotten
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_quota_status_patches_total", "GPUQuota status updates written.",
                  {{"result", "ok"}}, patched);
    metrics_->Inc("gpusched_quota_status_patches_total", "GPUQuota status updates written.",
                  {{"result", "error"}}, failed);
  }
}

}  // namespace gpusched::kube
