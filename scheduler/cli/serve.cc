// gpusched serve: wires config, cluster source, state, service, routes and
// the HTTP server (the extender port and, with --health-listen, the plain
// probe port), then serves until SIGTERM. Pieces: ServerOptionsFrom (flags
// over the config's server section), ConfigReloader (live reload), Serve
// (wiring, in steps: LoadServeStart, StartClusterSource, StartQueuePositions,
// StartQuotaObjects, ServeRouteDeps).

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/policy/framework.h"
#include "gpusched/util/metrics.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/running_config_codec.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/http/server.h"
#include "scheduler/kube/history_store.h"
#include "scheduler/kube/queue_status.h"
#include "scheduler/kube/quota_objects.h"
#include "scheduler/kube/quota_status.h"
#include "scheduler/kube/runtime.h"
#include "scheduler/queue/pod_devices.h"
#include "scheduler/queue/queue_wiring.h"
#include "scheduler/source/file_source.h"

namespace gpusched::cli {
namespace {

// --NAME as an integer in [min, max]; unchanged `*out` if the flag is absent.
absl::Status IntFlag(const Flags& flags, const std::string& name, int64_t min, int64_t max,
                     int64_t* out) {
  if (!flags.Has(name)) return absl::OkStatus();
  const std::string text = flags.Get(name);
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < min || v > max) {
    return absl::InvalidArgumentError(
        StrCat("--", name, ": must be an integer in [", min, ", ", max, "], got '", text, "'"));
  }
  *out = v;
  return absl::OkStatus();
}

void AddClusterGauges(Metrics& metrics, ClusterState* state) {
  metrics.AddCollector([state](GaugeWriter& w) {
    auto snap = state->Snapshot();
    int64_t gpus = 0, free_whole = 0, conflicts = 0, bytes = 0;
    for (const auto& n : snap->nodes()) {
      gpus += n->healthy_count();
      free_whole += n->free_count();
      conflicts += n->device_conflicts;
      bytes += static_cast<int64_t>(n->MemoryBytes());
    }
    w.Gauge("gpusched_cluster_nodes", "Nodes in the cluster view.", {},
            static_cast<double>(snap->nodes().size()));
    w.Gauge("gpusched_cluster_gpus", "Healthy GPUs in the cluster view.", {},
            static_cast<double>(gpus));
    w.Gauge("gpusched_gpus_allocated", "GPUs allocated (shared devices count fractionally).", {},
            snap->AllocatedGpuMilli() / 1000.0);
    w.Gauge("gpusched_gpus_free_whole", "Healthy GPUs with nothing on them.", {},
            static_cast<double>(free_whole));
    w.Gauge("gpusched_device_conflicts", "Device claims that could not all be honoured.", {},
            static_cast<double>(conflicts));
    w.Gauge("gpusched_cache_bytes", "Approximate bytes held by the node cache.", {},
            static_cast<double>(bytes));
    w.Gauge("gpusched_snapshot_generation", "Generation of the published snapshot.", {},
            static_cast<double>(snap->generation()));
  });
}

// The server settings from the config's server section, overridden by
// flags. Errors name the flag or field.
absl::StatusOr<http::ServerOptions> ServerOptionsFrom(const Flags& flags,
                                                      const ServerConfig& server) {
  http::ServerOptions opt;
  const std::string listen = flags.Get("listen", server.listen);
  GPUSCHED_RETURN_IF_ERROR(http::ParseListen(listen, &opt.host, &opt.port));
  opt.health_listen = flags.Get("health-listen", server.health_listen);
  if (!opt.health_listen.empty()) {
    std::string host;
    uint16_t port = 0;
    if (auto s = http::ParseListen(opt.health_listen, &host, &port); !s.ok()) {
      return absl::InvalidArgumentError(StrCat("--health-listen: ", s.message()));
    }
  }
  opt.threads = server.threads;
  opt.max_body_bytes = server.max_body_bytes;
  opt.max_connections = server.max_connections;
  opt.max_inflight_body_bytes = server.max_inflight_body_bytes;
  int64_t v = 0;
  if (auto s = IntFlag(flags, "threads", 1, 64, &v); !s.ok()) return s;
  if (flags.Has("threads")) opt.threads = static_cast<int>(v);
  if (auto s = IntFlag(flags, "max-connections", 1, 1 << 20, &v); !s.ok()) return s;
  if (flags.Has("max-connections")) opt.max_connections = static_cast<int>(v);
  if (auto s = IntFlag(flags, "max-body-bytes", 1024, int64_t{1} << 32, &v); !s.ok()) return s;
  if (flags.Has("max-body-bytes")) opt.max_body_bytes = v;
  if (auto s = IntFlag(flags, "max-inflight-body-bytes", 1024, int64_t{1} << 40, &v); !s.ok()) {
    return s;
  }
  if (flags.Has("max-inflight-body-bytes")) opt.max_inflight_body_bytes = v;
  if (opt.max_inflight_body_bytes < opt.max_body_bytes) {
    return absl::InvalidArgumentError(
        StrCat("--max-inflight-body-bytes: must be at least the body limit (", opt.max_body_bytes,
               " bytes), got ", opt.max_inflight_body_bytes));
  }
  opt.read_timeout = std::chrono::seconds(server.read_timeout_seconds);
  opt.idle_timeout = std::chrono::seconds(server.idle_timeout_seconds);
  opt.tls_cert = flags.Get("tls-cert");
  opt.tls_key = flags.Get("tls-key");
  opt.tls_client_ca = flags.Get("tls-client-ca");
  if (opt.tls_cert.empty() != opt.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!opt.tls_client_ca.empty() && opt.tls_cert.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  return opt;
}

bool SameTemplates(const std::vector<TopologyTemplate>& a, const std::vector<TopologyTemplate>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].match != b[i].match || a[i].gpus != b[i].gpus ||
        a[i].matrix != b[i].matrix || a[i].uniform != b[i].uniform) {
      return false;
    }
  }
  return true;
}

