// gpusched queue: prints the pending GPU pods of a namespace (or all) in
// queue order, with the position and reason gpusched's leader keeps in the
// pods' annotations (scheduler/kube/queue_status.h). Reads pods only, so
// anyone allowed to list pods in the namespace may run it; installed as
// `kubectl-gpusched` on the PATH it is also `kubectl gpusched queue`.
// `--explain NS/POD` instead reads one pod's page from the extender
// (queue_explain.h).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <set>

#include "gpusched/util/strings.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"
#include "scheduler/cli/queue_explain.h"
#include "scheduler/codec/agent_codec.h"
#include "scheduler/codec/queue_codec.h"
#include "scheduler/kube/kube_config.h"
#include "scheduler/kube/runtime.h"

namespace gpusched::cli {
namespace {

constexpr char kUsage[] =
    "usage: gpusched queue [-n NAMESPACE | -A] [flags]\n"
    "       kubectl gpusched queue [-n NAMESPACE | -A]   (with kubectl-gpusched on the PATH)\n"
    "\n"
    "Lists pending pods that ask for GPUs, in queue order, with the position,\n"
    "estimated start and reason gpusched keeps on each pod (annotations\n"
    "gpusched.io/queue-position, gpusched.io/estimated-start, gpusched.io/queue-reason).\n"
    "  -n, --namespace NAME  one namespace (default: the kubeconfig context's, else default)\n"
    "  -A, --all-namespaces  every namespace\n"
    "  --kubeconfig PATH     the cluster (default: $KUBECONFIG, else ~/.kube/config,\n"
    "                        else in-cluster)\n"
    "  --context NAME        kubeconfig context\n"
    "  --wide                print the full reason (default: cut to fit 100 columns)\n"
    "  --devices             instead: GPU pods on nodes, with the devices gpusched\n"
    "                        recorded (gpusched.io/gpu-ids) and those the node agent\n"
    "                        confirmed from the kubelet (gpusched.io/gpu-ids-confirmed)\n"
    "\n"
    "  --explain NS/POD      instead: one pending pod's reason, position, estimated\n"
    "                        start with how its runtime was estimated, and the what-if\n"
    "                        answers, from the extender's /debug/pods page (POD alone:\n"
    "                        in -n's namespace, else the context's)\n"
    "  -o, --output FORMAT   with --explain: text (default) or json (the page itself)\n"
    "  --extender URL        with --explain: the extender (default http://127.0.0.1:8888;\n"
    "                        https:// with --extender-ca, --extender-cert, --extender-key\n"
    "                        for its mutual TLS)\n";

// Position text as a sort key: "3" -> 3, "101+" -> 101; unknown last.
int64_t PositionKey(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return INT64_MAX;
  return std::atoll(text.c_str());
}

std::string DefaultKubeconfig() {
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string s = env;
    return s.substr(0, s.find(':'));
  }
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    std::string path = StrCat(home, "/.kube/config");
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      std::fclose(f);
      return path;
    }
  }
  return "";
}

