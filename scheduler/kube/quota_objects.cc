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
    : client_(client), options_(std::move(options)), metrics_(metrics) {}

QuotaObjectWatcher::~QuotaObjectWatcher() { Stop(); }

QuotaObjectWatcher::KindState& QuotaObjectWatcher::State(QuotaObjectKind kind) {
  return kinds_[kind == QuotaObjectKind::kGpuQuota ? 0 : 1];
}

void QuotaObjectWatcher::Start(OnChange on_change) {
  if (threads_[0].joinable()) return;
  on_change_ = std::move(on_change);
  {
    absl::MutexLock l(&mu_);
    stopping_ = false;
  }
  for (size_t i = 0; i < kKinds.size(); ++i) {
    threads_[i] = std::thread([this, kind = kKinds[i]] { Run(kind); });
  }
}

void QuotaObjectWatcher::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    for (KindState& k : kinds_) k.canceller.Cancel();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
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

bool QuotaObjectWatcher::Sleep(std::chrono::milliseconds d) {
  absl::MutexLock l(&mu_);
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(d));
}

void QuotaObjectWatcher::Run(QuotaObjectKind kind) {
  auto backoff = options_.backoff_initial;
  auto fail = [&]() {
    const bool go_on = Sleep(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
    return go_on;
  };
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
    }
    const Served served = Discover(kind);
    if (served == Served::kUnknown) {
      if (!fail()) return;
      continue;
    }
    SetServed(kind, served);
    Publish();
    if (served == Served::kNo) {
      if (!Sleep(options_.discovery_retry)) return;
      continue;
    }
    std::string rv;
    if (!List(kind, &rv)) {
      if (!fail()) return;
      continue;
    }
    Publish();
    backoff = options_.backoff_initial;
    while (true) {
      const int code = Watch(kind, &rv);
      {
        absl::MutexLock l(&mu_);
        if (stopping_) return;
      }
      if (code == 404 || code == 410) break;  // CRD gone: discover; expired: relist
      if (code != 0 && !fail()) return;
      if (code == 0) backoff = options_.backoff_initial;
    }
  }
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

bool QuotaObjectWatcher::List(QuotaObjectKind kind, std::string* rv) {
  const codec::QuotaObjectApi& api = codec::QuotaObjectApiOf(kind);
  std::vector<queue::QuotaObject> items;
  std::string token;
  do {
    std::string target = StrCat(GroupPath(kind), "/", api.plural, "?limit=", options_.page_size);
    if (!token.empty()) StrAppend(&target, "&continue=", token);
    auto res = client_->Do("GET", target, "", "application/json", options_.request_timeout);
    if (!res.ok() || res->status != 200) {
      std::cerr << "gpusched: quotas: list " << api.plural << ": "
                << (res.ok()
                        ? StrCat("HTTP ", res->status, " ", codec::DecodeStatus(res->body).message)
                        : std::string(res.status().message()))
                << "\n";
      return false;
    }
    auto page = codec::DecodeQuotaObjectList(kind, res->body);
    if (!page.ok()) {
      std::cerr << "gpusched: quotas: list " << api.plural << ": " << page.status().message()
                << "\n";
      return false;
    }
    for (auto& o : page->items) items.push_back(std::move(o));
    token = page->continue_token;
    *rv = page->resource_version;
  } while (!token.empty());
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
  return true;
}

int QuotaObjectWatcher::Watch(QuotaObjectKind kind, std::string* rv) {
  const codec::QuotaObjectApi& api = codec::QuotaObjectApiOf(kind);
  const std::string target = StrCat(GroupPath(kind), "/", api.plural,
                                    "?watch=1&allowWatchBookmarks=true&resourceVersion=", *rv,
                                    "&timeoutSeconds=", options_.watch_timeout_seconds);
  int failure = 0;
  std::string error;
  auto on_line = [&](std::string& line) {
    auto ev = codec::DecodeQuotaObjectEvent(kind, line);
    if (!ev.ok()) {
      error = std::string(ev.status().message());
      return false;
    }
    if (ev->type == codec::WatchEvent::Type::kError) {
      failure = ev->status.code == 410 ? 410 : -1;
      error = StrCat("HTTP ", ev->status.code, " ", ev->status.message);
      return false;
    }
    if (!ev->resource_version.empty()) *rv = ev->resource_version;
    if (ev->type == codec::WatchEvent::Type::kBookmark) return true;
    {
      absl::MutexLock l(&mu_);
      KindState& k = State(kind);
      const std::string key = KeyOf(ev->object);
      auto prev = k.objects.find(key);
      if (ev->type == codec::WatchEvent::Type::kDeleted) {
        if (prev != k.objects.end()) k.objects.erase(prev);
      } else {
        queue::KeepLastValid(prev == k.objects.end() ? nullptr : &prev->second, ev->object);
        k.objects[key] = std::move(ev->object);
      }
    }
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_kube_watch_events_total", "Watch events applied.",
                    {{"resource", std::string(api.plural)}});
    }
    Publish();
    return true;
  };
  std::string error_body;
  StreamCanceller* canceller;
  {
    absl::MutexLock l(&mu_);
    canceller = &State(kind).canceller;
  }
  auto status = client_->Stream(target, std::chrono::seconds(options_.watch_timeout_seconds + 30),
                                on_line, &error_body, canceller);
  if (!status.ok()) {
    if (status.status().code() == absl::StatusCode::kCancelled) return 0;
    std::cerr << "gpusched: quotas: watch " << api.plural << ": " << status.status().message()
              << "\n";
    return -1;
  }
  if (*status == 404 || *status == 410) return *status;
  if (*status != 200) {
    std::cerr << "gpusched: quotas: watch " << api.plural << ": HTTP " << *status << " "
              << codec::DecodeStatus(error_body).message << "\n";
    return -1;
  }
  if (failure == 410) return 410;
  if (!error.empty()) {
    std::cerr << "gpusched: quotas: watch " << api.plural << ": " << error << "\n";
    return -1;
  }
  return 0;
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
