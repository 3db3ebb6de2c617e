// NodeAgent: `gpusched node-agent`'s work on one GPU node, without the CLI:
//
//  - inventory: `nvidia-smi --query-gpu` (and `topo -m` for the links) every
//    few seconds into the DeviceState; a device that goes unhealthy is
//    reported through ListAndWatch;
//  - device plugin (optional): the Registrar serves and registers
//    nvidia.com/gpu and gpusched.io/gpu-shares, and registers again after a
//    kubelet restart;
//  - the kubelet's truth: PodResources List at start and every few seconds;
//    each GPU pod's record (gpusched.io/gpu-ids) is corrected to the devices
//    the kubelet assigned, and confirmed (gpusched.io/gpu-ids-confirmed).
//
// The topology annotation (the former topology-agent) is published by the
// CLI beside it. Thread-safe: Start runs the loops on two threads; the
// *Once methods may also be called directly (tests, benchmarks).
#ifndef GPUSCHED_SCHEDULER_AGENT_NODE_AGENT_H_
#define GPUSCHED_SCHEDULER_AGENT_NODE_AGENT_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpusched/util/metrics.h"
#include "scheduler/agent/device_state.h"
#include "scheduler/agent/node_api.h"
#include "scheduler/agent/registrar.h"

namespace gpusched::agent {

struct NodeAgentOptions {
  std::string node;
  bool device_plugin = true;  // false: only reconcile (NVIDIA's plugin allocates)
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  bool cdi = false;
  int shares_per_gpu = 10;
  std::string nvidia_smi = "nvidia-smi";
  std::string query_input;  // read this file instead of running --query-gpu
  std::string topo_input;   // read this file instead of running topo -m
  std::chrono::milliseconds inventory_interval{5000};
  std::chrono::milliseconds reconcile_interval{5000};
  std::chrono::milliseconds kubelet_timeout{3000};
};

struct ReconcileStats {
  int kubelet_pods = 0;   // pods with devices in the PodResources List
  int corrections = 0;    // records changed
  int confirmations = 0;  // records confirmed as they were
  int errors = 0;         // patches that failed, unknown device IDs
};

class NodeAgent {
 public:
  NodeAgent(NodeAgentOptions options, NodeApi* api, Metrics* metrics);
  ~NodeAgent();
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  // One inventory round. Error (logged by the caller) when nvidia-smi's
  // output cannot be read; the last good inventory stays.
  absl::Status RefreshInventory();
  // One registration pass (device plugin mode).
  absl::Status RegisterTick();
  // One reconciliation round. Error when the kubelet cannot be asked.
  absl::StatusOr<ReconcileStats> ReconcileOnce() ABSL_LOCKS_EXCLUDED(reconcile_mu_);

  // Gauges for /metrics: each device's health (gpusched_agent_device_healthy)
  // and the reconciliation rounds (the last one's duration, the time since
  // one last succeeded).
  // For Metrics::AddCollector by the owner of both.
  void CollectMetrics(GaugeWriter& w) const ABSL_LOCKS_EXCLUDED(reconcile_mu_);

  // Runs the loops until Stop.
  void Start();
  void Stop();

  DeviceState& state() { return state_; }
  int registrations() const;

 private:
  void InventoryLoop();
  void ReconcileLoop();
  // Sleeps up to `d`; false when stopping.
  bool Sleep(std::chrono::milliseconds d);
  absl::StatusOr<ReconcileStats> ReconcileRound();
  absl::Status ApplyFix(const struct RecordFix& fix, const std::vector<codec::NodePodRecord>& pods,
                        ReconcileStats* stats);

  const NodeAgentOptions options_;
  NodeApi* api_;
  Metrics* metrics_;
  DeviceState state_;
  std::unique_ptr<Registrar> registrar_;  // device plugin mode only
  mutable absl::Mutex registrar_mu_;      // Tick/Stop/registrations
  bool topology_read_ = false;
  mutable absl::Mutex reconcile_mu_;
  double last_reconcile_seconds_ ABSL_GUARDED_BY(reconcile_mu_) = -1;  // -1: no round yet
  absl::Time last_reconcile_ok_ ABSL_GUARDED_BY(reconcile_mu_) = absl::InfinitePast();
  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread inventory_thread_, reconcile_thread_;
};

// Runs a command and returns what it printed (stdout and stderr), or an
// error when it cannot be started. A non-zero exit is returned as output
// too (nvidia-smi exits 15 when a GPU is lost, yet prints the others).
absl::StatusOr<std::string> RunCommandOutput(const std::string& command);

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_NODE_AGENT_H_
