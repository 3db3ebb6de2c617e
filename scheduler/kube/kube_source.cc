#include "scheduler/kube/kube_source.h"

#include <algorithm>
#include <future>
#include <iostream>
#include <iterator>
#include <optional>

#include "gpusched/util/strings.h"

namespace gpusched::kube {
namespace {

constexpr const char* kPaths[2] = {"/api/v1/nodes", "/api/v1/pods"};
constexpr const char* kNames[2] = {"nodes", "pods"};

int Index(codec::ObjectKind kind) { return kind == codec::ObjectKind::kNode ? 0 : 1; }

DeviceMask LowMask(int n) { return n >= 64 ? ~DeviceMask{0} : (DeviceMask{1} << n) - 1; }

// The pages of one list as one, each item moved once (appending page by
// page moved 200,000 pods about twice over as the vectors grew).
codec::ListPage Concat(std::vector<codec::ListPage> pages) {
  codec::ListPage all;
  size_t nodes = 0, pods = 0;
  for (const codec::ListPage& p : pages) {
    nodes += p.nodes.size();
    pods += p.pods.size();
  }
  all.nodes.reserve(nodes);
  all.pods.reserve(pods);
  for (codec::ListPage& p : pages) {
    std::move(p.nodes.begin(), p.nodes.end(), std::back_inserter(all.nodes));
    std::move(p.pods.begin(), p.pods.end(), std::back_inserter(all.pods));
    std::move(p.bad_items.begin(), p.bad_items.end(), std::back_inserter(all.bad_items));
    all.resource_version = std::move(p.resource_version);
    p = codec::ListPage{};  // its memory goes back while the next is moved
  }
  return all;
}

// What CheckIds reads of a pod (nullopt when there is nothing to check):
// kept while the pod itself moves into the cluster state.
std::optional<IdsCheck> IdsToCheck(const codec::PodItem& item) {
  // A pod that did not decode is reported as such (its ids are not read).
  if (!item.decode_error.empty()) return std::nullopt;
  if (!item.raw_gpu_ids.has_value() || !item.pod.HoldsGpus()) return std::nullopt;
  const PodRequest& p = item.pod;
  return IdsCheck{p.uid, p.ns, p.name, p.node_name, *item.raw_gpu_ids, p.has_gpu_ids, p.gpu_ids};
}

}  // namespace

struct KubeClusterSource::Watch {
  StreamCanceller canceller;
  std::thread thread;
};

KubeClusterSource::KubeClusterSource(KubeHttpClient* client, SourceOptions options,
                                     Metrics* metrics, PodProblemReporter on_problem)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      on_problem_(std::move(on_problem)) {}

KubeClusterSource::~KubeClusterSource() { Stop(); }

absl::Status KubeClusterSource::Start(ClusterState* state, std::function<void(bool)> on_synced) {
  if (thread_.joinable()) return absl::FailedPreconditionError("source already started");
  state_ = state;
  on_synced_ = std::move(on_synced);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void KubeClusterSource::Stop() {
  {
    absl::MutexLock lock(&ctl_mu_);
    stopping_ = true;
    for (Watch* w : watches_) {
      if (w != nullptr) w->canceller.Cancel();
    }
  }
  if (thread_.joinable()) thread_.join();
}

std::chrono::milliseconds KubeClusterSource::Jitter(std::chrono::milliseconds d) {
  absl::MutexLock lock(&rng_mu_);
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  // [d/2, d): "full jitter" would risk near-zero waits in a tight loop.
  return d / 2 + std::chrono::milliseconds(rng_ % std::max<int64_t>(1, d.count() / 2));
}

bool KubeClusterSource::Sleep(std::chrono::milliseconds d) {
  absl::MutexLock lock(&ctl_mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ctl_mu_) { return stopping_ || relist_; };
  ctl_mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(d.count()));
  return !stopping_ && !relist_;
}

void KubeClusterSource::RequestRelist(const char* why) {
  absl::MutexLock lock(&ctl_mu_);
  if (relist_) return;
  relist_ = true;
  std::cerr << "gpusched: kube: relist (" << why << ")\n";
  for (Watch* w : watches_) {
    if (w != nullptr) w->canceller.Cancel();
  }
}

absl::StatusOr<HttpResult> KubeClusterSource::FetchPage(codec::ObjectKind kind,
                                                        const std::string& cont) {
  std::string target = StrCat(kPaths[Index(kind)], "?limit=", options_.page_size);
  if (!cont.empty()) StrAppend(&target, "&continue=", cont);
  return client_->Do("GET", target, "", "", options_.list_timeout);
}

// Pipelined: the next page's request goes out as soon as this page's continue
// token is read, and is answered while this page's items are decoded (at
// 200,000 pods the decoding is about as long as the transfer).
absl::StatusOr<std::vector<codec::ListPage>> KubeClusterSource::List(codec::ObjectKind kind) {
  codec::KubeDecoder dec;
  std::vector<codec::ListPage> pages;
  std::string cont;
  auto fetch = [this, kind](std::string token) { return FetchPage(kind, token); };
  std::future<absl::StatusOr<HttpResult>> next = std::async(std::launch::async, fetch, cont);
  do {
    absl::StatusOr<HttpResult> res = next.get();
    if (!res.ok()) return res.status();
    if (res->status == 410 && !cont.empty()) {
      return absl::AbortedError("list continuation expired");  // restart the list
    }
    if (res->status != 200) {
      codec::KubeStatus st = codec::DecodeStatus(res->body);
      return absl::UnavailableError(
          StrCat("list ", kNames[Index(kind)], ": HTTP ", res->status, " ", st.message));
    }
    auto page = dec.DecodeListPage(res->body, kind, [&](const codec::ListPage& meta) {
      cont = meta.continue_token;
      if (!cont.empty()) next = std::async(std::launch::async, fetch, cont);
    });
    if (!page.ok()) return page.status();  // `next`, if started, is awaited
    pages.push_back(*std::move(page));
  } while (!cont.empty());
  return pages;
}

void KubeClusterSource::InstallList(codec::ListPage nodes, std::vector<codec::ListPage> pods) {
  for (const auto& b : nodes.bad_items) std::cerr << "gpusched: kube: skipping node " << b << "\n";
  size_t count = 0, to_check = 0;
  for (const codec::ListPage& page : pods) {
    count += page.pods.size();
    for (const codec::PodItem& item : page.pods) {
      to_check += item.raw_gpu_ids.has_value() && item.pod.HoldsGpus();
    }
    for (const auto& b : page.bad_items) std::cerr << "gpusched: kube: skipping pod " << b << "\n";
  }
  std::vector<PodRequest> list;
  list.reserve(count);
  std::vector<IdsCheck> checks;  // against the nodes once they are in the state
  checks.reserve(to_check);
  std::vector<codec::PodItem> undecodable;  // held pods that did not decode
  {
    absl::MutexLock lock(&mu_);
    absl::flat_hash_map<std::string, PodRequest> still;
    api_node_.clear();
    api_node_.reserve(count);
    pod_job_.Clear();
    for (codec::ListPage& page : pods) {
      for (auto& item : page.pods) {
        if (gang_sizes_ != nullptr) gang_sizes_->Fill(item.pod);
        FillJobLocked(item);
        api_node_[item.pod.uid] = item.pod.node_name;
        if (auto c = IdsToCheck(item)) checks.push_back(*std::move(c));
        if (!item.decode_error.empty()) undecodable.push_back(item);
        auto it = assumed_.find(item.pod.uid);
        if (it != assumed_.end() && item.pod.node_name.empty() && !item.pod.deleting) {
          still.emplace(it->first, it->second);
          list.push_back(Merge(item.pod, it->second));
        } else {
          list.push_back(std::move(item.pod));
        }
      }
      page = codec::ListPage{};  // its memory goes back while the next is moved
    }
    assumed_ = std::move(still);
    state_->Reset(std::move(nodes.nodes), std::move(list));
    state_->Commit();
  }
  for (const IdsCheck& c : checks) CheckIds(c);
  for (const codec::PodItem& item : undecodable) ReportUndecodable(item);
}

bool KubeClusterSource::ListAll(std::string* node_rv, std::string* pod_rv) {
  auto backoff = options_.backoff_initial;
  while (true) {
    {
      absl::MutexLock lock(&ctl_mu_);
      if (stopping_) return false;
      relist_ = false;
    }
    // Nodes and pods are listed at once, the nodes on a helper thread.
    auto node_pages =
        std::async(std::launch::async, [this] { return List(codec::ObjectKind::kNode); });
    auto pod_pages = List(codec::ObjectKind::kPod);
    absl::StatusOr<std::vector<codec::ListPage>> node_list = node_pages.get();
    absl::StatusOr<codec::ListPage> nodes =
        node_list.ok() ? absl::StatusOr<codec::ListPage>(Concat(*std::move(node_list)))
                       : absl::StatusOr<codec::ListPage>(node_list.status());
    absl::StatusOr<std::vector<codec::ListPage>> pods = std::move(pod_pages);
    if (!nodes.ok()) pods = nodes.status();
    if (pods.ok()) {
      // Read before the pages are consumed: the watches resume here.
      *node_rv = nodes->resource_version;
      *pod_rv = pods->front().resource_version;
      InstallList(*std::move(nodes), *std::move(pods));
      relists_.fetch_add(1);
      if (metrics_ != nullptr) metrics_->Inc("gpusched_kube_lists_total", "Full relists.", {});
      return true;
    }
    std::cerr << "gpusched: kube: list failed, retrying: " << pods.status().message() << "\n";
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_kube_list_errors_total", "Failed list attempts.", {});
    }
    if (pods.status().code() != absl::StatusCode::kAborted) {
      {
        absl::MutexLock lock(&ctl_mu_);
        if (stopping_) return false;
      }
      Sleep(Jitter(backoff));
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
  }
}

void KubeClusterSource::Run() {
  while (true) {
    std::string rv[2];
    if (!ListAll(&rv[0], &rv[1])) break;
    synced_ = true;
    if (on_synced_) on_synced_(true);
    Watch w[2];
    {
      absl::MutexLock lock(&ctl_mu_);
      if (stopping_) break;
      watches_[0] = &w[0];
      watches_[1] = &w[1];
    }
    for (int i = 0; i < 2; ++i) {
      auto kind = i == 0 ? codec::ObjectKind::kNode : codec::ObjectKind::kPod;
      w[i].thread = std::thread([this, kind, r = rv[i], wp = &w[i]] { WatchLoop(kind, r, wp); });
    }
    for (auto& x : w) x.thread.join();
    bool stop;
    {
      absl::MutexLock lock(&ctl_mu_);
      watches_[0] = watches_[1] = nullptr;
      stop = stopping_;
    }
    if (stop) break;
    // A relist: the view is stale until the new list is in.
    synced_ = false;
    if (on_synced_) on_synced_(false);
  }
  synced_ = false;
  if (on_synced_) on_synced_(false);
}

void KubeClusterSource::WatchLoop(codec::ObjectKind kind, std::string rv, Watch* w) {
  const int k = Index(kind);
  codec::KubeDecoder dec;
  auto backoff = options_.backoff_initial;
  uint64_t round = 0;
  while (true) {
    {
      absl::MutexLock lock(&ctl_mu_);
      if (stopping_ || relist_) return;
    }
    int timeout = options_.watch_timeout_seconds;
    timeout += static_cast<int>((round++ * 7919 + k * 104729) % std::max(1, timeout));
    std::string target = StrCat(kPaths[k], "?watch=1&allowWatchBookmarks=true&resourceVersion=", rv,
                                "&timeoutSeconds=", timeout);
    bool gone = false;
    std::string error_event;
    // Pod events of one read from the socket: one ClusterState commit (a
    // burst of deletions used to publish as many snapshots).
    std::vector<codec::WatchEvent> pod_events;
    auto on_line = [&](std::string& line) {
      auto ev = dec.DecodeWatchEvent(line, kind);
      if (!ev.ok()) {
        error_event = std::string(FromAbsl(ev.status().message()));
        return false;
      }
      if (ev->type == codec::WatchEvent::Type::kError) {
        if (ev->status.code == 410) {
          gone = true;
        } else {
          error_event = StrCat("HTTP ", ev->status.code, " ", ev->status.message);
        }
        return false;
      }
      backoff = options_.backoff_initial;
      if (!ev->resource_version.empty()) rv = ev->resource_version;
      if (ev->type == codec::WatchEvent::Type::kBookmark) return true;
      if (metrics_ != nullptr) {
        metrics_->Inc("gpusched_kube_watch_events_total", "Watch events applied.",
                      {{"resource", kNames[k]}});
      }
      if (kind == codec::ObjectKind::kNode) {
        ApplyNode(*ev);
      } else {
        pod_events.push_back(*std::move(ev));  // applied with the rest of its read
      }
      return true;
    };
    std::string error_body;
    auto status = client_->Stream(target, std::chrono::seconds(timeout + 30), on_line, &error_body,
                                  &w->canceller, [&] { ApplyPods(pod_events); });
    ApplyPods(pod_events);  // what arrived before the stream ended or failed
    if (!status.ok() && status.status().code() == absl::StatusCode::kCancelled) return;
    if ((status.ok() && *status == 410) || gone) {
      RequestRelist(StrCat(kNames[k], " watch: resource version ", rv, " expired").c_str());
      if (metrics_ != nullptr) {
        metrics_->Inc("gpusched_kube_watch_restarts_total", "Watch restarts.",
                      {{"resource", kNames[k]}, {"reason", "gone"}});
      }
      return;
    }
    std::string why;
    if (!status.ok()) {
      why = std::string(FromAbsl(status.status().message()));
    } else if (*status != 200) {
      why = StrCat("HTTP ", *status, " ", codec::DecodeStatus(error_body).message);
    } else {
      why = error_event;
    }
    if (why.empty()) continue;  // the server ended the watch (timeout): resume at once
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_kube_watch_restarts_total", "Watch restarts.",
                    {{"resource", kNames[k]}, {"reason", "error"}});
    }
    std::cerr << "gpusched: kube: " << kNames[k] << " watch: " << why << "; retrying\n";
    if (!Sleep(Jitter(backoff))) return;
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

PodRequest KubeClusterSource::Merge(const PodRequest& api, const PodRequest& assumed) const {
  PodRequest p = api;
  p.node_name = assumed.node_name;
  p.gpu_ids = assumed.gpu_ids;
  p.has_gpu_ids = assumed.has_gpu_ids;
  return p;
}

std::optional<ClusterState::PodUpdate> KubeClusterSource::PodUpdateLocked(codec::WatchEvent& ev) {
  if (!ev.pod.has_value()) {
    if (ev.type == codec::WatchEvent::Type::kDeleted && !ev.uid.empty()) {
      assumed_.erase(ev.uid);
      api_node_.erase(ev.uid);
      pod_job_.Erase(ev.uid);
      return ClusterState::PodUpdate{ev.uid, std::nullopt};
    }
    std::cerr << "gpusched: kube: pod " << ev.ns << "/" << ev.name
              << " not decodable, keeping the last version: " << ev.decode_error << "\n";
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_kube_decode_errors_total", "Objects that could not be decoded.",
                    {{"resource", "pods"}});
    }
    return std::nullopt;
  }
  PodRequest& pod = ev.pod->pod;
  // Under mu_, so a RefillGangs after a size change cannot be overtaken.
  if (gang_sizes_ != nullptr) gang_sizes_->Fill(pod);
  if (ev.type == codec::WatchEvent::Type::kDeleted) {
    assumed_.erase(pod.uid);
    api_node_.erase(pod.uid);
    pod_job_.Erase(pod.uid);
    return ClusterState::PodUpdate{pod.uid, std::nullopt};
  }
  api_node_[pod.uid] = pod.node_name;
  FillJobLocked(*ev.pod);
  auto it = assumed_.find(pod.uid);
  if (it == assumed_.end()) return ClusterState::PodUpdate{pod.uid, pod};
  if (!pod.node_name.empty() || pod.deleting) {
    assumed_.erase(it);
    return ClusterState::PodUpdate{pod.uid, pod};
  }
  return ClusterState::PodUpdate{pod.uid, Merge(pod, it->second)};
}

