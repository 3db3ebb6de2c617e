#include "scheduler/agent/node_agent.h"

#include <stdio.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gpusched/model/pod.h"
#include "gpusched/util/strings.h"
#include "scheduler/agent/gpu_inventory.h"
#include "scheduler/agent/nvidia_smi_topo.h"
#include "scheduler/agent/pod_resources_client.h"
#include "scheduler/agent/reconcile.h"

namespace gpusched::agent {
namespace {

constexpr char kCorrectedReason[] = "GpuschedRecordCorrected";
constexpr auto kRegisterEvery = std::chrono::milliseconds(1000);

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::string> RunCommandOutput(const std::string& command) {
  FILE* p = popen(StrCat(command, " 2>&1").c_str(), "r");
  if (p == nullptr) return absl::UnavailableError(StrCat("cannot run ", command));
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

NodeAgent::NodeAgent(NodeAgentOptions options, NodeApi* api, Metrics* metrics)
    : options_(std::move(options)),
      api_(api),
      metrics_(metrics),
      state_(DeviceStateOptions{options_.node, options_.cdi, options_.shares_per_gpu}, api,
             metrics) {
  if (options_.device_plugin) {
    std::vector<ResourceKind> kinds{ResourceKind::kWholeGpu};
    if (options_.shares_per_gpu > 0) kinds.push_back(ResourceKind::kGpuShare);
    registrar_ = std::make_unique<Registrar>(&state_, options_.device_plugin_dir, kinds, metrics);
  }
}

NodeAgent::~NodeAgent() { Stop(); }

absl::Status NodeAgent::RefreshInventory() {
  auto text =
      options_.query_input.empty()
          ? RunCommandOutput(StrCat("'", options_.nvidia_smi, "' --query-gpu=", kQueryGpuFields,
                                    " --format=", kQueryGpuFormat))
          : ReadWholeFile(options_.query_input);
  if (!text.ok()) return text.status();
  auto report = ParseNvidiaSmiQuery(*text);
  if (!report.ok()) {
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_agent_inventory_errors_total", "nvidia-smi outputs not understood.",
                    {});
    }
    return report.status();
  }
  if (state_.SetInventory(*report)) {
    const DeviceTable table = state_.Table();
    for (const GpuDevice& d : table.devices()) {
      if (!d.healthy) {
        std::cerr << "gpusched node-agent: GPU " << d.index << " (" << d.uuid
                  << ") unhealthy: " << d.health_reason << "\n";
      }
    }
  }
  if (topology_read_) return absl::OkStatus();
  auto topo = options_.topo_input.empty()
                  ? RunCommandOutput(StrCat("'", options_.nvidia_smi, "' topo -m"))
                  : ReadWholeFile(options_.topo_input);
  if (!topo.ok()) return topo.status();
  auto codes = ParseNvidiaSmiTopo(*topo);
  if (!codes.ok()) return codes.status();
  auto topology = GpuTopology::FromCodes(*codes);
  if (!topology.ok()) return topology.status();
  state_.SetTopology(*topology);
  topology_read_ = true;
  return absl::OkStatus();
}

absl::Status NodeAgent::RegisterTick() {
  absl::MutexLock lock(&registrar_mu_);
  if (registrar_ == nullptr) return absl::OkStatus();
  return registrar_->Tick();
}

int NodeAgent::registrations() const {
  absl::MutexLock lock(&registrar_mu_);
  return registrar_ == nullptr ? 0 : registrar_->registrations();
}

absl::Status NodeAgent::ApplyFix(const RecordFix& fix,
                                 const std::vector<codec::NodePodRecord>& pods,
                                 ReconcileStats* stats) {
  const codec::NodePodRecord* pod = nullptr;
  for (const auto& p : pods) {
    if (p.uid == fix.uid) pod = &p;
  }
  if (pod == nullptr) return absl::OkStatus();
  AnnotationEdits edits{{codec::kAnnotationGpuIdsConfirmed, fix.actual}};
  if (fix.correction) edits.push_back({kAnnotationGpuIds, fix.actual});
  absl::Status s = api_->PatchAnnotations(*pod, edits);
  if (!s.ok()) return s;
  if (!fix.correction) {
    ++stats->confirmations;
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_agent_record_confirmations_total",
                    "Records confirmed as the kubelet assigned them.", {});
    }
    return absl::OkStatus();
  }
  ++stats->corrections;
  const std::string was = fix.recorded.empty() ? "(none)" : fix.recorded;
  std::cerr << "gpusched node-agent: corrected " << pod->Key() << " " << kAnnotationGpuIds << " "
            << was << " -> " << fix.actual << " (the kubelet's assignment)\n";
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_agent_record_corrections_total",
                  "Records (gpusched.io/gpu-ids) corrected to the kubelet's assignment.", {});
  }
  api_->RecordEvent(*pod, "Warning", kCorrectedReason,
                    StrCat("gpusched recorded GPUs ", was, "; the kubelet assigned ", fix.actual,
                           "; record corrected"));
  return absl::OkStatus();
}

