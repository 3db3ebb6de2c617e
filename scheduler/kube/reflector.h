// Reflector: the list+watch loop that keeps a cache of one Kubernetes
// resource current (client-go's reflector), for the watchers of
// scheduler/kube that own such a cache (JobDeadlines, QuotaObjectWatcher).
// The caller says what is listed (the resource's path), how a list page and
// a watch event decode into its item type, and what a complete list and
// each event do to its cache; the Reflector runs the loop on its thread:
//
//  - an optional gate before each list (a discovery, say) may list now,
//    back off, or wait;
//  - a paginated list (`limit`, `continue`) hands every item of every page
//    to `replace` at once, only when the whole list was read;
//  - a watch continues from the list's resourceVersion, with bookmarks
//    (which only move the resourceVersion); each ADDED, MODIFIED or DELETED
//    event goes to `apply` and counts in gpusched_kube_watch_events_total
//    {resource=<name>};
//  - 410 Gone (as the watch's status or an ERROR event) and 401/403/404 on
//    the watch list again (through the gate); a watch that ends normally is
//    resumed at once from the last resourceVersion;
//  - a list refused with 401/403/404 goes to `refused` when given (the
//    caller logs it and keeps nothing), and is asked again after
//    `refused_retry`; other failures are logged and back off exponentially
//    (`backoff_initial` doubling up to `backoff_max`), reset by a list or a
//    watch that succeeds;
//  - Stop cancels the watch in flight, wakes any wait and joins the thread.
//
// The hooks run on the Reflector's thread, one at a time, with no lock of
// the Reflector held. Thread-safe: Start (once) spawns the thread; Stop (or
// the destructor) joins it.
#ifndef GPUSCHED_KUBE_REFLECTOR_H_
#define GPUSCHED_KUBE_REFLECTOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/http_client.h"

namespace gpusched::kube {

struct ReflectorOptions {
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds backoff_initial{250};
  std::chrono::milliseconds backoff_max{30000};
  std::chrono::milliseconds refused_retry{300000};
  std::chrono::milliseconds request_timeout{10000};
  int64_t page_size = 500;
};

// What is listed and watched, and how the log and the metric name it.
struct ReflectorResource {
  std::string path;        // "/apis/batch/v1/jobs"
  std::string name;        // "jobs": log lines, the metric's resource label
  std::string log_prefix;  // "gpusched: kube: "
};

// What the gate says before a list.
struct ReflectorGate {
  enum class Next : uint8_t { kList, kBackoff, kWait };
  Next next = Next::kList;
  std::chrono::milliseconds wait{0};  // for kWait
};

// One list page / watch event of items of type Item, as the caller's codec
// decodes them.
template <typename Item>
struct ReflectorPage {
  std::vector<Item> items;
  std::string continue_token, resource_version;
};
template <typename Item>
struct ReflectorEvent {
  codec::WatchEvent::Type type = codec::WatchEvent::Type::kError;
  std::string resource_version;
  Item item;                 // added, modified, deleted
  codec::KubeStatus status;  // error
};

// The loop without the item type (reflector.cc); Reflector<Item> below is
// what callers use.
class ReflectorLoop {
 public:
  // One watch line's outcome.
  struct Line {
    enum class Kind : uint8_t { kApplied, kBookmark, kGone, kFailed };
    Kind kind = Kind::kApplied;
    std::string error;  // kFailed
  };
  struct Steps {
    std::function<ReflectorGate()> gate;  // empty: always list
    // Decodes one page into the caller's buffer; sets the page's continue
    // token and resourceVersion.
    std::function<absl::Status(std::string_view body, std::string* continue_token,
                               std::string* resource_version)>
        page;
    std::function<void()> discard;  // a list failed: drop the buffer
    std::function<void()> listed;   // every page read: replace from the buffer
    // Decodes and applies one watch line; moves `*resource_version`.
    std::function<Line(std::string& line, std::string* resource_version)> line;
    std::function<void(int status)> refused;  // empty: a refusal backs off
  };