// JSON paths of the settings in `next` that differ from what runs and cannot
// change without a restart.
std::vector<std::string> RestartFields(const http::ServerOptions& running,
                                       const http::ServerOptions& next,
                                       const std::vector<TopologyTemplate>& running_templates,
                                       const std::vector<TopologyTemplate>& next_templates) {
  std::vector<std::string> out;
  if (running.host != next.host || running.port != next.port) out.push_back("server.listen");
  if (running.health_listen != next.health_listen) out.push_back("server.healthListen");
  if (running.threads != next.threads) out.push_back("server.threads");
  if (running.max_body_bytes != next.max_body_bytes) out.push_back("server.maxBodyBytes");
  if (running.max_connections != next.max_connections) out.push_back("server.maxConnections");
  if (running.max_inflight_body_bytes != next.max_inflight_body_bytes) {
    out.push_back("server.maxInflightBodyBytes");
  }
  if (running.read_timeout != next.read_timeout) out.push_back("server.readTimeoutSeconds");
  if (running.idle_timeout != next.idle_timeout) out.push_back("server.idleTimeoutSeconds");
  if (!SameTemplates(running_templates, next_templates)) out.push_back("topologyTemplates");
  return out;
}

// Applies config file changes to the running process: scoring (a new
// Framework), quotas, reclaim and gang options (the queue manager) take
// effect at once; server settings and topologyTemplates (baked into the
// listeners and the cluster view at start) are reported as needing a
// restart. One log line per reload. Triggers: SIGHUP and a change of the
// file's content (the file watcher reads it every period and compares it
// with what it read last: an in-place edit of the same size within the
// same second leaves inode, size and mtime alone, never the content); both
// may run on different I/O threads.
class ConfigReloader {
 public:
  ConfigReloader(std::string path, std::string text, const SchedulerConfig& config,
                 const Flags* flags, http::ServerOptions running, ExtenderService* service,
                 queue::QueueConfigApplier* queue)
      : path_(std::move(path)),
        flags_(flags),
        running_(std::move(running)),
        running_templates_(config.topology_templates),
        service_(service),
        queue_(queue),
        read_text_(text),
        applied_text_(std::move(text)) {}

  // SIGHUP: reloads even if the file's content did not change.
  void OnSignal() { Reload("SIGHUP", true); }
  // Periodic: reloads if the file's content changed since it was last read.
  void OnTick() { Reload("file change", false); }