void KubeClusterSource::ApplyPods(std::vector<codec::WatchEvent>& events) {
  if (events.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    std::vector<ClusterState::PodUpdate> updates;
    updates.reserve(events.size());
    for (codec::WatchEvent& ev : events) {
      if (auto u = PodUpdateLocked(ev)) updates.push_back(*std::move(u));
    }
    state_->ApplyPodsAndCommit(std::move(updates));
  }
  for (const codec::WatchEvent& ev : events) {
    if (ev.type != codec::WatchEvent::Type::kDeleted && ev.pod.has_value()) {
      if (auto c = IdsToCheck(*ev.pod)) CheckIds(*c);
      if (!ev.pod->decode_error.empty()) ReportUndecodable(*ev.pod);
    }
  }
  events.clear();
}

void KubeClusterSource::ApplyNode(codec::WatchEvent& ev) {
  if (ev.type == codec::WatchEvent::Type::kDeleted) {
    state_->RemoveNode(ev.name);
  } else if (ev.node.has_value()) {
    state_->UpsertNode(std::move(*ev.node));
  } else {
    std::cerr << "gpusched: kube: node " << ev.name << " not decodable: " << ev.decode_error
              << "\n";
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_kube_decode_errors_total", "Objects that could not be decoded.",
                    {{"resource", "nodes"}});
    }
    return;
  }
  state_->Commit();
}