// Args with kubectl's short forms spelled out for Flags.
std::vector<std::string> Normalise(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (a == "-n") {
      out.push_back("--namespace");
    } else if (a.rfind("-n=", 0) == 0) {
      out.push_back("--namespace=" + a.substr(3));
    } else if (a == "-o") {
      out.push_back("--output");
    } else if (a.rfind("-o=", 0) == 0) {
      out.push_back("--output=" + a.substr(3));
    } else if (a == "-A") {
      out.push_back("--all-namespaces");
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// --devices: bound GPU pods that have not finished, with recorded and
// confirmed devices ("-" when absent; "*" marks a record not confirmed yet).
int PrintDevices(kube::KubeHttpClient& client, bool all, const std::string& ns) {
  const std::string path =
      all ? std::string("/api/v1/pods") : StrCat("/api/v1/namespaces/", ns, "/pods");
  auto res = client.Do("GET", path, "", "", std::chrono::seconds(30));
  if (!res.ok() || res->status != 200) {
    std::cerr << "gpusched queue: GET " << path << ": "
              << (res.ok() ? StrCat("HTTP ", res->status) : std::string(res.status().message()))
              << "\n";
    return 1;
  }
  auto list = codec::DecodeNodePodList(res->body);
  if (!list.ok()) {
    std::cerr << "gpusched queue: " << list.status().message() << "\n";
    return 1;
  }
  std::printf("%-16s %-32s %-20s %-12s %s\n", "NAMESPACE", "NAME", "NODE", "RECORDED", "CONFIRMED");
  for (const codec::NodePodRecord& p : list->pods) {
    if (p.node_name.empty() || p.phase == "Succeeded" || p.phase == "Failed") continue;
    if (p.total_gpus() == 0 && p.total_shares() == 0 && !p.gpu_ids) continue;
    const std::string recorded = p.gpu_ids.value_or("-");
    std::string confirmed = p.gpu_ids_confirmed.value_or("-");
    if (confirmed != recorded) confirmed += " *";
    std::printf("%-16s %-32s %-20s %-12s %s\n", p.ns.c_str(), p.name.c_str(), p.node_name.c_str(),
                recorded.c_str(), confirmed.c_str());
  }
  return 0;
}

}  // namespace

int Queue(const std::vector<std::string>& args) {
  std::set<std::string> valued = {"namespace", "kubeconfig", "context"};
  valued.insert(std::begin(kExplainFlags), std::end(kExplainFlags));
  Flags flags(valued, {"all-namespaces", "wide", "devices"}, kUsage);
  if (auto done = flags.ParseOrExit("queue", Normalise(args))) return *done;
  kube::KubeOptions ko;
  ko.kubeconfig = flags.Has("kubeconfig") ? flags.Get("kubeconfig") : DefaultKubeconfig();
  ko.context = flags.Get("context");
  if (flags.Has("explain")) {
    // No API call: -n, else the kubeconfig context's namespace, else default.
    std::string ns = flags.Get("namespace");
    if (ns.empty() && !ko.kubeconfig.empty()) {
      auto cfg = kube::LoadKubeconfig(ko.kubeconfig, ko.context);
      if (cfg.ok()) ns = cfg->ns;
    }
    return ExplainPod(flags, flags.Get("explain"), ns.empty() ? "default" : ns);
  }
  ko.in_cluster = ko.kubeconfig.empty();
  auto client = kube::MakeClient(ko);
  if (!client.ok()) {
    std::cerr << "gpusched queue: " << client.status().message() << "\n";
    return 1;
  }
  const bool all = flags.Has("all-namespaces");
  // Like kubectl: -n, else the kubeconfig context's (or the pod's) namespace.
  const std::string& context_ns = (*client)->config().ns;
  const std::string ns = flags.Get("namespace", context_ns.empty() ? "default" : context_ns);
  if (flags.Has("devices")) return PrintDevices(**client, all, ns);
  const std::string path =
      StrCat(all ? std::string("/api/v1/pods") : StrCat("/api/v1/namespaces/", ns, "/pods"),
             "?fieldSelector=status.phase%3DPending");
  auto res = (*client)->Do("GET", path, "", "", std::chrono::seconds(30));
  if (!res.ok() || res->status != 200) {
    std::cerr << "gpusched queue: GET " << path << ": "
              << (res.ok() ? StrCat("HTTP ", res->status, " ", res->body.substr(0, 300))
                           : std::string(res.status().message()))
              << "\n";
    return 1;
  }
  auto rows = codec::DecodeQueueList(res->body);
  if (!rows.ok()) {
    std::cerr << "gpusched queue: " << rows.status().message() << "\n";
    return 1;
  }
  std::vector<codec::QueueListRow> pending;
  for (codec::QueueListRow& r : *rows) {
    if (r.gpus != "0" && r.node.empty()) pending.push_back(std::move(r));
  }
  std::stable_sort(pending.begin(), pending.end(), [](const auto& a, const auto& b) {
    if (a.ns != b.ns) return a.ns < b.ns;
    const int64_t pa = PositionKey(a.position), pb = PositionKey(b.position);
    if (pa != pb) return pa < pb;
    return a.created < b.created;
  });
  if (pending.empty()) {
    std::cout << (all ? std::string("No pending GPU pods.")
                      : StrCat("No pending GPU pods in namespace ", ns, "."))
              << "\n";
    return 0;
  }
  const bool wide = flags.Has("wide");
  constexpr const char* kRow = "%-16s %-32s %-8s %-20s %-4s %-16s %s\n";
  constexpr const char* kRowOneNs = "%.0s%-32s %-8s %-20s %-4s %-16s %s\n";
  std::printf(all ? kRow : kRowOneNs, "NAMESPACE", "NAME", "POSITION", "ESTIMATED START", "GPUS",
              "PRIORITY-CLASS", "REASON");
  for (const codec::QueueListRow& r : pending) {
    std::string reason = r.reason.empty() ? "<not yet seen by gpusched>" : r.reason;
    if (reason.rfind("gpusched: ", 0) == 0) reason = reason.substr(10);
    if (!wide && reason.size() > 40) reason = reason.substr(0, 37) + "...";
    std::printf(all ? kRow : kRowOneNs, r.ns.c_str(), r.name.c_str(),
                r.position.empty() ? "-" : r.position.c_str(),
                r.estimated_start.empty() ? "-" : r.estimated_start.c_str(), r.gpus.c_str(),
                r.priority_class.empty() ? "-" : r.priority_class.c_str(), reason.c_str());
  }
  return 0;
}

}  // namespace gpusched::cli
