#include "scheduler/kube/kube_writer.h"

#include <iostream>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/kube_codec.h"

namespace gpusched::kube {
namespace {

bool Retryable(const absl::StatusOr<HttpResult>& r) {
  if (!r.ok()) return true;
  return r->status == 429 || r->status >= 500;
}

std::string Describe(const absl::StatusOr<HttpResult>& r) {
  if (!r.ok()) return std::string(FromAbsl(r.status().message()));
  codec::KubeStatus st = codec::DecodeStatus(r->body);
  return StrCat("HTTP ", r->status, st.message.empty() ? "" : ": ", st.message);
}

}  // namespace

std::string PodPath(std::string_view ns, std::string_view name, std::string_view sub) {
  std::string p = StrCat("/api/v1/namespaces/", ns, "/pods/", name);
  if (!sub.empty()) StrAppend(&p, "/", sub);
  return p;
}

// ---------------------------------------------------------------- events

EventRecorder::EventRecorder(KubeHttpClient* client, Options options, Metrics* metrics)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      bucket_(options_.qps, options_.burst),
      thread_([this] { Loop(); }) {}

EventRecorder::~EventRecorder() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void EventRecorder::Record(const PodRequest& pod, std::string type, std::string reason,
                           std::string message) {
  RecordLazy(pod, std::move(type), std::move(reason), [&message] { return std::move(message); });
}

void EventRecorder::RecordLazy(const PodRequest& pod, std::string type, std::string reason,
                               absl::FunctionRef<std::string()> message) {
  if (options_.shown && !options_.shown(pod)) {
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_events_unknown_pod_total",
                    "Events not written: the pod is not one the cluster source shows.", {});
    }
    return;
  }
  auto now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu_);
    if (last_.size() > 100000) last_.clear();  // bound memory; worst case a repeat event
    auto& last = last_[StrCat(pod.uid, "|", reason)];
    if (last.time_since_epoch().count() != 0 && now - last < options_.per_pod_interval) return;
    last = now;
  }
  std::string text = message();  // outside the lock: may take a while
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= options_.max_queue) {
    queue_.pop_front();
    if (metrics_ != nullptr) metrics_->Inc("gpusched_events_dropped_total", "Events not sent.", {});
  }
  codec::EventFields e;
  e.ns = pod.ns;
  e.pod_name = pod.name;
  e.pod_uid = pod.uid;
  e.name = StrCat(pod.name, ".gpusched.", absl::ToUnixNanos(absl::Now()), ".", ++seq_);
  e.type = std::move(type);
  e.reason = std::move(reason);
  e.message = std::move(text);
  e.timestamp = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  e.instance = options_.instance;
  queue_.push_back(StrCat(pod.ns, "\n", codec::EncodeEvent(e)));
}

void EventRecorder::Flush() {
  absl::MutexLock lock(&mu_);
  auto empty = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && inflight_ == 0; };
  mu_.AwaitWithTimeout(absl::Condition(&empty), absl::Seconds(10));
}

void EventRecorder::Loop() {
  while (true) {
    std::string item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      ++inflight_;
    }
    bucket_.Take();
    size_t nl = item.find('\n');
    auto res = client_->Do("POST", StrCat("/api/v1/namespaces/", item.substr(0, nl), "/events"),
                           item.substr(nl + 1), "application/json", std::chrono::seconds(5));
    bool ok = res.ok() && (res->status == 200 || res->status == 201);
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_events_total", "Events sent to the API server.",
                    {{"result", ok ? "ok" : "error"}});
    }
    absl::MutexLock lock(&mu_);
    --inflight_;
  }
}

// ---------------------------------------------------------------- bind

KubeBinder::KubeBinder(KubeHttpClient* client, KubeClusterSource* source, ClusterState* state,
                       std::function<bool()> may_write, WriteOptions options, Metrics* metrics)
    : client_(client),
      source_(source),
      state_(state),
      may_write_(std::move(may_write)),
      options_(options),
      metrics_(metrics) {}

