#include "scheduler/kube/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "gpusched/util/strings.h"

namespace gpusched::kube {
namespace {

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string DefaultIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return Env("POD_NAME", StrCat(host, "_", getpid()));
}

}  // namespace

std::set<std::string> KubeValuedFlags() {
  return {"kubeconfig",      "context",        "kube-qps",       "kube-burst",   "lease-name",
          "lease-namespace", "lease-duration", "renew-deadline", "retry-period", "identity"};
}

std::set<std::string> KubeSwitchFlags() { return {"kube", "leader-elect"}; }

bool KubeRequested(const std::function<bool(const std::string&)>& has) {
  return has("kube") || has("kubeconfig");
}

absl::StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  std::string num = text;
  double scale = 1000;
  auto strip = [&](const std::string& suffix, double s) {
    if (num.size() > suffix.size() &&
        num.compare(num.size() - suffix.size(), suffix.size(), suffix) == 0) {
      num.resize(num.size() - suffix.size());
      scale = s;
      return true;
    }
    return false;
  };
  if (!strip("ms", 1) && !strip("s", 1000) && !strip("m", 60000)) strip("h", 3600000);
  double v = 0;
  if (!absl::SimpleAtod(num, &v) || v < 0) {
    return absl::InvalidArgumentError(StrCat("bad duration '", text, "' (e.g. 15s, 500ms, 2m)"));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(v * scale));
}

absl::StatusOr<KubeOptions> KubeOptionsFromFlags(
    const std::function<bool(const std::string&)>& has,
    const std::function<std::string(const std::string&)>& get) {
  KubeOptions o;
  o.in_cluster = has("kube");
  o.kubeconfig = get("kubeconfig");
  o.context = get("context");
  if (o.in_cluster && !o.kubeconfig.empty()) {
    return absl::InvalidArgumentError("--kube and --kubeconfig exclude each other");
  }
  if (has("kube-qps") && !absl::SimpleAtod(get("kube-qps"), &o.client.qps)) {
    return absl::InvalidArgumentError("--kube-qps: not a number");
  }
  if (has("kube-burst") && !absl::SimpleAtoi(get("kube-burst"), &o.client.burst)) {
    return absl::InvalidArgumentError("--kube-burst: not a number");
  }
  o.leader_elect = has("leader-elect");
  o.leader.identity = has("identity") ? get("identity") : DefaultIdentity();
  o.leader.lease_name = has("lease-name") ? get("lease-name") : o.leader.lease_name;
  o.leader.lease_namespace = has("lease-namespace")
                                 ? get("lease-namespace")
                                 : Env("POD_NAMESPACE", o.leader.lease_namespace);
  struct D {
    const char* flag;
    std::chrono::milliseconds* out;
  };
  for (D d :
       {D{"lease-duration", &o.leader.lease_duration},
        D{"renew-deadline", &o.leader.renew_deadline}, D{"retry-period", &o.leader.retry_period}}) {
    if (!has(d.flag)) continue;
    auto v = ParseDuration(get(d.flag));
    if (!v.ok())
      return absl::InvalidArgumentError(StrCat("--", d.flag, ": ", FromAbsl(v.status().message())));
    *d.out = *v;
  }
  if (!has("renew-deadline") && has("lease-duration")) {
    o.leader.renew_deadline = o.leader.lease_duration * 2 / 3;
  }
  if (!has("retry-period") && has("lease-duration")) {
    o.leader.retry_period = std::max(std::chrono::milliseconds(100), o.leader.lease_duration / 7);
  }
  if (o.leader.renew_deadline >= o.leader.lease_duration ||
      o.leader.retry_period >= o.leader.renew_deadline) {
    return absl::InvalidArgumentError(
        "leader election needs retry-period < renew-deadline < lease-duration");
  }
  return o;
}

absl::StatusOr<std::unique_ptr<KubeHttpClient>> MakeClient(const KubeOptions& options) {
  absl::StatusOr<KubeConfig> cfg =
      options.in_cluster ? InClusterConfig() : LoadKubeconfig(options.kubeconfig, options.context);
  if (!cfg.ok()) return cfg.status();
  return KubeHttpClient::Create(*std::move(cfg), options.client);
}

std::string WaitingEventType(const FilterOutcome& out) {
  return out.failed.empty() && !out.unresolvable.empty() ? "Warning" : "Normal";
}