void KubeClusterSource::CheckIds(const IdsCheck& c) {
  std::string why;
  if (!c.decodable) {
    why = StrCat("gpusched.io/gpu-ids '", c.raw, "' cannot be decoded");
  } else {
    auto snap = state_->Snapshot();
    const NodeInfo* node = snap->Find(c.node);
    if (node != nullptr && (c.ids & ~LowMask(node->gpu_count)) != 0) {
      why = StrCat("gpusched.io/gpu-ids '", c.raw, "' names devices node ", c.node,
                   " does not have (", node->gpu_count, " GPUs)");
    }
  }
  if (why.empty()) return;
  if (!FirstReport(StrCat(c.uid, "|", c.raw))) return;
  StrAppend(&why, "; its devices are treated as used");
  std::cerr << "gpusched: kube: pod " << c.ns << "/" << c.name << ": " << why << "\n";
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_bad_gpu_ids_total",
                  "Pods whose gpusched.io/gpu-ids annotation could not be honoured.", {});
  }
  if (!on_problem_) return;
  PodRequest pod;  // what the report names: the pod, where and which devices
  pod.uid = c.uid;
  pod.ns = c.ns;
  pod.name = c.name;
  pod.node_name = c.node;
  pod.has_gpu_ids = c.decodable;
  pod.gpu_ids = c.ids;
  on_problem_(pod, kGpuIdsUnusableReason, why);
}

