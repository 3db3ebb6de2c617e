#include "scheduler/kube/gang_objects.h"

#include <iostream>
#include <vector>

#include "gpusched/util/strings.h"
#include "scheduler/codec/gang_codec.h"
#include "scheduler/codec/kube_codec.h"

namespace gpusched::kube {
namespace {

std::string KeyOf(GangOwnerKind kind, std::string_view ns, std::string_view name) {
  return StrCat(static_cast<int>(kind), "/", ns, "/", name);
}

// Object names are DNS subdomains; anything else can never be read, and
// must not be pasted into a request path.
bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

}  // namespace

GangSizes::GangSizes(KubeHttpClient* client, GangSizesOptions options, Metrics* metrics)
    : client_(client), options_(std::move(options)), metrics_(metrics) {}

GangSizes::~GangSizes() { Stop(); }

int64_t GangSizes::Now() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               epoch_)
      .count();
}

void GangSizes::Start(std::function<void()> on_change) {
  if (thread_.joinable()) return;
  on_change_ = std::move(on_change);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void GangSizes::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void GangSizes::Fill(PodRequest& pod) {
  const GangOwner& owner = pod.gang_owner;
  if (owner.kind == GangOwnerKind::kNone) return;
  const std::string key = KeyOf(owner.kind, pod.ns, owner.name);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = entries_.try_emplace(key);
  Entry& e = it->second;
  const int64_t now = Now();
  if (inserted) {
    e.kind = owner.kind;
    e.ns = pod.ns;
    e.name = owner.name;
  }
  e.used_ms = now;
  const KindState& k = kinds_[static_cast<size_t>(owner.kind)];
  if (k.served == Served::kNo) {
    pod.gang.clear();  // the CRD is not installed: the declaration means nothing
    pod.gang_size = 0;
  } else {
    pod.gang = StrCat(codec::GangOwnerApiOf(owner.kind).key_prefix, owner.name);
    pod.gang_size = e.known ? e.size : kGangSizeUnknown;
    pod.gang_size_reason = e.known ? "" : e.error;
    pod.group_topology = e.known ? e.topology : TopologyRequest{};
  }
  const bool ask = k.served == Served::kNo ? k.due_ms <= now : !e.known && e.due_ms <= now;
  if (ask && !e.queued) {
    e.queued = true;
    queue_.push_back(key);
  }
}

std::optional<int64_t> GangSizes::NextDueLocked() const {
  std::optional<int64_t> next;
  for (const auto& [key, e] : entries_) {
    if (!e.queued && (!next || e.due_ms < *next)) next = e.due_ms;
  }
  return next;
}

void GangSizes::Run() {
  while (true) {
    std::vector<std::string> work;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      const std::optional<int64_t> due = NextDueLocked();
      const int64_t wait_ms = due ? std::max<int64_t>(0, *due - Now()) : 1000;
      mu_.AwaitWithTimeout(absl::Condition(&ready),
                           absl::Milliseconds(std::min<int64_t>(wait_ms, 1000)));
      if (stopping_) return;
      const int64_t now = Now();
      for (auto it = entries_.begin(); it != entries_.end();) {
        Entry& e = it->second;
        if (!e.queued && now - e.used_ms > options_.forget_after.count()) {
          entries_.erase(it++);
          continue;
        }
        if (!e.queued && e.due_ms <= now) {
          e.queued = true;
          queue_.push_back(it->first);
        }
        ++it;
      }
      work.assign(queue_.begin(), queue_.end());
      queue_.clear();
    }
    bool changed = false;
    for (const std::string& key : work) changed |= Read(key);
    if (changed && on_change_) on_change_();
  }
}

