#include "scheduler/kube/reflector.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "gpusched/util/strings.h"

namespace gpusched::kube {
namespace {

// The API refuses the resource: RBAC (401/403) or not served (404).
bool Refusal(int status) { return status == 401 || status == 403 || status == 404; }

}  // namespace

ReflectorLoop::ReflectorLoop(KubeHttpClient* client, ReflectorResource resource,
                             ReflectorOptions options, Metrics* metrics, Steps steps)
    : client_(client),
      resource_(std::move(resource)),
      options_(std::move(options)),
      metrics_(metrics),
      steps_(std::move(steps)) {}

ReflectorLoop::~ReflectorLoop() { Stop(); }

void ReflectorLoop::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void ReflectorLoop::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

void ReflectorLoop::CountEvent() {
  if (metrics_ == nullptr) return;
  metrics_->Inc("gpusched_kube_watch_events_total", "Watch events applied.",
                {{"resource", resource_.name}});
}

bool ReflectorLoop::stopping() const {
  absl::MutexLock l(&mu_);
  return stopping_;
}

bool ReflectorLoop::Sleep(std::chrono::milliseconds d) {
  absl::MutexLock l(&mu_);
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(d));
}

void ReflectorLoop::Run() {
  auto backoff = options_.backoff_initial;
  auto fail = [&] {
    const bool go_on = Sleep(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
    return go_on;
  };
  while (!stopping()) {
    const ReflectorGate gate = steps_.gate ? steps_.gate() : ReflectorGate{};
    if (gate.next == ReflectorGate::Next::kBackoff) {
      if (!fail()) return;
      continue;
    }
    if (gate.next == ReflectorGate::Next::kWait) {
      if (!Sleep(gate.wait)) return;
      continue;
    }
    std::string rv;
    const int status = List(&rv);
    if (status != 200 && Refusal(status) && steps_.refused) {
      steps_.refused(status);
      if (!Sleep(options_.refused_retry)) return;
      continue;
    }
    if (status != 200) {
      if (!fail()) return;
      continue;
    }
    backoff = options_.backoff_initial;
    while (true) {
      const int code = Watch(&rv);
      if (stopping()) return;
      if (code == 410 || Refusal(code)) break;  // expired, or refused: list again
      if (code == 0) {
        backoff = options_.backoff_initial;
        continue;
      }
      if (!fail()) return;
    }
  }
}

void ReflectorLoop::LogFailure(std::string_view what, const absl::StatusOr<HttpResult>& res) const {
  std::cerr << resource_.log_prefix << what << " " << resource_.name << ": "
            << (res.ok() ? StrCat("HTTP ", res->status, " ", codec::DecodeStatus(res->body).message)
                         : std::string(FromAbsl(res.status().message())))
            << "; retrying\n";
}

int ReflectorLoop::List(std::string* rv) {
  std::string token;
  do {
    std::string target = StrCat(resource_.path, "?limit=", options_.page_size);
    if (!token.empty()) StrAppend(&target, "&continue=", token);
    auto res = client_->Do("GET", target, "", "application/json", options_.request_timeout);
    if (!res.ok() || res->status != 200) {
      const int status = res.ok() ? res->status : 0;
      if (!(Refusal(status) && steps_.refused)) LogFailure("list", res);
      steps_.discard();
      return status;
    }
    if (auto st = steps_.page(res->body, &token, rv); !st.ok()) {
      std::cerr << resource_.log_prefix << "list " << resource_.name << ": " << st.message()
                << "; retrying\n";
      steps_.discard();
      return 0;
    }
  } while (!token.empty());
  steps_.listed();
  return 200;
}

int ReflectorLoop::Watch(std::string* rv) {
  const std::string target =
      StrCat(resource_.path, "?watch=1&allowWatchBookmarks=true&resourceVersion=", *rv,
             "&timeoutSeconds=", options_.watch_timeout_seconds);
  Line failure{Line::Kind::kApplied, ""};
  auto on_line = [&](std::string& line) {
    Line l = steps_.line(line, rv);
    if (l.kind == Line::Kind::kGone || l.kind == Line::Kind::kFailed) {
      failure = std::move(l);
      return false;
    }
    return true;
  };
  std::string error_body;
  auto status = client_->Stream(target, std::chrono::seconds(options_.watch_timeout_seconds + 30),
                                on_line, &error_body, &canceller_);
  if (!status.ok()) {
    if (status.status().code() == absl::StatusCode::kCancelled) return 0;
    std::cerr << resource_.log_prefix << "watch " << resource_.name << ": "
              << status.status().message() << "; retrying\n";
    return -1;
  }
  if (*status == 410 || Refusal(*status)) return *status;
  if (*status != 200) {
    LogFailure("watch", HttpResult{*status, std::move(error_body)});
    return -1;
  }
  if (failure.kind == Line::Kind::kGone) return 410;
  if (failure.kind == Line::Kind::kFailed) {
    std::cerr << resource_.log_prefix << "watch " << resource_.name << ": " << failure.error
              << "; retrying\n";
    return -1;
  }
  return 0;
}

}  // namespace gpusched::kube