bool KubeClusterSource::FirstReport(const std::string& key) {
  absl::MutexLock lock(&report_mu_);
  return reported_.insert(key).second;
}

void KubeClusterSource::ReportUndecodable(const codec::PodItem& item) {
  const PodRequest& p = item.pod;
  if (!FirstReport(StrCat(p.uid, "|undecodable|", item.decode_error))) return;
  const std::string why =
      StrCat(item.decode_error, "; the pod holds its ", p.gpu.count, " GPUs on ", p.node_name,
             " with devices unknown (never counted free) until it decodes");
  std::cerr << "gpusched: kube: pod " << p.Key() << ": " << why << "\n";
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_kube_decode_errors_total", "Objects that could not be decoded.",
                  {{"resource", "pods"}});
  }
  if (on_problem_) on_problem_(p, kPodUndecodableReason, why);
}

void KubeClusterSource::RefillGangs() {
  if (gang_sizes_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  if (state_ == nullptr) return;
  bool changed = false;
  for (const PodRequest& p : state_->Pods()) {
    if (p.gang_owner.kind == GangOwnerKind::kNone || !api_node_.contains(p.uid)) continue;
    PodRequest q = p;
    gang_sizes_->Fill(q);
    if (q.gang == p.gang && q.gang_size == p.gang_size &&
        q.gang_size_reason == p.gang_size_reason && q.group_topology == p.group_topology) {
      continue;
    }
    state_->UpsertPod(std::move(q));
    changed = true;
  }
  if (changed) state_->Commit();
}

void KubeClusterSource::FillJobLocked(codec::PodItem& item) {
  if (jobs_ == nullptr) return;
  PodRequest& pod = item.pod;
  if (item.job_name.empty()) {
    pod_job_.Erase(pod.uid);
    return;
  }
  jobs_->Fill(item.job_name, item.job_uid, pod);
  pod_job_.Set(pod.uid, pod.ns, item.job_name, item.job_uid);
}

void KubeClusterSource::RefillJobs(const absl::flat_hash_set<std::string>& jobs) {
  if (jobs_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  if (state_ == nullptr) return;
  bool changed = false;
  pod_job_.ForEachPodOf(
      jobs, [&](const std::string& uid, std::string_view name, std::string_view job_uid) {
        std::optional<PodRequest> p = state_->FindPod(uid);
        if (!p.has_value()) return;
        PodRequest q = *p;
        jobs_->Fill(std::string(name), std::string(job_uid), q);
        if (q.job_deadline_s == p->job_deadline_s && q.job_start_unix == p->job_start_unix) return;
        state_->UpsertPod(std::move(q));
        changed = true;
      });
  if (changed) state_->Commit();
}

void KubeClusterSource::NoteAssumed(const PodRequest& bound) {
  absl::MutexLock lock(&mu_);
  assumed_[bound.uid] = bound;
}

void KubeClusterSource::ForgetAssumed(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  assumed_.erase(uid);
}

bool KubeClusterSource::ApiBound(const std::string& uid, const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto it = api_node_.find(uid);
  return it != api_node_.end() && it->second == node;
}

}  // namespace gpusched::kube