absl::StatusOr<HttpResult> KubeBinder::Retry(
    const std::function<absl::StatusOr<HttpResult>()>& fn) {
  absl::StatusOr<HttpResult> r;
  auto backoff = options_.backoff;
  for (int i = 0; i < options_.attempts; ++i) {
    if (i > 0) {
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
    r = fn();
    if (!Retryable(r)) return r;
  }
  return r;
}

std::string KubeBinder::AfterBind(const BindingArgs& args, DeviceMask devices) {
  auto pod = state_->FindPodByName(args.pod_namespace, args.pod_name);
  if (!pod.has_value())
    return StrCat("gpusched: pod ", args.pod_namespace, "/", args.pod_name, " vanished");
  if (devices == 0 && source_->ApiBound(pod->uid, args.node)) return "";  // already bound there
  if (!may_write_()) {
    return "gpusched: this replica is not the leader (or not synced); not binding";
  }
  if (devices == 0) devices = pod->gpu_ids;  // a repeated bind of our own assumption
  // Keep the assumption against watch events that still show the pod
  // pending; then make sure no event slipped in between.
  source_->NoteAssumed(*pod);
  auto now = state_->FindPod(pod->uid);
  if (!now.has_value() || now->node_name != args.node) {
    PodRequest pending = now.value_or(*pod);
    pending.node_name.clear();
    if (!state_->Assume(pending, args.node, devices).ok()) {
      source_->ForgetAssumed(pod->uid);
      return StrCat("gpusched: devices for ", pod->Key(), " were taken meanwhile; retry");
    }
  }
  std::string err = WriteBack(*pod, args.node, devices);
  if (!err.empty()) {
    source_->ForgetAssumed(pod->uid);
    std::cerr << "gpusched: bind " << pod->Key() << " to " << args.node << ": " << err << "\n";
  }
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_kube_binds_total", "Bind write-backs to the API server.",
                  {{"result", err.empty() ? "ok" : "error"}});
  }
  return err;
}

std::string KubeBinder::WriteBack(const PodRequest& pod, const std::string& node,
                                  DeviceMask devices) {
  const std::string patch = codec::EncodeGpuIdsPatch(devices);
  auto r = Retry([&] {
    return client_->Do("PATCH", PodPath(pod.ns, pod.name), patch, "application/merge-patch+json",
                       options_.timeout);
  });
  if (!r.ok() || r->status != 200) {
    return StrCat("gpusched: annotate ", pod.Key(), ": ", Describe(r));
  }
  const std::string body = codec::EncodeBinding(pod.ns, pod.name, pod.uid, node);
  auto b = Retry([&] {
    return client_->Do("POST", PodPath(pod.ns, pod.name, "binding"), body, "application/json",
                       options_.timeout);
  });
  if (b.ok() && (b->status == 200 || b->status == 201)) return "";
  if (b.ok() && b->status != 409 && !Retryable(b)) {
    return StrCat("gpusched: bind ", pod.Key(), ": ", Describe(b));
  }
  // 409 (already bound, by us on an earlier try or by someone else) or an
  // unknown outcome (the response was lost): the pod says where it is.
  for (int i = 0; i < options_.attempts; ++i) {
    auto g = client_->Do("GET", PodPath(pod.ns, pod.name), "", "", options_.timeout);
    if (!g.ok() || g->status != 200) continue;
    auto on = codec::DecodePodNodeName(g->body);
    if (!on.ok()) break;
    if (*on == node) return "";
    if (!on->empty()) return StrCat("gpusched: pod ", pod.Key(), " is already bound to ", *on);
    break;
  }
  return StrCat("gpusched: bind ", pod.Key(), ": ", Describe(b));
}

// ---------------------------------------------------------------- evict

KubeEvictor::KubeEvictor(KubeHttpClient* client, std::function<bool()> may_write,
                         WriteOptions options, Metrics* metrics, EventRecorder* events)
    : client_(client),
      may_write_(std::move(may_write)),
      options_(options),
      metrics_(metrics),
      events_(events) {}

absl::Status KubeEvictor::Evict(const PodRequest& pod, const std::string& reason) {
  if (!may_write_()) return absl::FailedPreconditionError("not the leader; not evicting");
  const std::string body = codec::EncodeEviction(pod.ns, pod.name, pod.uid);
  absl::StatusOr<HttpResult> r;
  auto backoff = options_.backoff;
  for (int i = 0; i < options_.attempts; ++i) {
    r = client_->Do("POST", PodPath(pod.ns, pod.name, "eviction"), body, "application/json",
                    options_.timeout);
    // 429 is a PDB verdict, not overload: do not hammer it, report it.
    if (r.ok() && r->status != 429 && r->status < 500) break;
    if (r.ok() && r->status == 429) break;
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
  std::string result;
  absl::Status out;
  if (r.ok() && (r->status == 200 || r->status == 201)) {
    result = "ok";
    if (events_ != nullptr) events_->Record(pod, "Normal", "Preempted", reason);
  } else if (r.ok() && (r->status == 404 || r->status == 409)) {
    result = "gone";  // deleted already, or a different pod by that name now
  } else if (r.ok() && r->status == 429) {
    result = "blocked";
    out = absl::ResourceExhaustedError(
        StrCat("evict ", pod.Key(), ": disruption budget does not allow it now: ", Describe(r)));
  } else {
    result = "error";
    out = absl::UnavailableError(StrCat("evict ", pod.Key(), ": ", Describe(r)));
  }
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_kube_evictions_total", "Eviction requests.", {{"result", result}});
  }
  std::cerr << "gpusched: evict " << pod.Key() << " (" << reason << "): " << result << "\n";
  return out;
}

}  // namespace gpusched::kube
