// gpusched topology-agent: the node agent's topology job alone (the command's
// former name, kept so existing DaemonSets go on doing only this; `gpusched
// node-agent` runs it beside the device plugin). Publishes this node's GPU
// link matrix. Runs
// `nvidia-smi topo -m` (or reads --input), parses it (scheduler/agent) and
// merge-patches the Node's gpusched.io/gpu-topology annotation through the
// Kubernetes client (in-cluster, or --kubeconfig). Repeats every --interval
// until SIGTERM, or once with --once.
#include <signal.h>
#include <stdio.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "gpusched/util/strings.h"
#include "scheduler/agent/nvidia_smi_topo.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/cli/topology_publish.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/runtime.h"
#include "scheduler/source/file_source.h"

namespace gpusched::cli {
namespace {

constexpr char kUsage[] =
    "usage: gpusched topology-agent --node NAME [flags]\n"
    "\n"
    "Publishes this node's GPU link matrix (`nvidia-smi topo -m`) as the Node\n"
    "annotation gpusched.io/gpu-topology, every --interval until SIGTERM.\n"
    "  --node NAME          the Node to annotate (required; the DaemonSet passes\n"
    "                       spec.nodeName)\n"
    "  --interval DURATION  time between rounds, at least 1s (default 300s)\n"
    "  --once               publish once and exit (0 ok, 1 failed)\n"
    "  --nvidia-smi PATH    the nvidia-smi binary (default: nvidia-smi on PATH)\n"
    "  --input FILE         read `nvidia-smi topo -m` output from FILE instead\n"
    "  --kubeconfig PATH    the Kubernetes API through a kubeconfig (default:\n"
    "                       in-cluster service account)\n"
    "  --context NAME       kubeconfig context\n";

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

absl::StatusOr<std::string> RunNvidiaSmi(const std::string& binary) {
  std::string cmd = StrCat("'", binary, "' topo -m 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::UnavailableError(StrCat("cannot run ", binary));
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) return absl::UnavailableError(StrCat(binary, " topo -m failed (", rc, "): ", out));
  return out;
}

}  // namespace

// One round: read, parse, patch. Returns an error to log.
absl::Status PublishTopologyOnce(kube::KubeHttpClient& client, const std::string& node,
                                 const std::string& input, const std::string& smi) {
  auto text = input.empty() ? RunNvidiaSmi(smi) : ReadFile(input);
  if (!text.ok()) return text.status();
  auto matrix = agent::ParseNvidiaSmiTopo(*text);
  if (!matrix.ok()) return matrix.status();
  auto res = client.Do("PATCH", StrCat("/api/v1/nodes/", node),
                       codec::EncodeAnnotationPatch(agent::kTopologyAnnotationKey,
                                                    codec::EncodeTopologyAnnotation(*matrix)),
                       "application/merge-patch+json");
  if (!res.ok()) return res.status();
  if (res->status != 200) {
    return absl::UnavailableError(
        StrCat("PATCH node ", node, ": HTTP ", res->status, " ", res->body));
  }
  std::cout << "gpusched topology-agent: node " << node << ": " << matrix->size()
            << " GPUs published\n"
            << std::flush;
  return absl::OkStatus();
}

int TopologyAgent(const std::vector<std::string>& args) {
  Flags flags({"node", "interval", "nvidia-smi", "input", "kubeconfig", "context"}, {"once"},
              kUsage);
  if (auto exit_code = flags.ParseOrExit("topology-agent", args)) return *exit_code;
  const std::string node = flags.Get("node");
  if (node.empty()) {
    std::cerr << "gpusched topology-agent: --node NAME is required\n";
    return 2;
  }
  auto interval = kube::ParseDuration(flags.Get("interval", "300s"));
  if (!interval.ok() || interval->count() < 1000) {
    std::cerr << "gpusched topology-agent: --interval must be a duration of at least 1s\n";
    return 2;
  }
  kube::KubeOptions ko;
  ko.kubeconfig = flags.Get("kubeconfig");
  ko.context = flags.Get("context");
  ko.in_cluster = ko.kubeconfig.empty();
  ko.client.qps = 1;
  ko.client.burst = 5;
  auto client = kube::MakeClient(ko);
  if (!client.ok()) {
    std::cerr << "gpusched topology-agent: " << client.status().message() << "\n";
    return 2;
  }
  const std::string input = flags.Get("input");
  const std::string smi = flags.Get("nvidia-smi", "nvidia-smi");
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  while (true) {
    absl::Status s = PublishTopologyOnce(**client, node, input, smi);
    if (!s.ok()) std::cerr << "gpusched topology-agent: " << s.message() << "\n";
    if (flags.Has("once")) return s.ok() ? 0 : 1;
    // A failed round is retried sooner than the regular interval.
    auto wait = s.ok() ? *interval : std::min(*interval, std::chrono::milliseconds(30000));
    for (auto slept = std::chrono::milliseconds(0); slept < wait && !g_stop;
         slept += std::chrono::milliseconds(200)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (g_stop) return 0;
  }
}

}  // namespace gpusched::cli