bool GangSizes::Discover(GangOwnerKind kind) {
  const codec::GangOwnerApi& api = codec::GangOwnerApiOf(kind);
  auto res = client_->Do("GET", StrCat("/apis/", api.group, "/", api.version), "",
                         "application/json", options_.request_timeout);
  Served served = Served::kUnknown;
  if (res.ok() && res->status == 200) served = Served::kYes;
  if (res.ok() && res->status == 404) served = Served::kNo;
  absl::MutexLock lock(&mu_);
  KindState& k = kinds_[static_cast<size_t>(kind)];
  const Served before = k.served;
  if (served == Served::kUnknown) return false;  // transport or server error: ask again later
  k.served = served;
  if (served == Served::kNo) k.due_ms = Now() + options_.discovery_retry.count();
  if (served != before) {
    std::cerr << "gpusched: kube: " << api.group << "/" << api.version << " " << api.kind
              << (served == Served::kYes ? " served: gangs it declares are read from it"
                                         : " not served (CRD not installed): its pods' gang "
                                           "declarations are ignored")
              << "\n";
  }
  return served != before;
}

bool GangSizes::Read(const std::string& key) {
  GangOwnerKind kind;
  std::string ns, name;
  bool discover = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    kind = it->second.kind;
    ns = it->second.ns;
    name = it->second.name;
    const KindState& k = kinds_[static_cast<size_t>(kind)];
    discover = k.served == Served::kUnknown || (k.served == Served::kNo && k.due_ms <= Now());
  }
  bool changed = discover && Discover(kind);
  const codec::GangOwnerApi& api = codec::GangOwnerApiOf(kind);
  std::optional<int32_t> size;
  TopologyRequest topology;
  std::string error;  // why `size` is not known, if a read says
  std::chrono::milliseconds next = options_.retry;
  bool readable = false;
  {
    absl::MutexLock lock(&mu_);
    readable = kinds_[static_cast<size_t>(kind)].served == Served::kYes;
  }
  if (readable && ValidName(ns) && ValidName(name)) {
    auto res = client_->Do("GET",
                           StrCat("/apis/", api.group, "/", api.version, "/namespaces/", ns, "/",
                                  api.plural, "/", name),
                           "", "application/json", options_.request_timeout);
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_kube_gang_object_reads_total",
                    "Reads of objects that declare gang sizes.",
                    {{"kind", std::string(api.kind)},
                     {"result", !res.ok()            ? "error"
                                : res->status == 200 ? "ok"
                                : res->status == 404 ? "not_found"
                                                     : "error"}});
    }
    if (res.ok() && res->status == 200) {
      next = options_.refresh;  // a bad object is read again when it may have been fixed
      auto s = codec::DecodeGangOwner(kind, name, res->body);
      if (s.ok()) {
        size = s->size;
        topology = std::move(s->topology);
      } else {
        error = StrCat(api.kind, " ", name,
                       " declares no valid size: ", FromAbsl(s.status().message()));
        std::cerr << "gpusched: kube: " << api.kind << " " << ns << "/" << name
                  << ": gang size unreadable, its pods wait: " << s.status().message() << "\n";
      }
    } else if (res.ok() && res->status == 404) {
      error = StrCat(api.kind, " ", name, " does not exist (yet) in namespace ", ns);
    } else {
      std::cerr << "gpusched: kube: read " << api.kind << " " << ns << "/" << name << ": "
                << (res.ok()
                        ? StrCat("HTTP ", res->status, " ", codec::DecodeStatus(res->body).message)
                        : std::string(FromAbsl(res.status().message())))
                << "\n";
    }
  } else if (readable) {
    error = StrCat(api.kind, " name '", name, "' is not a valid object name");
  }
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return changed;
  Entry& e = it->second;
  e.queued = false;
  const bool was_known = e.known;
  const int32_t was = e.size;
  const std::string was_error = e.error;
  const bool topology_changed = e.topology != topology;
  e.topology = std::move(topology);
  e.known = size.has_value();
  e.size = size.value_or(kGangSizeUnknown);
  if (e.known || !error.empty()) e.error = std::move(error);  // a transport error keeps it
  e.due_ms = Now() + next.count();
  return changed || e.known != was_known || e.size != was || e.error != was_error ||
         topology_changed;
}

}  // namespace gpusched::kube
