// gpusched serve: wires config, cluster source, state, service, routes and
// the HTTP server, then serves until SIGTERM.
#include <sys/stat.h>

#include <iostream>
#include <memory>

#include "gpusched/core/cluster_state.h"
#include "gpusched/core/extender_service.h"
#include "gpusched/policy/framework.h"
#include "gpusched/util/metrics.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/http/server.h"
#include "scheduler/kube/runtime.h"
#include "scheduler/queue/queue_wiring.h"
#include "scheduler/source/file_source.h"

namespace gpusched::cli {
namespace {

// Identity of the config file as seen through symlinks (a ConfigMap update
// swaps the ..data symlink): a change of inode, size or mtime means reload.
struct FileStamp {
  ino_t inode = 0;
  off_t size = 0;
  time_t mtime = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp Stamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return {};
  return {st.st_ino, st.st_size, st.st_mtime};
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

}  // namespace

int Serve(const std::vector<std::string>& args) {
  std::set<std::string> valued = {"config",   "cluster", "listen",       "threads",
                                  "tls-cert", "tls-key", "tls-client-ca"};
  valued.merge(kube::KubeValuedFlags());
  Flags flags(valued, kube::KubeSwitchFlags());
  auto has = [&flags](const std::string& f) { return flags.Has(f); };
  auto get = [&flags](const std::string& f) { return flags.Get(f); };
  if (auto s = flags.Parse(args); !s.ok()) {
    std::cerr << "gpusched serve: " << s.message() << "\n";
    return 2;
  }
  const std::string config_path = flags.Get("config", "config/scheduler-policy.json");
  auto config = codec::LoadConfigFile(config_path);
  if (!config.ok()) {
    std::cerr << "gpusched serve: " << config.status().message() << "\n";
    return 2;
  }
  auto fw = policy::Framework::Create(config->scoring);
  if (!fw.ok()) {
    std::cerr << "gpusched serve: config " << config_path << ": " << fw.status().message() << "\n";
    return 2;
  }
  if (flags.Has("cluster") == kube::KubeRequested(has)) {
    std::cerr << "gpusched serve: give one of --cluster FILE (a `kubectl get "
                 "nodes,pods -A -o "
                 "json` List), --kube (in-cluster) or --kubeconfig PATH\n";
    return 2;
  }
  ClusterState state(config->topology_templates);
  ExtenderService service(&state, std::shared_ptr<const policy::Framework>(std::move(*fw)));
  Metrics metrics;
  FileClusterSource source(flags.Get("cluster"));
  std::unique_ptr<kube::KubeRuntime> kube_rt;
  if (flags.Has("cluster")) {
    if (auto s = source.Start(&state, [&service](bool synced) { service.SetReady(synced); });
        !s.ok()) {
      std::cerr << "gpusched serve: " << s.message() << "\n";
      return 2;
    }
  } else {
    auto ko = kube::KubeOptionsFromFlags(has, get);
    auto rt = ko.ok() ? kube::StartKube(*ko, &state, &service, &metrics)
                      : absl::StatusOr<std::unique_ptr<kube::KubeRuntime>>(ko.status());
    if (!rt.ok()) {
      std::cerr << "gpusched serve: " << rt.status().message() << "\n";
      return 2;
    }
    kube_rt = *std::move(rt);
  }

  ClusterWriter* writer = &source;
  if (kube_rt) writer = kube_rt->writer();
  auto queue_mgr = queue::InstallQueue(&service, &state, writer, *config, &metrics);

  http::ServerOptions opt;
  const std::string listen = flags.Get("listen", config->server.listen);
  if (auto s = http::ParseListen(listen, &opt.host, &opt.port); !s.ok()) {
    std::cerr << "gpusched serve: " << s.message() << "\n";
    return 2;
  }
  opt.threads = config->server.threads;
  if (flags.Has("threads")) opt.threads = std::max(1, std::atoi(flags.Get("threads").c_str()));
  opt.max_body_bytes = config->server.max_body_bytes;
  opt.read_timeout = std::chrono::seconds(config->server.read_timeout_seconds);
  opt.idle_timeout = std::chrono::seconds(config->server.idle_timeout_seconds);
  opt.tls_cert = flags.Get("tls-cert");
  opt.tls_key = flags.Get("tls-key");
  opt.tls_client_ca = flags.Get("tls-client-ca");
  if (opt.tls_cert.empty() != opt.tls_key.empty()) {
    std::cerr << "gpusched serve: --tls-cert and --tls-key go together\n";
    return 2;
  }

  auto reload = [&service, &queue_mgr, config_path] {
    auto next = codec::LoadConfigFile(config_path);
    if (!next.ok()) {
      std::cerr << "gpusched: config reload rejected, keeping the old one: "
                << next.status().message() << "\n";
      return;
    }
    auto next_fw = policy::Framework::Create(next->scoring);
    if (!next_fw.ok()) {
      std::cerr << "gpusched: config reload rejected: " << next_fw.status().message() << "\n";
      return;
    }
    service.SetFramework(std::shared_ptr<const policy::Framework>(std::move(*next_fw)));
    queue_mgr->SetOptions(queue::QueueOptionsFrom(*next));
    std::cerr << "gpusched: config " << config_path << " reloaded\n";
  };
  opt.on_sighup = reload;
  opt.periodic.push_back({std::chrono::milliseconds(1000), queue::QueueTicker(queue_mgr.get())});
  auto stamp = std::make_shared<FileStamp>(Stamp(config_path));
  opt.periodic.push_back({std::chrono::milliseconds(2000), [stamp, config_path, reload] {
                            FileStamp now = Stamp(config_path);
                            if (now == *stamp) return;
                            *stamp = now;
                            reload();
                          }});

  AddClusterGauges(metrics, &state);
  http::Router router;
  http::HttpServer server(opt, &router, &metrics);
  http::RouteDeps deps;
  deps.service = &service;
  deps.metrics = &metrics;
  deps.ready = [&server] { return server.accepting(); };
  if (kube_rt) {
    deps.ready = [&server, r = kube_rt.get()] { return server.accepting() && r->ReadyFn()(); };
    deps.after_bind = kube_rt->AfterBindFn();
    deps.on_unplaced = kube_rt->UnplacedFn();
  }
  deps.debug_queues = [&queue_mgr] { return queue_mgr->Report(); };
  deps.debug_pod = [&queue_mgr](const std::string& ns, const std::string& name) {
    return queue_mgr->ExplainPod(ns, name);
  };
  http::AddExtenderRoutes(router, deps);
  if (auto s = server.Listen(); !s.ok()) {
    std::cerr << "gpusched serve: " << s.message() << "\n";
    return 1;
  }
  auto snap = state.Snapshot();
  const std::string scheme = opt.tls_cert.empty() ? "http" : "https";
  const std::string base = scheme + "://" + opt.host + ":" + std::to_string(server.port());
  std::cout << "gpusched: serving " << snap->nodes().size() << " nodes (" << snap->TotalGpus()
            << " GPUs) on " << base << "/scheduler\n"
            << "try:\n"
            << "  curl -s -XPOST -H 'Content-Type: application/json' "
               "--data @config/examples/filter-request.json "
            << base << "/scheduler/filter\n"
            << "  curl -s -XPOST -H 'Content-Type: application/json' "
               "--data @config/examples/prioritize-request.json "
            << base << "/scheduler/prioritize\n"
            << "  curl -s " << base << "/metrics\n"
            << std::flush;
  server.Run();
  std::cout << "gpusched: stopped\n";
  return 0;
}

}  // namespace gpusched::cli
