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
    : client_(client), options_(std::move(options)), metrics_(metrics) {}

JobDeadlines::~JobDeadlines() { Stop(); }

void JobDeadlines::Start(OnChange on_change) {
  if (thread_.joinable()) return;
  on_change_ = std::move(on_change);
  thread_ = std::thread([this] { Run(); });
}

void JobDeadlines::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

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

bool JobDeadlines::Sleep(std::chrono::milliseconds d) {
  absl::MutexLock l(&mu_);
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(d));
}

void JobDeadlines::Run() {
  auto backoff = options_.backoff_initial;
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
    }
    Jobs jobs;
    std::string rv;
    const int status = List(&jobs, &rv);
    if (status == 403 || status == 404 || status == 401) {
      Refused(status, "list");
      if (!Sleep(options_.forbidden_retry)) return;
      continue;
    }
    if (status != 200) {
      if (!Sleep(backoff)) return;
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    Replace(std::move(jobs));
    backoff = options_.backoff_initial;
    while (true) {
      const int code = Watch(&rv);
      {
        absl::MutexLock l(&mu_);
        if (stopping_) return;
      }
      if (code == 410 || code == 403 || code == 404 || code == 401) break;  // relist
      if (code == 0) {
        backoff = options_.backoff_initial;
        continue;
      }
      if (!Sleep(backoff)) return;
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
  }
}

void JobDeadlines::Refused(int status, const std::string& why) {
  absl::flat_hash_set<std::string> gone;
  {
    absl::MutexLock l(&mu_);
    if (!refused_) {
      std::cerr << "gpusched: kube: " << why << " batch/v1 jobs: HTTP " << status
                << (status == 403 ? " (the RBAC grants no list/watch on jobs)" : "")
                << "; Jobs' activeDeadlineSeconds are not used in runtime estimates (they fall "
                   "back to the next source); asked again every "
                << (options_.forbidden_retry.count() >= 1000
                        ? StrCat(options_.forbidden_retry.count() / 1000, "s")
                        : StrCat(options_.forbidden_retry.count(), "ms"))
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

int JobDeadlines::List(Jobs* jobs, std::string* rv) {
  std::string token;
  do {
    std::string target = StrCat(kJobsPath, "?limit=", options_.page_size);
    if (!token.empty()) StrAppend(&target, "&continue=", token);
    auto res = client_->Do("GET", target, "", "application/json", options_.request_timeout);
    if (!res.ok() || res->status != 200) {
      const int status = res.ok() ? res->status : 0;
      if (status != 403 && status != 404 && status != 401) {
        std::cerr << "gpusched: kube: list jobs: "
                  << (res.ok()
                          ? StrCat("HTTP ", status, " ", codec::DecodeStatus(res->body).message)
                          : std::string(FromAbsl(res.status().message())))
                  << "; retrying\n";
      }
      return status;
    }
    auto page = codec::DecodeJobList(res->body);
    if (!page.ok()) {
      std::cerr << "gpusched: kube: list jobs: " << page.status().message() << "; retrying\n";
      return 0;
    }
    for (codec::JobDeadline& j : page->jobs) Keep(std::move(j), jobs);
    token = page->continue_token;
    *rv = page->resource_version;
  } while (!token.empty());
  return 200;
}

void JobDeadlines::Replace(Jobs jobs) {
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

int JobDeadlines::Watch(std::string* rv) {
  const std::string target =
      StrCat(kJobsPath, "?watch=1&allowWatchBookmarks=true&resourceVersion=", *rv,
             "&timeoutSeconds=", options_.watch_timeout_seconds);
  int failure = 0;
  std::string error;
  auto on_line = [&](std::string& line) {
    auto ev = codec::DecodeJobEvent(line);
    if (!ev.ok()) {
      error = std::string(FromAbsl(ev.status().message()));
      return false;
    }
    if (ev->type == codec::WatchEvent::Type::kError) {
      failure = ev->status.code == 410 ? 410 : -1;
      error = StrCat("HTTP ", ev->status.code, " ", ev->status.message);
      return false;
    }
    if (!ev->resource_version.empty()) *rv = ev->resource_version;
    if (ev->type == codec::WatchEvent::Type::kBookmark) return true;
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_kube_watch_events_total", "Watch events applied.",
                    {{"resource", "jobs"}});
    }
    Apply(ev->job, ev->type == codec::WatchEvent::Type::kDeleted);
    return true;
  };
  std::string error_body;
  auto status = client_->Stream(target, std::chrono::seconds(options_.watch_timeout_seconds + 30),
                                on_line, &error_body, &canceller_);
  if (!status.ok()) {
    if (status.status().code() == absl::StatusCode::kCancelled) return 0;
    std::cerr << "gpusched: kube: jobs watch: " << status.status().message() << "; retrying\n";
    return -1;
  }
  if (*status == 410 || *status == 403 || *status == 404 || *status == 401) return *status;
  if (*status != 200) {
    std::cerr << "gpusched: kube: jobs watch: HTTP " << *status << " "
              << codec::DecodeStatus(error_body).message << "; retrying\n";
    return -1;
  }
  if (failure == 410) return 410;
  if (!error.empty()) {
    std::cerr << "gpusched: kube: jobs watch: " << error << "; retrying\n";
    return -1;
  }
  return 0;
}

}  // namespace gpusched::kube