absl::StatusOr<ReconcileStats> NodeAgent::ReconcileOnce() {
  const absl::Time start = absl::Now();
  absl::StatusOr<ReconcileStats> stats = ReconcileRound();
  const absl::Time end = absl::Now();
  {
    absl::MutexLock lock(&reconcile_mu_);
    last_reconcile_seconds_ = absl::ToDoubleSeconds(end - start);
    if (stats.ok()) last_reconcile_ok_ = end;
  }
  if (metrics_ != nullptr) {
    metrics_->Inc("gpusched_agent_reconciles_total",
                  "PodResources reconciliation rounds (failed ones also in "
                  "gpusched_agent_reconcile_errors_total).",
                  {});
    if (!stats.ok()) {
      metrics_->Inc("gpusched_agent_reconcile_errors_total",
                    "Reconciliation rounds that could not ask the kubelet or the API.", {});
    }
  }
  return stats;
}

void NodeAgent::CollectMetrics(GaugeWriter& w) const {
  const DeviceTable table = state_.Table();
  for (const GpuDevice& d : table.devices()) {
    w.Gauge("gpusched_agent_device_healthy",
            "1 if the GPU is healthy as nvidia-smi reports it, else 0 (it is then advertised "
            "unhealthy to the kubelet).",
            {{"device", StrCat(d.index)}, {"uuid", d.uuid}}, d.healthy ? 1 : 0);
  }
  absl::MutexLock lock(&reconcile_mu_);
  if (last_reconcile_seconds_ >= 0) {
    w.Gauge("gpusched_agent_reconcile_last_duration_seconds",
            "Wall time of the last PodResources reconciliation round.", {},
            last_reconcile_seconds_);
  }
  if (last_reconcile_ok_ != absl::InfinitePast()) {
    w.Gauge("gpusched_agent_reconcile_last_success_age_seconds",
            "Seconds since a reconciliation round last succeeded.", {},
            absl::ToDoubleSeconds(absl::Now() - last_reconcile_ok_));
  }
}

absl::StatusOr<ReconcileStats> NodeAgent::ReconcileRound() {
  const uint64_t seq = state_.AllocationSeq();
  auto kubelet = ListPodResources(options_.pod_resources_socket, options_.kubelet_timeout);
  if (!kubelet.ok()) return kubelet.status();
  auto pods = api_->ListPods();
  if (!pods.ok()) return pods.status();
  ReconcileStats stats;
  std::vector<KubeletAssignment> assigned = ResolveKubeletPods(*kubelet, state_.Table(), *pods);
  state_.SetKubeletAllocations(AllocationsFrom(assigned), seq);
  stats.kubelet_pods = static_cast<int>(assigned.size());
  for (const KubeletAssignment& a : assigned) {
    for (const std::string& id : a.unknown_ids) {
      ++stats.errors;
      std::cerr << "gpusched node-agent: pod " << a.ns << "/" << a.name << " holds device ID '"
                << id << "', which names no GPU nvidia-smi reports\n";
    }
  }
  for (const RecordFix& fix : PlanRecordFixes(assigned, *pods)) {
    absl::Status s = ApplyFix(fix, *pods, &stats);
    if (!s.ok()) {
      ++stats.errors;
      std::cerr << "gpusched node-agent: record of " << fix.ns << "/" << fix.name << ": "
                << s.message() << "\n";
    }
  }
  return stats;
}

bool NodeAgent::Sleep(std::chrono::milliseconds d) {
  absl::MutexLock lock(&stop_mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(stop_mu_) { return stopping_; };
  stop_mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::FromChrono(d));
  return !stopping_;
}

void NodeAgent::InventoryLoop() {
  auto last_inventory = std::chrono::steady_clock::time_point{};
  do {
    auto now = std::chrono::steady_clock::now();
    if (now - last_inventory >= options_.inventory_interval) {
      last_inventory = now;
      if (absl::Status s = RefreshInventory(); !s.ok()) {
        std::cerr << "gpusched node-agent: inventory: " << s.message() << "\n";
      }
    }
    if (!state_.Table().devices().empty()) RegisterTick().IgnoreError();  // logged inside
  } while (Sleep(kRegisterEvery));
}

void NodeAgent::ReconcileLoop() {
  do {
    auto stats = ReconcileOnce();
    if (!stats.ok()) {
      std::cerr << "gpusched node-agent: reconcile: " << stats.status().message() << "\n";
    }
  } while (Sleep(options_.reconcile_interval));
}

void NodeAgent::Start() {
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = false;
  }
  inventory_thread_ = std::thread([this] { InventoryLoop(); });
  reconcile_thread_ = std::thread([this] { ReconcileLoop(); });
}

void NodeAgent::Stop() {
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  if (inventory_thread_.joinable()) inventory_thread_.join();
  if (reconcile_thread_.joinable()) reconcile_thread_.join();
  absl::MutexLock lock(&registrar_mu_);
  if (registrar_ != nullptr) registrar_->Stop();
}

}  // namespace gpusched::agent