  ReflectorLoop(KubeHttpClient* client, ReflectorResource resource, ReflectorOptions options,
                Metrics* metrics, Steps steps);
  ~ReflectorLoop();
  ReflectorLoop(const ReflectorLoop&) = delete;
  ReflectorLoop& operator=(const ReflectorLoop&) = delete;

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Counts one applied watch event (the line step calls it before it
  // applies the event).
  void CountEvent();

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Lists every page; the HTTP status of a failure (0: a transport or
  // decode error, logged unless refused), or 200.
  int List(std::string* resource_version);
  // Watches from `*resource_version` until the stream ends; 0: ended
  // normally (or cancelled), 410/401/403/404: list again, -1: an error
  // (logged).
  int Watch(std::string* resource_version);
  // Logs a failed request, with the server's message.
  void LogFailure(std::string_view what, const absl::StatusOr<HttpResult>& res) const;
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);
  // Sleeps up to `d`; false if stopping.
  bool Sleep(std::chrono::milliseconds d) ABSL_LOCKS_EXCLUDED(mu_);

  KubeHttpClient* client_;
  const ReflectorResource resource_;
  const ReflectorOptions options_;
  Metrics* metrics_;
  const Steps steps_;
  std::thread thread_;
  StreamCanceller canceller_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

template <typename Item>
class Reflector {
 public:
  struct Hooks {
    std::function<ReflectorGate()> gate;  // may be empty
    std::function<absl::StatusOr<ReflectorPage<Item>>(std::string_view body)> decode_page;
    std::function<absl::StatusOr<ReflectorEvent<Item>>(std::string_view line)> decode_event;
    // Every item of a complete list.
    std::function<void(std::vector<Item> items)> replace;
    // One added, modified or deleted item.
    std::function<void(codec::WatchEvent::Type type, Item item)> apply;
    std::function<void(int status)> refused;  // may be empty
  };

  Reflector(KubeHttpClient* client, ReflectorResource resource, ReflectorOptions options,
            Metrics* metrics, Hooks hooks)
      : hooks_(std::move(hooks)),
        loop_(client, std::move(resource), std::move(options), metrics, MakeSteps()) {}
  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }

 private:
  using Line = ReflectorLoop::Line;
  ReflectorLoop::Steps MakeSteps() {
    ReflectorLoop::Steps s;
    s.gate = hooks_.gate;
    s.refused = hooks_.refused;
    s.page = [this](std::string_view body, std::string* next, std::string* rv) {
      auto page = hooks_.decode_page(body);
      if (!page.ok()) return page.status();
      for (Item& item : page->items) buffer_.push_back(std::move(item));
      *next = std::move(page->continue_token);
      *rv = std::move(page->resource_version);
      return absl::OkStatus();
    };
    s.discard = [this] { buffer_.clear(); };
    s.listed = [this] { hooks_.replace(std::exchange(buffer_, {})); };
    s.line = [this](std::string& line, std::string* rv) { return OnLine(line, rv); };
    return s;
  }
  Line OnLine(std::string& line, std::string* rv) {
    using Type = codec::WatchEvent::Type;
    auto ev = hooks_.decode_event(line);
    if (!ev.ok()) return {Line::Kind::kFailed, std::string(ev.status().message())};
    if (ev->type == Type::kError) {
      return {ev->status.code == 410 ? Line::Kind::kGone : Line::Kind::kFailed,
              "HTTP " + std::to_string(ev->status.code) + " " + ev->status.message};
    }
    if (!ev->resource_version.empty()) *rv = std::move(ev->resource_version);
    if (ev->type == Type::kBookmark) return {Line::Kind::kBookmark, ""};
    loop_.CountEvent();
    hooks_.apply(ev->type, std::move(ev->item));
    return {Line::Kind::kApplied, ""};
  }

  const Hooks hooks_;
  std::vector<Item> buffer_;  // the list being read (the loop's thread only)
  ReflectorLoop loop_;        // last: its thread stops before the rest goes
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_REFLECTOR_H_