std::string WaitingEventMessage(const ExtenderArgs& args, const FilterOutcome& out) {
  constexpr size_t kMaxBytes = 1024;  // what Kubernetes clients keep of a message
  constexpr std::string_view kPrefix = "gpusched: ";
  // Distinct reasons with their node counts, in order of first appearance.
  // Past kMaxReasons distinct ones, the rest only count as "other".
  constexpr size_t kMaxReasons = 32;
  std::vector<std::pair<std::string_view, int>> reasons;
  int other = 0;
  auto count = [&](const std::vector<FilterOutcome::Failure>& failures) {
    for (const FilterOutcome::Failure& failure : failures) {
      const std::string_view reason = out.reason(failure);
      auto it = std::find_if(reasons.begin(), reasons.end(),
                             [&r = reason](const auto& e) { return e.first == r; });
      if (it != reasons.end()) {
        ++it->second;
      } else if (reasons.size() < kMaxReasons) {
        reasons.emplace_back(reason, 1);
      } else {
        ++other;
      }
    }
  };
  count(out.failed);
  count(out.unresolvable);
  const size_t n = args.node_names.size();
  std::string msg;
  if (reasons.size() == 1 && out.unresolvable.empty() && out.failed.size() == n) {
    msg = std::string(reasons[0].first);
  } else {
    std::stable_sort(reasons.begin(), reasons.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    msg = StrCat(kPrefix, "0 of ", n, " nodes fit");
    const char* sep = ": ";
    for (const auto& [reason, nodes] : reasons) {
      std::string_view r = reason;
      if (r.substr(0, kPrefix.size()) == kPrefix) r.remove_prefix(kPrefix.size());
      StrAppend(&msg, sep, r, " (", nodes, nodes == 1 ? " node)" : " nodes)");
      sep = "; ";
      if (msg.size() > kMaxBytes) break;
    }
    if (other > 0) StrAppend(&msg, "; other reasons (", other, other == 1 ? " node)" : " nodes)");
  }
  if (msg.size() > kMaxBytes) {
    msg.resize(kMaxBytes - 3);
    msg += "...";
  }
  return msg;
}

KubeRuntime::~KubeRuntime() {
  if (elector_) elector_->Stop();
  if (gang_sizes_) gang_sizes_->Stop();
  if (jobs_) jobs_->Stop();
  if (source_) source_->Stop();
}

bool KubeRuntime::leader() const { return !leader_elect_ || elector_->IsLeader(); }

void KubeRuntime::UpdateReady() { service_->SetReady(source_->synced() && leader()); }

std::function<bool()> KubeRuntime::ReadyFn() {
  return [this] { return source_->synced() && leader(); };
}

std::function<std::string(const BindingArgs&, DeviceMask)> KubeRuntime::AfterBindFn() {
  return [this](const BindingArgs& args, DeviceMask devices) {
    return binder_->AfterBind(args, devices);
  };
}

std::function<void(const ExtenderArgs&, const FilterOutcome&)> KubeRuntime::UnplacedFn() {
  return [this](const ExtenderArgs& args, const FilterOutcome& out) {
    if (args.node_names.empty() || args.pod.uid.empty()) return;
    events_->RecordLazy(args.pod, WaitingEventType(out), kWaitingEventReason,
                        [&] { return WaitingEventMessage(args, out); });
  };
}

absl::StatusOr<std::unique_ptr<KubeRuntime>> StartKube(const KubeOptions& options,
                                                       ClusterState* state,
                                                       ExtenderService* service, Metrics* metrics) {
  auto client = MakeClient(options);
  if (!client.ok()) return client.status();
  std::unique_ptr<KubeRuntime> rt(new KubeRuntime());
  rt->leader_elect_ = options.leader_elect;
  rt->own_namespace_ = options.leader.lease_namespace;
  rt->service_ = service;
  rt->client_ = *std::move(client);
  EventRecorder::Options eo;
  eo.instance = options.leader.identity;
  eo.shown = [state](const PodRequest& pod) {
    auto known = state->FindPod(pod.uid);
    return known.has_value() && known->ns == pod.ns && known->name == pod.name &&
           !known->reservation;
  };
  rt->events_ = std::make_unique<EventRecorder>(rt->client_.get(), eo, metrics);
  KubeRuntime* r = rt.get();
  rt->source_ = std::make_unique<KubeClusterSource>(
      rt->client_.get(), options.source, metrics,
      [r](const PodRequest& pod, const std::string& reason, const std::string& why) {
        r->events_->Record(pod, "Warning", reason, why);
      });
  rt->gang_sizes_ = std::make_unique<GangSizes>(rt->client_.get(), GangSizesOptions{}, metrics);
  rt->source_->set_gang_sizes(rt->gang_sizes_.get());
  rt->gang_sizes_->Start([r] { r->source_->RefillGangs(); });
  rt->jobs_ = std::make_unique<JobDeadlines>(rt->client_.get(), JobDeadlinesOptions{}, metrics);
  rt->source_->set_job_deadlines(rt->jobs_.get());
  rt->jobs_->Start(
      [r](const absl::flat_hash_set<std::string>& jobs) { r->source_->RefillJobs(jobs); });
  auto may_write = [r] { return r->source_->synced() && r->leader(); };
  rt->binder_ = std::make_unique<KubeBinder>(rt->client_.get(), rt->source_.get(), state, may_write,
                                             options.write, metrics);
  rt->evictor_ = std::make_unique<KubeEvictor>(rt->client_.get(), may_write, options.write, metrics,
                                               rt->events_.get());
  if (options.leader_elect) {
    rt->elector_ = std::make_unique<LeaderElector>(rt->client_.get(), options.leader, metrics,
                                                   [r](bool) { r->UpdateReady(); });
  }
  service->SetReady(false);
  auto s = rt->source_->Start(state, [r](bool) { r->UpdateReady(); });
  if (!s.ok()) return s;
  if (rt->elector_) rt->elector_->Start();
  std::cerr << "gpusched: kube: API server " << rt->client_->config().host << ":"
            << rt->client_->config().port
            << (options.leader_elect ? StrCat(", leader election as ", options.leader.identity)
                                     : "")
            << "\n";
  return rt;
}

}  // namespace gpusched::kube
