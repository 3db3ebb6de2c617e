#include "test/kube/queue_invariants.h"

#include <bit>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "scheduler/queue/quota_ledger.h"

namespace gpusched::testing {
namespace {

using Json = nlohmann::json;

constexpr char kIdsKey[] = "gpusched.io/gpu-ids";

int64_t Milli(double gpus) { return std::llround(gpus * 1000); }

}  // namespace

std::string CheckQueueInvariants(const std::vector<Holding>& holdings,
                                 const queue::QueueReport& report,
                                 const std::vector<std::string>& reservation_uids) {
  std::ostringstream bad;
  // No device twice.
  std::map<std::string, std::map<int, int64_t>> shares;  // node -> device -> milli
  std::map<std::string, int64_t> usage;                  // namespace -> milli
  std::set<std::string> held;
  std::set<std::string> placeholders;
  bool products_known = true;
  for (const Holding& h : holdings) {
    products_known = products_known && !h.product.empty();
    held.insert(h.uid);
    usage[h.ns] += int64_t{h.gpus} * h.milli_per_gpu;
    if (h.reservation) placeholders.insert(h.uid);
    for (DeviceMask m = h.devices; m != 0; m &= m - 1) {
      const int d = std::countr_zero(m);
      if (d >= h.node_gpus) {
        bad << h.uid << " holds device " << d << " of " << h.node << ", which has " << h.node_gpus
            << "\n";
      }
      if ((shares[h.node][d] += h.milli_per_gpu) > 1000) {
        bad << "device " << h.node << "/" << d << " allocated twice (" << shares[h.node][d]
            << " milli-GPUs, last " << h.uid << ")\n";
      }
    }
  }
  // No quota overrun; the queue counts exactly what is held.
  std::set<std::string> reported;
  for (const queue::NamespaceQueue& n : report.namespaces) {
    reported.insert(n.ns);
    const int64_t u = usage.count(n.ns) != 0 ? usage[n.ns] : 0;
    if (n.usage_milli != u) {
      bad << "namespace " << n.ns << ": queue counts " << n.usage_milli << " milli-GPUs, pods hold "
          << u << "\n";
    }
    if (report.quotas_enabled && u > n.limit_milli) {
      bad << "namespace " << n.ns << " holds " << u << " milli-GPUs, above its limit "
          << n.limit_milli << "\n";
    }
    for (const queue::ModelQuotaUse& m : n.models) {
      if (products_known) {
        int64_t held_milli = 0;
        for (const Holding& h : holdings) {
          if (h.ns == n.ns && ProductMatches(m.model, h.product)) {
            held_milli += int64_t{h.gpus} * h.milli_per_gpu;
          }
        }
        if (m.usage_milli != held_milli) {
          bad << "namespace " << n.ns << " model " << m.model << ": queue counts " << m.usage_milli
              << " milli-GPUs, pods hold " << held_milli << "\n";
        }
      }
      if (report.quotas_enabled && m.usage_milli > m.limit_milli) {
        bad << "namespace " << n.ns << " holds " << m.usage_milli << " milli-GPUs of " << m.model
            << ", above its model limit " << m.limit_milli << "\n";
      }
    }
    for (const queue::QueuedPod& p : n.queue) {
      if (held.count(p.uid) != 0) bad << "queued pod " << p.ns << "/" << p.name << " holds GPUs\n";
    }
  }
  if (report.quotas_enabled) {
    for (const auto& [ns, u] : usage) {
      if (u > 0 && reported.count(ns) == 0) {
        bad << "namespace " << ns << " holds " << u
            << " milli-GPUs but the queue does not list it\n";
      }
    }
  }
  // No leaked reservation.
  const std::set<std::string> live(reservation_uids.begin(), reservation_uids.end());
  if (live != placeholders) {
    bad << "reservation placeholders holding devices (" << placeholders.size()
        << ") differ from the live reservations (" << live.size() << ")\n";
  }
  int unbound_slots = 0;
  for (const queue::GangReservationReport& r : report.reservations) {
    if (r.bound >= r.slots) {
      bad << "reservation " << r.ns << "/" << r.gang << " is complete but still listed\n";
    }
    unbound_slots += r.slots - r.bound;
  }
  if (unbound_slots != static_cast<int>(live.size())) {
    bad << "reservations list " << unbound_slots << " open slots, " << live.size()
        << " placeholders are live\n";
  }
  return bad.str();
}

std::string CheckQueueInvariants(const ClusterState& state, queue::QueueManager& queue,
                                 const std::function<bool(const PodRequest&)>& bound_in_api) {
  // The three reads must see one cluster state: retry while it moves.
  std::shared_ptr<const ClusterSnapshot> snap;
  queue::QueueReport report;
  for (int attempt = 0; attempt < 20; ++attempt) {
    snap = state.Snapshot();
    report = queue.Report();
    if (state.Snapshot()->generation() == snap->generation()) break;
  }
  // The holders in the state are the live ones; the report's open slots
  // must count exactly them (checked below).
  std::vector<std::string> uids;
  for (const auto& node : snap->nodes()) {
    for (const PodOnNode& p : node->pods) {
      if (p.reservation) uids.push_back(p.uid);
    }
  }
  std::vector<Holding> holdings;
  std::ostringstream bad;
  for (const auto& node : snap->nodes()) {
    if (node->device_conflicts != 0) bad << "node " << node->name << " has device conflicts\n";
    for (const PodOnNode& p : node->pods) {
      Holding h;
      h.uid = p.uid;
      h.ns = p.ns;
      h.node = node->name;
      h.product = std::string(snap->product(*node));
      h.node_gpus = node->gpu_count;
      h.gpus = p.gpus;
      h.milli_per_gpu = p.milli_per_gpu;
      h.devices = p.devices;
      h.devices_known = p.devices_known;
      h.reservation = p.reservation;
      holdings.push_back(std::move(h));
      if (bound_in_api && !p.reservation) {
        auto pod = state.FindPod(p.uid);
        if (!pod.has_value() || !bound_in_api(*pod)) {
          bad << "pod " << p.ns << "/" << p.name << " holds GPUs on " << node->name
              << " but is not bound there in the API (leaked assumption)\n";
        }
      }
    }
  }
  return bad.str() + CheckQueueInvariants(holdings, report, uids);
}

std::string CheckQueueInvariants(const std::vector<Json>& api_pods,
                                 const std::function<int32_t(const std::string&)>& node_gpus,
                                 const std::string& debug_queues_body) {
  std::ostringstream bad;
  std::vector<Holding> holdings;
  for (const Json& p : api_pods) {
    const std::string node = p["spec"].value("nodeName", "");
    const std::string phase = p.contains("status") ? p["status"].value("phase", "") : "";
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    Holding h;
    h.uid = p["metadata"].value("uid", "");
    h.ns = p["metadata"].value("namespace", "");
    h.node = node;
    h.node_gpus = node_gpus(node);
    std::string ids;
    if (p["metadata"].contains("annotations")) {
      ids = p["metadata"]["annotations"].value(kIdsKey, "");
    }
    std::stringstream ss(ids);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      const int id = std::atoi(tok.c_str());
      if (tok.empty() || id < 0 || id >= 64) {
        bad << h.ns << "/" << p["metadata"].value("name", "") << ": bad " << kIdsKey << " '" << ids
            << "'\n";
        continue;
      }
      h.devices |= DeviceMask{1} << id;
      ++h.gpus;
    }
    holdings.push_back(std::move(h));
  }
  Json q = Json::parse(debug_queues_body, nullptr, false);
  if (q.is_discarded() || !q.is_object()) {
    return bad.str() + "GET /debug/queues is not JSON: " + debug_queues_body + "\n";
  }
  queue::QueueReport report;
  report.quotas_enabled = q.value("quotasEnabled", false);
  for (const Json& n : q.value("namespaces", Json::array())) {
    queue::NamespaceQueue ns;
    ns.ns = n.value("namespace", "");
    ns.limit_milli = Milli(n.value("limitGpus", 0.0));
    ns.usage_milli = Milli(n.value("usageGpus", 0.0));
    for (const Json& m : n.value("models", Json::array())) {
      ns.models.push_back({m.value("model", ""), Milli(m.value("guaranteedGpus", 0.0)),
                           Milli(m.value("limitGpus", 0.0)), Milli(m.value("usageGpus", 0.0))});
    }
    for (const Json& e : n.value("queue", Json::array())) {
      queue::QueuedPod qp;
      qp.ns = ns.ns;
      qp.name = e.value("name", "");
      qp.uid = e.value("uid", "");
      ns.queue.push_back(std::move(qp));
    }
    report.namespaces.push_back(std::move(ns));
  }
  for (const Json& r : q.value("gangReservations", Json::array())) {
    queue::GangReservationReport g;
    g.ns = r.value("namespace", "");
    g.gang = r.value("gang", "");
    g.slots = r.value("slots", 0);
    g.bound = r.value("bound", 0);
    report.reservations.push_back(std::move(g));
  }
  // Placeholders live only inside the process: none may be open when the
  // API view is compared (a restarted process starts without any).
  return bad.str() + CheckQueueInvariants(holdings, report, {});
}

}  // namespace gpusched::testing
