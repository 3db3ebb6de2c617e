#include "scheduler/kube/leader_elector.h"

#include <iostream>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpusched/util/strings.h"

namespace gpusched::kube {
namespace {

std::string MicroTimeNow() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
}

int64_t Seconds(std::chrono::milliseconds d) {
  return std::max<int64_t>(1, (d.count() + 999) / 1000);
}

bool SameRecord(const codec::LeaseRecord& a, const codec::LeaseRecord& b) {
  return a.holder == b.holder && a.renew_time == b.renew_time &&
         a.resource_version == b.resource_version && a.transitions == b.transitions;
}

}  // namespace

LeaderElector::LeaderElector(KubeHttpClient* client, LeaderOptions options, Metrics* metrics,
                             std::function<void(bool)> on_change)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      on_change_(std::move(on_change)) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  if (metrics_ != nullptr) {
    metrics_->AddCollector([this](GaugeWriter& w) {
      w.Gauge("gpusched_leader", "1 if this replica is the leader.", {}, IsLeader() ? 1 : 0);
    });
  }
  thread_ = std::thread([this] { Loop(); });
}

void LeaderElector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool LeaderElector::IsLeader() const {
  absl::MutexLock lock(&mu_);
  return leader_ && std::chrono::steady_clock::now() - renewed_ < options_.renew_deadline;
}

std::string LeaderElector::LeasePath(bool item) const {
  std::string p =
      StrCat("/apis/coordination.k8s.io/v1/namespaces/", options_.lease_namespace, "/leases");
  if (item) StrAppend(&p, "/", options_.lease_name);
  return p;
}

bool LeaderElector::TryAcquireOrRenew() {
  const auto timeout = std::max(std::chrono::milliseconds(200), options_.retry_period);
  const auto now = std::chrono::steady_clock::now();
  auto got = client_->Do("GET", LeasePath(true), "", "", timeout);
  if (!got.ok()) return false;
  codec::LeaseRecord next;
  next.holder = options_.identity;
  next.duration_seconds = Seconds(options_.lease_duration);
  next.renew_time = MicroTimeNow();
  if (got->status == 404) {
    next.acquire_time = next.renew_time;
    auto r = client_->Do("POST", LeasePath(false),
                         codec::EncodeLease(options_.lease_namespace, options_.lease_name, next),
                         "application/json", timeout);
    if (!r.ok() || (r->status != 200 && r->status != 201)) return false;
    auto created = codec::DecodeLease(r->body);
    absl::MutexLock lock(&mu_);
    observed_ = created.ok() ? *created : next;
    observed_at_ = now;
    return true;
  }
  if (got->status != 200) return false;
  auto cur = codec::DecodeLease(got->body);
  if (!cur.ok()) return false;
  {
    absl::MutexLock lock(&mu_);
    if (!SameRecord(*cur, observed_)) {
      observed_ = *cur;
      observed_at_ = now;
    }
    const bool mine = cur->holder == options_.identity;
    const auto duration = std::chrono::seconds(std::max<int64_t>(1, cur->duration_seconds));
    if (!cur->holder.empty() && !mine && now - observed_at_ < duration) return false;
    next.acquire_time = mine ? cur->acquire_time : next.renew_time;
    next.transitions = mine ? cur->transitions : cur->transitions + 1;
    next.resource_version = cur->resource_version;
  }
  auto r = client_->Do("PUT", LeasePath(true),
                       codec::EncodeLease(options_.lease_namespace, options_.lease_name, next),
                       "application/json", timeout);
  if (!r.ok() || r->status != 200) return false;  // 409: someone wrote first
  auto updated = codec::DecodeLease(r->body);
  absl::MutexLock lock(&mu_);
  observed_ = updated.ok() ? *updated : next;
  observed_at_ = now;
  return true;
}

void LeaderElector::Loop() {
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    const bool held = TryAcquireOrRenew();
    bool changed = false, now_leader = false;
    {
      absl::MutexLock lock(&mu_);
      if (held) {
        renewed_ = start;
        if (!leader_) changed = true;
        leader_ = true;
      } else if (leader_ &&
                 std::chrono::steady_clock::now() - renewed_ >= options_.renew_deadline) {
        leader_ = false;
        changed = true;
      }
      now_leader = leader_;
    }
    if (changed) {
      std::cerr << "gpusched: " << options_.identity
                << (now_leader ? " became the leader\n" : " lost the lease\n");
      if (metrics_ != nullptr) {
        metrics_->Inc("gpusched_leader_transitions_total", "Leadership changes of this replica.",
                      {{"to", now_leader ? "leader" : "follower"}});
      }
      if (on_change_) on_change_(now_leader);
    }
    absl::MutexLock lock(&mu_);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop),
                             absl::Milliseconds(options_.retry_period.count()))) {
      break;
    }
  }
  Release();
}

void LeaderElector::Release() {
  bool was;
  codec::LeaseRecord rec;
  {
    absl::MutexLock lock(&mu_);
    was = leader_;
    leader_ = false;
    rec = observed_;
  }
  if (!was) return;
  if (on_change_) on_change_(false);
  if (rec.holder != options_.identity) return;
  rec.holder.clear();
  rec.duration_seconds = 1;
  rec.renew_time = MicroTimeNow();
  auto r = client_->Do("PUT", LeasePath(true),
                       codec::EncodeLease(options_.lease_namespace, options_.lease_name, rec),
                       "application/json", std::chrono::seconds(2));
  std::cerr << "gpusched: " << options_.identity << " released the lease"
            << (r.ok() && r->status == 200 ? "\n" : " (write failed; it will expire)\n");
}

}  // namespace gpusched::kube
