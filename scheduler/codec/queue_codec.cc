#include "scheduler/codec/queue_codec.h"

#include <nlohmann/json.hpp>

namespace gpusched::codec {
namespace {

using json = nlohmann::ordered_json;

double Gpus(int64_t milli) { return static_cast<double>(milli) / 1000.0; }

}  // namespace

std::string EncodeQueueReport(const queue::QueueReport& report) {
  json out = json::object();
  out["quotasEnabled"] = report.quotas_enabled;
  json namespaces = json::array();
  for (const queue::NamespaceQueue& n : report.namespaces) {
    json queue = json::array();
    for (const queue::QueuedPod& p : n.queue) {
      json q = {{"position", p.position},
                {"name", p.name},
                {"uid", p.uid},
                {"priority", p.priority},
                {"priorityClassName", p.priority_class},
                {"gpus", Gpus(p.gpu_milli)},
                {"waitSeconds", p.wait_seconds},
                {"admissible", p.reason.empty()},
                {"reason", p.reason}};
      if (!p.gang.empty()) {
        q["gang"] = p.gang;
        q["gangSize"] = p.gang_size;
      }
      queue.push_back(std::move(q));
    }
    json models = json::array();
    for (const queue::ModelQuotaUse& m : n.models) {
      models.push_back({{"model", m.model},
                        {"guaranteedGpus", Gpus(m.guaranteed_milli)},
                        {"limitGpus", Gpus(m.limit_milli)},
                        {"usageGpus", Gpus(m.usage_milli)}});
    }
    namespaces.push_back({{"namespace", n.ns},
                          {"cohort", n.cohort},
                          {"guaranteedGpus", Gpus(n.guaranteed_milli)},
                          {"limitGpus", Gpus(n.limit_milli)},
                          {"usageGpus", Gpus(n.usage_milli)},
                          {"borrowedGpus", Gpus(n.borrowed_milli)},
                          {"cohortLendableGpus", Gpus(n.lendable_milli)},
                          {"models", std::move(models)},
                          {"pendingPods", n.pending_pods},
                          {"listedPods", n.queue.size()},
                          {"queue", std::move(queue)}});
  }
  out["namespaces"] = std::move(namespaces);
  json reservations = json::array();
  for (const queue::GangReservationReport& r : report.reservations) {
    json nodes = json::array();
    for (const auto& [node, devices] : r.nodes)
      nodes.push_back({{"node", node}, {"gpus", devices}});
    reservations.push_back({{"namespace", r.ns},
                            {"gang", r.gang},
                            {"slots", r.slots},
                            {"bound", r.bound},
                            {"expiresInSeconds", r.expires_in_seconds},
                            {"nodes", std::move(nodes)}});
  }
  out["gangReservations"] = std::move(reservations);
  return out.dump(2) + "\n";
}

std::string EncodePodReport(const queue::PodReport& report) {
  json out = {{"namespace", report.ns},
              {"name", report.name},
              {"uid", report.uid},
              {"state", report.state}};
  if (!report.node.empty()) out["node"] = report.node;
  if (report.state == "pending") {
    out["position"] = report.position;
    out["reason"] = report.reason;
    json preemption = json::array();
    for (const queue::PreemptionPreview& p : report.preemption) {
      preemption.push_back({{"node", p.node}, {"victims", p.victims}});
    }
    out["preemption"] = std::move(preemption);
  }
  return out.dump(2) + "\n";
}

}  // namespace gpusched::codec
