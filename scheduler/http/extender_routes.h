// The extender's HTTP routes: decode (codec) -> ExtenderService -> encode.
// Beast-free: these handlers only see Router's plain request/response.
//
//   POST /scheduler/filter       ExtenderArgs -> ExtenderFilterResult
//   POST /scheduler/prioritize   ExtenderArgs -> HostPriorityList
//   POST /scheduler/bind         ExtenderBindingArgs -> ExtenderBindingResult
//   POST /scheduler/preempt      ExtenderPreemptionArgs -> ExtenderPreemptionResult
//   GET  /debug/queues           the queue manager's namespaces and queues
//   GET  /debug/pods/<ns>/<name> why a pod waits, its position, preemption preview
//   GET  /debug/config           the running config and fields pending a restart
//   GET  /healthz /readyz /metrics
//
// AddProbeRoutes adds only /healthz and /readyz: the health port's router.
//
// Malformed JSON gets HTTP 400 with {"Error": ...}; JSON that parses but
// makes no sense gets 200 with Error set (filter, bind) or 400 (prioritize,
// whose wire type has no Error field; kube-scheduler ignores prioritize
// errors either way). Either is marked HttpResponse::client_error, so the
// server logs and counts it.
#ifndef GPUSCHED_HTTP_EXTENDER_ROUTES_H_
#define GPUSCHED_HTTP_EXTENDER_ROUTES_H_

#include <functional>
#include <optional>
#include <string>

#include "gpusched/core/extender_service.h"
#include "gpusched/util/metrics.h"
#include "scheduler/http/router.h"
#include "scheduler/queue/queue_report.h"

namespace gpusched::http {

struct RouteDeps {
  ExtenderService* service = nullptr;
  Metrics* metrics = nullptr;
  // Extra readiness condition (leader election, server accepting).
  std::function<bool()> ready = [] { return true; };
  // Optional: called after a filter that set no Error and passed no node
  // (the pod waits), e.g. to post an Event on the pod. Unset: no cost.
  std::function<void(const ExtenderArgs&, const FilterOutcome&)> on_unplaced;
  // Debug views of the queue manager; the routes answer 404 when unset.
  // GET /debug/queues?namespace=NS&limit=N (N pods per namespace, default 50).
  std::function<queue::QueueReport(const queue::ReportQuery&)> debug_queues;
  std::function<std::optional<queue::PodReport>(const std::string& ns, const std::string& name)>
      debug_pod;
  // The /debug/config page as JSON text (codec-encoded); 404 when unset.
  std::function<std::string()> debug_config;
};

void AddExtenderRoutes(Router& router, RouteDeps deps);
// GET /healthz and /readyz only (uses deps.service and deps.ready).
void AddProbeRoutes(Router& router, const RouteDeps& deps);

}  // namespace gpusched::http

#endif  // GPUSCHED_HTTP_EXTENDER_ROUTES_H_