  codec::RunningConfig Running() const {
    absl::MutexLock l(&mu_);
    codec::RunningConfig c;
    c.file = path_;
    c.applied_json = applied_text_;
    c.reloads = reloads_;
    c.last_error = last_error_;
    c.listen = StrCat(running_.host, ":", running_.port);
    c.health_listen = running_.health_listen;
    c.threads = running_.threads;
    c.max_body_bytes = running_.max_body_bytes;
    c.max_connections = running_.max_connections;
    c.max_inflight_body_bytes = running_.max_inflight_body_bytes;
    c.read_timeout_seconds = static_cast<int>(running_.read_timeout.count());
    c.idle_timeout_seconds = static_cast<int>(running_.idle_timeout.count());
    c.tls = !running_.tls_cert.empty();
    c.client_certificates = !running_.tls_client_ca.empty();
    c.restart_pending = restart_pending_;
    return c;
  }

 private:
  void Reload(const char* trigger, bool forced) {
    absl::MutexLock l(&mu_);
    std::ifstream in(path_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (!in) {
      // Reported once until the file is readable again (or on SIGHUP).
      if (!forced && read_failed_) return;
      read_failed_ = true;
      return Log(trigger, StrCat("reload rejected, keeping the old one: cannot read"));
    }
    read_failed_ = false;
    if (!forced && text == read_text_) return;
    read_text_ = text;
    if (text == applied_text_) {
      if (forced) Log(trigger, "unchanged, nothing to apply");
      return;
    }
    auto next = codec::DecodeConfig(text);
    auto next_fw = next.ok() ? policy::Framework::Create(next->scoring)
                             : absl::StatusOr<std::unique_ptr<policy::Framework>>(next.status());
    auto next_server = next.ok() ? ServerOptionsFrom(*flags_, next->server)
                                 : absl::StatusOr<http::ServerOptions>(next.status());
    for (const absl::Status& s : {next.status(), next_fw.status(), next_server.status()}) {
      if (s.ok()) continue;
      last_error_ = std::string(s.message());
      return Log(trigger, StrCat("reload rejected, keeping the old one: ", s.message()));
    }
    service_->SetFramework(std::shared_ptr<const policy::Framework>(std::move(*next_fw)));
    queue_->SetFile(*next);
    applied_text_ = text;
    last_error_.clear();
    ++reloads_;
    restart_pending_ =
        RestartFields(running_, *next_server, running_templates_, next->topology_templates);
    std::string line = "reloaded: applied scoring, quotas, reclaim, gang";
    if (!restart_pending_.empty()) {
      line += StrCat("; needs a restart: ", absl::StrJoin(restart_pending_, ", "));
    }
    Log(trigger, line);
  }

  void Log(const char* trigger, const std::string& what) const {
    std::cerr << StrCat("gpusched: config ", path_, " (", trigger, "): ", what, "\n") << std::flush;
  }

  const std::string path_;
  const Flags* flags_;
  const http::ServerOptions running_;
  const std::vector<TopologyTemplate> running_templates_;
  ExtenderService* service_;
  queue::QueueConfigApplier* queue_;
  mutable absl::Mutex mu_;
  std::string read_text_ ABSL_GUARDED_BY(mu_);  // the file as last read (applied or not)
  bool read_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::string applied_text_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  int64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> restart_pending_ ABSL_GUARDED_BY(mu_);
};

// Reads and decodes the config file; `*text` receives its bytes.
absl::StatusOr<SchedulerConfig> ReadConfig(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("config ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  *text = ss.str();
  auto c = codec::DecodeConfig(*text);
  if (!c.ok()) {
    return absl::InvalidArgumentError(StrCat("config ", path, ": ", c.status().message()));
  }
  return c;
}

void PrintBanner(const http::ServerOptions& opt, const http::HttpServer& server,
                 const ClusterState& state) {
  auto snap = state.Snapshot();
  const std::string scheme = opt.tls_cert.empty() ? "http" : "https";
  const std::string base = scheme + "://" + opt.host + ":" + std::to_string(server.port());
  std::cout << "gpusched: serving " << snap->nodes().size() << " nodes (" << snap->TotalGpus()
            << " GPUs) on " << base << "/scheduler\n";
  if (server.health_port() != 0) {
    std::cout << "gpusched: probes (/healthz, /readyz) on plain http port " << server.health_port()
              << "\n";
  }
  // The sample requests, each once (scripts/demo.sh prints none of its own):
  // the bodies in config/examples/ name pods of config/demo-cluster.json.
  std::cout << "try (request bodies in config/examples/):\n";
  for (const char* verb : {"filter", "prioritize", "preempt", "bind"}) {
    std::cout << "  curl -s -XPOST -H 'Content-Type: application/json' --data @config/examples/"
              << verb << "-request.json " << base << "/scheduler/" << verb << "\n";
  }
  std::cout << "  curl -s " << base << "/debug/queues\n"
            << "  curl -s " << base << "/debug/pods/team-a/bert-xl-0\n"
            << "  curl -s " << base << "/metrics\n"
            << std::flush;
}

}  // namespace

std::string ServeUsage() {
  return "usage: gpusched serve [flags]\n"
         "\n"
         "Runs the HTTP extender. Give exactly one cluster source:\n"
         "  --cluster FILE            a `kubectl get nodes,pods -A -o json` List (demo, tests)\n"
         "  --kube                    the Kubernetes API, in-cluster service account\n"
         "  --kubeconfig PATH         the Kubernetes API through a kubeconfig\n"
         "    --context NAME          kubeconfig context\n"
         "    --kube-qps N, --kube-burst N   API client rate limits\n"
         "    --leader-elect          run as one of several replicas (Lease election)\n"
         "    --lease-name, --lease-namespace, --identity, --lease-duration,\n"
         "    --renew-deadline, --retry-period   leader election settings\n"
         "\n"
         "Config and listeners:\n"
         "  --config PATH             policy config (default config/scheduler-policy.json);\n"
         "                            reloaded on change and on SIGHUP\n"
         "  --listen HOST:PORT        extender port (default: server.listen, 127.0.0.1:8888)\n"
         "  --health-listen HOST:PORT plain-HTTP port serving only /healthz and /readyz\n"
         "                            (never TLS; for kubelet probes)\n"
         "  --threads N               I/O threads, 1..64 (default: server.threads, 2)\n"
         "\n"
         "TLS (extender port only):\n"
         "  --tls-cert PEM, --tls-key PEM   serve HTTPS\n"
         "  --tls-client-ca PEM       require client certificates signed by this CA (mTLS);\n"
         "                            /metrics and /debug/* are then served only to them\n"
         "\n"
         "Limits (past a cap: 503 with Retry-After):\n"
         "  --max-connections N       concurrent connections (default 128)\n"
         "  --max-body-bytes N        one request body (default 33554432, 32 MiB; 413 past it)\n"
         "  --max-inflight-body-bytes N   request bodies in flight, all connections together\n"
         "                            (default 33554432, 32 MiB)\n";
}

namespace {

// serve's flags: those taking a value (the Kubernetes API's included) and
// the API's switches.
Flags ServeFlags() {
  std::set<std::string> valued = {"config",
                                  "cluster",
                                  "listen",
                                  "health-listen",
                                  "threads",
                                  "tls-cert",
                                  "tls-key",
                                  "tls-client-ca",
                                  "max-connections",
                                  "max-body-bytes",
                                  "max-inflight-body-bytes"};
  valued.merge(kube::KubeValuedFlags());
  return Flags(std::move(valued), kube::KubeSwitchFlags(), ServeUsage());
}

// What serve starts from: the config file (path, bytes, decoded), the
// scoring framework it names and the server settings (flags over its
// server section).
struct ServeStart {
  std::string config_path;
  std::string config_text;
  SchedulerConfig config;
  std::unique_ptr<policy::Framework> framework;
  http::ServerOptions server;
};

// Reads the config, builds the framework and the server settings, and
// checks that exactly one cluster source is given. Every error is a usage
// error (exit 2); its message is what serve prints.
absl::StatusOr<ServeStart> LoadServeStart(const Flags& flags) {
  ServeStart start;
  start.config_path = flags.Get("config", "config/scheduler-policy.json");
  GPUSCHED_ASSIGN_OR_RETURN(start.config, ReadConfig(start.config_path, &start.config_text));
  auto fw = policy::Framework::Create(start.config.scoring);
  if (!fw.ok()) {
    return absl::InvalidArgumentError(
        StrCat("config ", start.config_path, ": ", fw.status().message()));
  }
  start.framework = *std::move(fw);
  GPUSCHED_ASSIGN_OR_RETURN(start.server, ServerOptionsFrom(flags, start.config.server));
  if (flags.Has("cluster") ==
      kube::KubeRequested([&flags](const std::string& f) { return flags.Has(f); })) {
    return absl::InvalidArgumentError(
        "give one of --cluster FILE (a `kubectl get nodes,pods -A -o json` List), --kube "
        "(in-cluster) or --kubeconfig PATH");
  }
  return start;
}

// Starts the cluster source the flags name: the --cluster file (`file`) or
// the Kubernetes API. Returns the API's runtime, or nullptr for the file.
absl::StatusOr<std::unique_ptr<kube::KubeRuntime>> StartClusterSource(const Flags& flags,
                                                                      FileClusterSource* file,
                                                                      ClusterState* state,
                                                                      ExtenderService* service,
                                                                      Metrics* metrics) {
  if (flags.Has("cluster")) {
    GPUSCHED_RETURN_IF_ERROR(
        file->Start(state, [service](bool synced) { service->SetReady(synced); }));
    return nullptr;
  }
  GPUSCHED_ASSIGN_OR_RETURN(
      kube::KubeOptions options,
      kube::KubeOptionsFromFlags([&flags](const std::string& f) { return flags.Has(f); },
                                 [&flags](const std::string& f) { return flags.Get(f); }));
  return kube::StartKube(options, state, service, metrics);
}

// With the API (`rt` set), the leader keeps each pending pod's queue
// position on the pod; nullptr without it.
std::unique_ptr<kube::QueueStatusPublisher> StartQueuePositions(kube::KubeRuntime* rt,
                                                                queue::QueueManager* queue,
                                                                Metrics* metrics) {
  if (rt == nullptr) return nullptr;
  return std::make_unique<kube::QueueStatusPublisher>(
      rt->client(), [queue](int32_t n) { return queue->Positions(n); },
      [rt] { return rt->leader() && rt->synced(); }, kube::QueueStatusPublisher::Options{},
      metrics);
}

// With the API: the runtime history kept across restarts in a ConfigMap of
// gpusched's namespace, read now into the queue and written by the leader;
// nullptr without it.
std::unique_ptr<kube::HistoryStore> StartHistoryStore(kube::KubeRuntime* rt,
                                                      queue::QueueManager* queue,
                                                      Metrics* metrics) {
  if (rt == nullptr) return nullptr;
  kube::HistoryStoreOptions o;
  o.ns = rt->own_namespace();
  kube::HistoryStore::Inputs in;
  in.history = [queue](uint64_t* version) { return queue->HistoryToPersist(version); };
  in.may_write = [rt] { return rt->leader() && rt->synced(); };
  auto store = std::make_unique<kube::HistoryStore>(rt->client(), o, std::move(in), metrics);
  queue->LoadHistory(store->Load());
  store->Start();
  return store;
}

// With the API: GPUQuota objects are the quota source while their CRD is
// installed, and the leader keeps their status current. Both unset without
// it. The writer goes first (members are destroyed in reverse order).
struct QuotaObjectsRuntime {
  std::unique_ptr<kube::QuotaObjectWatcher> watcher;
  std::unique_ptr<kube::QuotaStatusWriter> status;
};

QuotaObjectsRuntime StartQuotaObjects(kube::KubeRuntime* rt, queue::QueueConfigApplier* quotas,
                                      queue::QueueManager* queue, Metrics* metrics) {
  QuotaObjectsRuntime out;
  if (rt == nullptr) return out;
  out.watcher = std::make_unique<kube::QuotaObjectWatcher>(rt->client(),
                                                           kube::QuotaObjectsOptions{}, metrics);
  out.watcher->Start([quotas](const auto& objects) { quotas->SetObjects(objects); });
  kube::QuotaStatusWriter::Inputs in;
  in.resolved = [w = out.watcher.get()] { return w->Current(); };
  in.report = [queue] { return queue->Report({"", 1}); };
  in.may_write = [rt] { return rt->leader() && rt->synced(); };
  out.status = std::make_unique<kube::QuotaStatusWriter>(
      rt->client(), std::move(in), kube::QuotaStatusWriter::Options{}, metrics);
  return out;
}

// What the routes call: the service, readiness (the server accepting; with
// the API also the runtime ready and the quota objects settled), the
// unplaced-pod Event and the debug pages.
http::RouteDeps ServeRouteDeps(ExtenderService* service, Metrics* metrics,
                               const http::HttpServer* server, kube::KubeRuntime* rt,
                               const kube::QuotaObjectWatcher* quota_objects,
                               queue::QueueManager* queue, const ClusterState* state,
                               const ConfigReloader* reloader) {
  http::RouteDeps deps;
  deps.service = service;
  deps.metrics = metrics;
  deps.ready = [server] { return server->accepting(); };
  if (rt != nullptr) {
    deps.ready = [server, rt, w = quota_objects] {
      return server->accepting() && rt->ReadyFn()() && w->settled();
    };
    deps.on_unplaced = rt->UnplacedFn();
  }
  deps.debug_queues = [queue](const auto&... query) { return queue->Report(query...); };
  deps.debug_pod = [queue, state](const std::string& ns, const std::string& name) {
    return queue::ExplainPodWithDevices(*queue, *state, ns, name);
  };
  deps.debug_config = [reloader] { return codec::EncodeRunningConfig(reloader->Running()); };
  return deps;
}

}  // namespace

int Serve(const std::vector<std::string>& args) {
  Flags flags = ServeFlags();
  auto fail = [](const auto& message, int code) {
    std::cerr << "gpusched serve: " << message << "\n";
    return code;
  };
  if (auto exit = flags.ParseOrExit("serve", args)) return *exit;
  auto start = LoadServeStart(flags);
  if (!start.ok()) return fail(start.status().message(), 2);
  const SchedulerConfig& config = start->config;
  http::ServerOptions& opt = start->server;

  ClusterState state(config.topology_templates);
  // Each conflicting device claim once (gpusched_device_conflicts counts them).
  state.SetConflictLog([](const std::string& node, const std::string& what) {
    std::cerr << StrCat("gpusched: node ", node, ": device conflict: ", what, "\n");
  });
  ExtenderService service(&state,
                          std::shared_ptr<const policy::Framework>(std::move(start->framework)));
  Metrics metrics;
  FileClusterSource source(flags.Get("cluster"));
  auto started = StartClusterSource(flags, &source, &state, &service, &metrics);
  if (!started.ok()) return fail(started.status().message(), 2);
  std::unique_ptr<kube::KubeRuntime> kube_rt = *std::move(started);
  // Evictions leave the tick at once and go out on a thread of their own.
  queue::AsyncClusterWriter writer(kube_rt ? kube_rt->writer() : &source);
  auto queue_mgr = queue::InstallQueue(&service, &state, &writer, config, &metrics);
  auto history = StartHistoryStore(kube_rt.get(), queue_mgr.get(), &metrics);
  queue::TickThread ticker(queue_mgr.get(), std::chrono::milliseconds(1000));
  queue::SourceSyncThread source_sync(queue_mgr.get(), &state);
  queue::ReclaimPlannerThread planner(queue_mgr.get());
  // The first refresh 2 s after the start (the file source has loaded; an
  // API list still going on makes it a short one), then every 10 s.
  queue::EstimateThread estimates(queue_mgr.get(), std::chrono::seconds(2),
                                  std::chrono::seconds(10), std::chrono::milliseconds(1000));
  auto positions = StartQueuePositions(kube_rt.get(), queue_mgr.get(), &metrics);

  queue::QueueConfigApplier quotas(queue_mgr.get(), config, start->config_path,
                                   [](const std::string& line) {
                                     std::cerr << "gpusched: " << line << "\n" << std::flush;
                                   });
  quotas.SetFile(config);
  QuotaObjectsRuntime quota_objects =
      StartQuotaObjects(kube_rt.get(), &quotas, queue_mgr.get(), &metrics);
  ConfigReloader reloader(start->config_path, start->config_text, config, &flags, opt, &service,
                          &quotas);
  opt.on_sighup = [&reloader] { reloader.OnSignal(); };
  opt.periodic.push_back({std::chrono::milliseconds(2000), [&reloader] { reloader.OnTick(); }});

  AddClusterGauges(metrics, &state);
  http::Router router;
  http::Router health_router;
  http::HttpServer server(opt, &router, &metrics, &health_router);
  if (kube_rt) service.SetBindWriteBack(kube_rt->AfterBindFn());
  const http::RouteDeps deps =
      ServeRouteDeps(&service, &metrics, &server, kube_rt.get(), quota_objects.watcher.get(),
                     queue_mgr.get(), &state, &reloader);
  http::AddProbeRoutes(health_router, deps);
  http::AddExtenderRoutes(router, deps);
  if (auto s = server.Listen(); !s.ok()) return fail(s.message(), 1);
  PrintBanner(opt, server, state);
  server.Run();
  std::cout << "gpusched: stopped\n";
  return 0;
}

}  // namespace gpusched::cli
