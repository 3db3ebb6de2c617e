#include "scheduler/kube/quota_objects.h"

#include <iostream>
#include <vector>

#include "gpusched/util/strings.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/codec/quota_object_codec.h"

namespace gpusched::kube {
namespace {

using queue::QuotaObjectKind;

constexpr std::array<QuotaObjectKind, 2> kKinds = {QuotaObjectKind::kGpuQuota,
                                                   QuotaObjectKind::kElasticQuota};

std::string GroupPath(QuotaObjectKind kind) {
  const codec::QuotaObjectApi& api = codec::QuotaObjectApiOf(kind);
  return StrCat("/apis/", api.group, "/", api.version);
}

std::string KeyOf(const queue::QuotaObject& o) { return StrCat(o.ns, "/", o.name); }

const char* StateName(queue::QuotaObjectState s) {
  switch (s) {
    case queue::QuotaObjectState::kActive:
      return "enforced";
    case queue::QuotaObjectState::kDuplicate:
      return "duplicate";
    case queue::QuotaObjectState::kInvalid:
      return "invalid";
    case queue::QuotaObjectState::kShadowed:
      return "shadowed";
    case queue::QuotaObjectState::kNoGpuQuota:
      return "no GPU quota";
  }
  return "";
}

// One log line per object whose verdict changed between `before` and `after`.
void LogVerdicts(const std::optional<queue::ResolvedQuotas>& before,
                 const std::optional<queue::ResolvedQuotas>& after) {
  std::map<std::string, std::string> was;
  if (before) {
    for (const auto& v : before->verdicts) {
      was[StrCat(codec::QuotaObjectApiOf(v.kind).kind, " ", v.ns, "/", v.name)] = v.message;
    }
  }
  if (!after) return;
  for (const auto& v : after->verdicts) {
    const std::string key = StrCat(codec::QuotaObjectApiOf(v.kind).kind, " ", v.ns, "/", v.name);
    auto it = was.find(key);
    if (it != was.end() && it->second == v.message) continue;
    std::cerr << "gpusched: quotas: " << key << ": " << StateName(v.state) << ": " << v.message
              << "\n";
  }
}

}  // namespace

QuotaObjectWatcher::QuotaObjectWatcher(KubeHttpClient* client, QuotaObjectsOptions options,
                                       Metrics* metrics)
    : client_(client), options_(std::move(options)), metrics_(metrics) {
  for (size_t i = 0; i < kKinds.size(); ++i) reflectors_[i] = NewReflector(client, kKinds[i]);
}

QuotaObjectWatcher::~QuotaObjectWatcher() { Stop(); }

std::unique_ptr<Reflector<queue::QuotaObject>> QuotaObjectWatcher::NewReflector(
    KubeHttpClient* client, QuotaObjectKind kind) {
  using Page = ReflectorPage<queue::QuotaObject>;
  using Event = ReflectorEvent<queue::QuotaObject>;
  const codec::QuotaObjectApi& api = codec::QuotaObjectApiOf(kind);
  Reflector<queue::QuotaObject>::Hooks h;
  h.gate = [this, kind] { return Gate(kind); };
  h.decode_page = [kind](std::string_view body) -> absl::StatusOr<Page> {
    auto page = codec::DecodeQuotaObjectList(kind, body);
    if (!page.ok()) return page.status();
    return Page{std::move(page->items), std::move(page->continue_token),
                std::move(page->resource_version)};
  };
  h.decode_event = [kind](std::string_view line) -> absl::StatusOr<Event> {
    auto ev = codec::DecodeQuotaObjectEvent(kind, line);
    if (!ev.ok()) return ev.status();
    return Event{ev->type, std::move(ev->resource_version), std::move(ev->object),
                 std::move(ev->status)};
  };
  h.replace = [this, kind](std::vector<queue::QuotaObject> items) {
    Replace(kind, std::move(items));
  };
  h.apply = [this, kind](codec::WatchEvent::Type type, queue::QuotaObject object) {
    Apply(kind, type, std::move(object));
  };
  return std::make_unique<Reflector<queue::QuotaObject>>(
      client,
      ReflectorResource{StrCat(GroupPath(kind), "/", api.plural), std::string(api.plural),
                        "gpusched: quotas: "},
      options_, metrics_, std::move(h));
}

QuotaObjectWatcher::KindState& QuotaObjectWatcher::State(QuotaObjectKind kind) {
  return kinds_[kind == QuotaObjectKind::kGpuQuota ? 0 : 1];
}

void QuotaObjectWatcher::Start(OnChange on_change) {
  if (started_) return;
  started_ = true;
  on_change_ = std::move(on_change);
  for (auto& r : reflectors_) r->Start();
}

void QuotaObjectWatcher::Stop() {
  for (auto& r : reflectors_) r->Stop();
}

bool QuotaObjectWatcher::settled() const {
  absl::MutexLock l(&mu_);
  // Listed is not enough: until Publish returns, Current() is not yet
  // what the lists say (a reader right after settled() saw nullopt).
  if (!applied_) return false;
  for (const KindState& k : kinds_) {
    if (k.served == Served::kUnknown || (k.served == Served::kYes && !k.listed)) return false;
  }
  return true;
}

std::optional<queue::ResolvedQuotas> QuotaObjectWatcher::Current() const {
  // Waits out a publication in progress: once the queue has applied a
  // resolution (inside on_change), no reader gets an older one.
  absl::MutexLock p(&publish_mu_);
  absl::MutexLock l(&mu_);
  return current_;
}

ReflectorGate QuotaObjectWatcher::Gate(QuotaObjectKind kind) {
  const Served served = Discover(kind);
  if (served == Served::kUnknown) return {ReflectorGate::Next::kBackoff};
  SetServed(kind, served);
  Publish();
  if (served == Served::kNo) return {ReflectorGate::Next::kWait, options_.discovery_retry};
  return {ReflectorGate::Next::kList};
}

QuotaObjectWatcher::Served QuotaObjectWatcher::Discover(QuotaObjectKind kind) {
  auto res = client_->Do("GET", GroupPath(kind), "", "application/json", options_.request_timeout);
  if (res.ok() && res->status == 200) return Served::kYes;
  if (res.ok() && res->status == 404) return Served::kNo;
  std::cerr << "gpusched: quotas: discovery of " << GroupPath(kind) << ": "
            << (res.ok() ? StrCat("HTTP ", res->status) : std::string(res.status().message()))
            << "; retrying\n";
  return Served::kUnknown;
}

void QuotaObjectWatcher::SetServed(QuotaObjectKind kind, Served served) {
  absl::MutexLock l(&mu_);
  KindState& k = State(kind);
  if (k.served == served) return;
  const codec::QuotaObjectApi& api = codec::QuotaObjectApiOf(kind);
  std::cerr << "gpusched: quotas: " << api.group << "/" << api.version << " " << api.kind
            << (served == Served::kYes ? " served: its objects are read"
                                       : " not served (CRD not installed)")
            << "\n";
  k.served = served;
  if (served == Served::kNo) {
    k.objects.clear();
    k.listed = false;
  }
}

void QuotaObjectWatcher::Replace(QuotaObjectKind kind, std::vector<queue::QuotaObject> items) {
  {
    absl::MutexLock l(&mu_);
    KindState& k = State(kind);
    std::map<std::string, queue::QuotaObject> next;
    for (auto& o : items) {
      auto prev = k.objects.find(KeyOf(o));
      queue::KeepLastValid(prev == k.objects.end() ? nullptr : &prev->second, o);
      next[KeyOf(o)] = std::move(o);
    }
    k.objects = std::move(next);
    k.listed = true;
  }
  Publish();
}

void QuotaObjectWatcher::Apply(QuotaObjectKind kind, codec::WatchEvent::Type type,
                               queue::QuotaObject object) {
  {
    absl::MutexLock l(&mu_);
    KindState& k = State(kind);
    const std::string key = KeyOf(object);
    auto prev = k.objects.find(key);
    if (type == codec::WatchEvent::Type::kDeleted) {
      if (prev != k.objects.end()) k.objects.erase(prev);
    } else {
      queue::KeepLastValid(prev == k.objects.end() ? nullptr : &prev->second, object);
      k.objects[key] = std::move(object);
    }
  }
  Publish();
}

void QuotaObjectWatcher::Publish() {
  absl::MutexLock p(&publish_mu_);
  std::optional<queue::ResolvedQuotas> next;
  {
    absl::MutexLock l(&mu_);
    for (const KindState& k : kinds_) {
      if (k.served == Served::kUnknown || (k.served == Served::kYes && !k.listed)) return;
    }
    if (kinds_[0].served == Served::kYes) {
      std::vector<queue::QuotaObject> all;
      for (const KindState& k : kinds_) {
        for (const auto& [key, o] : k.objects) all.push_back(o);
      }
      next = queue::ResolveQuotaObjects(std::move(all));
    }
  }
  if (published_ && next == last_) return;
  LogVerdicts(last_, next);
  if (on_change_) on_change_(next);
  published_ = true;
  last_ = next;
  absl::MutexLock l(&mu_);
  current_ = std::move(next);  // after on_change: Current() is what is applied
  applied_ = true;
}

}  // namespace gpusched::kube
