#include "scheduler/kube/job_deadlines.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "gpusched/util/strings.h"

namespace gpusched::kube {
namespace {

constexpr char kJobsPath[] = "/apis/batch/v1/jobs";

std::string KeyOf(std::string_view ns, std::string_view name) { return StrCat(ns, "/", name); }

// What Fill answers for a Job: equal entries fill the same.
bool SameDeadline(const codec::JobDeadline& a, const codec::JobDeadline& b) {
  return a.uid == b.uid && a.deadline_s == b.deadline_s && a.start_unix == b.start_unix;
}

}  // namespace

JobDeadlines::JobDeadlines(KubeHttpClient* client, JobDeadlinesOptions options, Metrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      reflector_(client, {kJobsPath, "jobs", "gpusched: kube: "}, options_, metrics,
                 ReflectorHooks()) {}

JobDeadlines::~JobDeadlines() { Stop(); }

Reflector<codec::JobDeadline>::Hooks JobDeadlines::ReflectorHooks() {
  using Page = ReflectorPage<codec::JobDeadline>;
  using Event = ReflectorEvent<codec::JobDeadline>;
  Reflector<codec::JobDeadline>::Hooks h;
  h.decode_page = [](std::string_view body) -> absl::StatusOr<Page> {
    auto page = codec::DecodeJobList(body);
    if (!page.ok()) return page.status();
    return Page{std::move(page->jobs), std::move(page->continue_token),
                std::move(page->resource_version)};
  };
  h.decode_event = [](std::string_view line) -> absl::StatusOr<Event> {
    auto ev = codec::DecodeJobEvent(line);
    if (!ev.ok()) return ev.status();
    return Event{ev->type, std::move(ev->resource_version), std::move(ev->job),
                 std::move(ev->status)};
  };
  h.replace = [this](std::vector<codec::JobDeadline> jobs) { Replace(std::move(jobs)); };
  h.apply = [this](codec::WatchEvent::Type type, codec::JobDeadline job) {
    Apply(job, type == codec::WatchEvent::Type::kDeleted);
  };
  h.refused = [this](int status) { Refused(status); };
  return h;
}

void JobDeadlines::Start(OnChange on_change) {
  if (started_) return;
  started_ = true;
  on_change_ = std::move(on_change);
  reflector_.Start();
}

void JobDeadlines::Stop() { reflector_.Stop(); }

void JobDeadlines::Fill(const std::string& job_name, const std::string& job_uid,
                        PodRequest& pod) const {
  pod.job_deadline_s = 0;
  pod.job_start_unix = 0;
  if (job_name.empty()) return;
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(KeyOf(pod.ns, job_name));
  if (it == jobs_.end()) return;
  const codec::JobDeadline& j = it->second;
  if (!job_uid.empty() && !j.uid.empty() && job_uid != j.uid) return;  // another Job, same name
  pod.job_deadline_s = j.deadline_s;
  pod.job_start_unix = j.start_unix;
}

bool JobDeadlines::listed() const {
  absl::MutexLock l(&mu_);
  return listed_;
}

bool JobDeadlines::refused() const {
  absl::MutexLock l(&mu_);
  return refused_;
}

void JobDeadlines::Refused(int status) {
  absl::flat_hash_set<std::string> gone;
  {
    absl::MutexLock l(&mu_);
    if (!refused_) {
      std::cerr << "gpusched: kube: list batch/v1 jobs: HTTP " << status
                << (status == 403 ? " (the RBAC grants no list/watch on jobs)" : "")
                << "; Jobs' activeDeadlineSeconds are not used in runtime estimates (they fall "
                   "back to the next source); asked again every "
                << (options_.refused_retry.count() >= 1000
                        ? StrCat(options_.refused_retry.count() / 1000, "s")
                        : StrCat(options_.refused_retry.count(), "ms"))
                << "\n";
    }
    refused_ = true;
    listed_ = false;
    for (const auto& [key, j] : jobs_) gone.insert(key);
    jobs_.clear();
  }
  if (!gone.empty() && on_change_) on_change_(gone);
}

void JobDeadlines::Keep(codec::JobDeadline job, Jobs* jobs) {
  const std::string key = KeyOf(job.ns, job.name);
  {
    absl::MutexLock l(&log_mu_);
    if (job.error.empty()) {
      skipped_.erase(key);
    } else {
      auto [it, fresh] = skipped_.try_emplace(key, job.error);
      if (fresh || it->second != job.error) {
        it->second = job.error;
        std::cerr << "gpusched: kube: skipping Job " << (key == "/" ? "(unnamed)" : key) << ": "
                  << job.error << "; its pods' runtime estimates do not use its deadline\n";
      }
      if (metrics_ != nullptr) {
        metrics_->Inc("gpusched_kube_decode_errors_total", "Objects that could not be decoded.",
                      {{"resource", "jobs"}});
      }
    }
  }
  if (!job.error.empty() || job.deadline_s <= 0) return;
  (*jobs)[key] = std::move(job);
}

void JobDeadlines::Replace(std::vector<codec::JobDeadline> listed) {
  Jobs jobs;
  for (codec::JobDeadline& j : listed) Keep(std::move(j), &jobs);
  absl::flat_hash_set<std::string> changed;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [key, j] : jobs_) {
      auto it = jobs.find(key);
      if (it == jobs.end() || !SameDeadline(it->second, j)) changed.insert(key);
    }
    for (const auto& [key, j] : jobs) {
      if (!jobs_.contains(key)) changed.insert(key);
    }
    if (refused_) {
      std::cerr << "gpusched: kube: batch/v1 jobs readable again: their deadlines are used\n";
    }
    refused_ = false;
    listed_ = true;
    jobs_ = std::move(jobs);
  }
  if (!changed.empty() && on_change_) on_change_(changed);
}

void JobDeadlines::Apply(const codec::JobDeadline& job, bool deleted) {
  Jobs kept;
  const std::string key = KeyOf(job.ns, job.name);
  if (!deleted) {
    Keep(job, &kept);
  } else {
    absl::MutexLock l(&log_mu_);
    skipped_.erase(key);
  }
  bool changed = false;
  {
    absl::MutexLock l(&mu_);
    auto it = jobs_.find(key);
    if (kept.empty()) {
      changed = it != jobs_.end();
      if (changed) jobs_.erase(it);
    } else {
      codec::JobDeadline& next = kept.begin()->second;
      changed = it == jobs_.end() || !SameDeadline(it->second, next);
      jobs_[key] = std::move(next);
    }
  }
  if (changed && on_change_) on_change_({key});
}

}  // namespace gpusched::kube
