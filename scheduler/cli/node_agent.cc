// gpusched node-agent: one DaemonSet pod per GPU node. Runs the node agent
// (scheduler/agent: the kubelet device plugin for nvidia.com/gpu and
// gpusched.io/gpu-shares, the PodResources reconciliation of
// gpusched.io/gpu-ids) and the topology job (topology_agent.cc), with the
// Kubernetes API through scheduler/kube (in-cluster, or --kubeconfig).
// Runs until SIGTERM, or one round of each job with --once.
#include "scheduler/agent/node_agent.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "gpusched/util/strings.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/cli/topology_publish.h"
#include "scheduler/http/metrics_server.h"
#include "scheduler/kube/node_pod_client.h"
#include "scheduler/kube/runtime.h"

namespace gpusched::cli {
namespace {

constexpr char kUsage[] =
    "usage: gpusched node-agent --node NAME [flags]\n"
    "\n"
    "On a GPU node: serves the kubelet device plugin API for nvidia.com/gpu and\n"
    "gpusched.io/gpu-shares, handing each container the devices gpusched recorded\n"
    "(gpusched.io/gpu-ids); corrects and confirms each GPU pod's record from the\n"
    "kubelet's PodResources API; publishes the GPU link matrix.\n"
    "  --node NAME                 this Node (required; the DaemonSet passes spec.nodeName)\n"
    "  --no-device-plugin          reconcile and publish only (NVIDIA's device plugin\n"
    "                              allocates)\n"
    "  --cdi                       answer CDI device names (nvidia.com/gpu=<UUID>)\n"
    "                              instead of NVIDIA_VISIBLE_DEVICES\n"
    "  --shares-per-gpu N          gpusched.io/gpu-shares per GPU (default 10; 0: none)\n"
    "  --device-plugin-dir DIR     default /var/lib/kubelet/device-plugins\n"
    "  --pod-resources-socket P    default /var/lib/kubelet/pod-resources/kubelet.sock\n"
    "  --reconcile-interval D      PodResources reconciliation (default 5s)\n"
    "  --inventory-interval D      nvidia-smi --query-gpu (default 5s)\n"
    "  --interval D                topology publication (default 300s)\n"
    "  --nvidia-smi PATH           the nvidia-smi binary (default: on PATH)\n"
    "  --query-input FILE          read --query-gpu CSV from FILE instead\n"
    "  --input FILE                read `nvidia-smi topo -m` output from FILE instead\n"
    "  --metrics-port N            serve /metrics (Prometheus text) and /healthz on port N\n"
    "                              (default 9405; 0: no HTTP listener)\n"
    "  --metrics-address ADDR      the address to listen on (default 0.0.0.0; :: for IPv6)\n"
    "  --once                      one round of each job and exit (0 ok, 1 failed)\n"
    "  --kubeconfig PATH           the API through a kubeconfig (default: in-cluster)\n"
    "  --context NAME              kubeconfig context\n";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

absl::StatusOr<std::chrono::milliseconds> Interval(const Flags& f, const std::string& name,
                                                   const std::string& fallback) {
  auto d = kube::ParseDuration(f.Get(name, fallback));
  if (!d.ok() || d->count() < 100) {
    return absl::InvalidArgumentError(StrCat("--", name, " must be a duration of at least 100ms"));
  }
  return *d;
}

absl::StatusOr<agent::NodeAgentOptions> Options(const Flags& f) {
  agent::NodeAgentOptions o;
  o.node = f.Get("node");
  if (o.node.empty()) return absl::InvalidArgumentError("--node NAME is required");
  o.device_plugin = !f.Has("no-device-plugin");
  o.cdi = f.Has("cdi");
  if (!absl::SimpleAtoi(f.Get("shares-per-gpu", "10"), &o.shares_per_gpu) || o.shares_per_gpu < 0 ||
      o.shares_per_gpu > 100) {
    return absl::InvalidArgumentError("--shares-per-gpu must be 0..100");
  }
  o.device_plugin_dir = f.Get("device-plugin-dir", o.device_plugin_dir);
  o.pod_resources_socket = f.Get("pod-resources-socket", o.pod_resources_socket);
  o.nvidia_smi = f.Get("nvidia-smi", o.nvidia_smi);
  o.query_input = f.Get("query-input");
  o.topo_input = f.Get("input");
  auto r = Interval(f, "reconcile-interval", "5s");
  if (!r.ok()) return r.status();
  o.reconcile_interval = *r;
  auto i = Interval(f, "inventory-interval", "5s");
  if (!i.ok()) return i.status();
  o.inventory_interval = *i;
  return o;
}

// --once: inventory, registration, reconciliation and topology, once each.
int RunOnce(agent::NodeAgent& node_agent, kube::KubeHttpClient& client,
            const agent::NodeAgentOptions& o) {
  bool ok = true;
  auto report = [&ok](const char* job, const absl::Status& s) {
    if (s.ok()) return;
    ok = false;
    std::cerr << "gpusched node-agent: " << job << ": " << s.message() << "\n";
  };
  report("inventory", node_agent.RefreshInventory());
  if (o.device_plugin) report("device plugin", node_agent.RegisterTick());
  auto stats = node_agent.ReconcileOnce();
  report("reconcile", stats.status());
  if (stats.ok()) {
    std::cout << "gpusched node-agent: " << stats->kubelet_pods << " GPU pods, "
              << stats->corrections << " corrected, " << stats->confirmations << " confirmed\n";
  }
  report("topology", PublishTopologyOnce(client, o.node, o.topo_input, o.nvidia_smi));
  return ok ? 0 : 1;
}

// The metrics listener (--metrics-port, --metrics-address): null when the
// port is 0 or on error (*failed set, the error printed). A SIGTERM it
// catches stops the agent too.
std::unique_ptr<http::MetricsServer> StartMetrics(const Flags& f, Metrics& metrics,
                                                  agent::NodeAgent& node_agent, bool* failed) {
  int port = 0;
  if (!absl::SimpleAtoi(f.Get("metrics-port", "9405"), &port) || port < 0 || port > 65535) {
    std::cerr << "gpusched node-agent: --metrics-port must be 0..65535\n";
    *failed = true;
    return nullptr;
  }
  if (port == 0) return nullptr;
  metrics.AddCollector([&node_agent](GaugeWriter& w) { node_agent.CollectMetrics(w); });
  auto server = std::make_unique<http::MetricsServer>(f.Get("metrics-address", "0.0.0.0"),
                                                      static_cast<uint16_t>(port), &metrics);
  if (absl::Status s = server->Start([] { g_stop = true; }); !s.ok()) {
    std::cerr << "gpusched node-agent: metrics: " << s.message() << "\n";
    *failed = true;
    return nullptr;
  }
  std::cerr << "gpusched node-agent: metrics on " << f.Get("metrics-address", "0.0.0.0") << ":"
            << server->port() << " (/metrics)\n";
  return server;
}

}  // namespace

int NodeAgent(const std::vector<std::string>& args) {
  Flags flags({"node", "shares-per-gpu", "device-plugin-dir", "pod-resources-socket",
               "reconcile-interval", "inventory-interval", "interval", "nvidia-smi", "query-input",
               "input", "kubeconfig", "context", "metrics-port", "metrics-address"},
              {"no-device-plugin", "cdi", "once"}, kUsage);
  if (auto exit_code = flags.ParseOrExit("node-agent", args)) return *exit_code;
  auto options = Options(flags);
  auto topology_every = kube::ParseDuration(flags.Get("interval", "300s"));
  if (!options.ok() || !topology_every.ok() || topology_every->count() < 1000) {
    std::cerr << "gpusched node-agent: "
              << (options.ok() ? "--interval must be a duration of at least 1s"
                               : options.status().message())
              << "\n";
    return 2;
  }
  kube::KubeOptions ko;
  ko.kubeconfig = flags.Get("kubeconfig");
  ko.context = flags.Get("context");
  ko.in_cluster = ko.kubeconfig.empty();
  ko.client.qps = 5;
  ko.client.burst = 20;
  auto client = kube::MakeClient(ko);
  if (!client.ok()) {
    std::cerr << "gpusched node-agent: " << client.status().message() << "\n";
    return 2;
  }
  Metrics metrics;
  kube::EventRecorder::Options eo;
  eo.instance = StrCat("gpusched-node-agent-", options->node);
  kube::EventRecorder events(client->get(), eo, &metrics);
  // The kubelet waits on Allocate: an API call inside it is bounded.
  kube::NodePodClient pods(client->get(), options->node, &events, std::chrono::milliseconds(2000));
  agent::NodeAgent node_agent(*options, &pods, &metrics);
  if (flags.Has("once")) return RunOnce(node_agent, **client, *options);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  bool failed = false;
  std::unique_ptr<http::MetricsServer> metrics_server =
      StartMetrics(flags, metrics, node_agent, &failed);
  if (failed) return 2;
  node_agent.Start();
  auto next_topology = std::chrono::steady_clock::now();
  while (!g_stop) {
    if (std::chrono::steady_clock::now() >= next_topology) {
      absl::Status s =
          PublishTopologyOnce(**client, options->node, options->topo_input, options->nvidia_smi);
      if (!s.ok()) std::cerr << "gpusched node-agent: topology: " << s.message() << "\n";
      next_topology =
          std::chrono::steady_clock::now() +
          (s.ok() ? *topology_every : std::min(*topology_every, std::chrono::milliseconds(30000)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (metrics_server != nullptr) metrics_server->Stop();
  node_agent.Stop();
  return 0;
}

}  // namespace gpusched::cli
