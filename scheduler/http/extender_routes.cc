#include "scheduler/http/extender_routes.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "gpusched/util/strings.h"
#include "scheduler/codec/queue_codec.h"

namespace gpusched::http {
namespace {

// The value of `key` in the query string of `target`, or nullopt.
std::optional<std::string> QueryValue(std::string_view target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return std::nullopt;
}

// Reads namespace= and limit= (1..100000); "" or an error naming the parameter.
std::string ParseReportQuery(std::string_view target, queue::ReportQuery* query) {
  if (auto ns = QueryValue(target, "namespace")) query->ns = *ns;
  if (auto limit = QueryValue(target, "limit")) {
    int64_t n = 0;
    if (limit->empty() || limit->size() > 6 ||
        !std::all_of(limit->begin(), limit->end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        (n = std::stoll(*limit)) < 1 || n > 100000) {
      return "gpusched: query parameter limit: expected an integer from 1 to 100000";
    }
    query->limit = static_cast<int32_t>(n);
  }
  return "";
}

// Decode errors: 400 if not JSON at all, else `semantic` (an answer with
// its Error set). Both are marked as bad requests with `what` for the log.
HttpResponse DecodeFailure(const absl::Status& s, HttpResponse semantic, std::string what) {
  if (codec::IsMalformedJson(s)) return BadRequestError(400, FromAbsl(s.message()));
  semantic.client_error = std::move(what);
  return semantic;
}

// POST /scheduler/filter, prioritize, bind and preempt.
void AddVerbRoutes(Router& router, const RouteDeps& deps) {
  ExtenderService* svc = deps.service;
  router.Add("POST", "/scheduler/filter", "filter",
             [svc, on_unplaced = deps.on_unplaced](HttpRequest& req, RequestContext& ctx) {
               auto args = ctx.decoder.DecodeExtenderArgs(req.body);
               if (!args.ok()) {
                 FilterOutcome out;
                 out.error =
                     StrCat("gpusched: bad ExtenderArgs: ", FromAbsl(args.status().message()));
                 ExtenderArgs empty;
                 return DecodeFailure(
                     args.status(),
                     HttpResponse{200, "application/json", codec::EncodeFilterResult(empty, out)},
                     out.error);
               }
               FilterOutcome out = svc->Filter(*args);
               if (on_unplaced && out.passed.empty() && out.error.empty()) on_unplaced(*args, out);
               return HttpResponse{200, "application/json", codec::EncodeFilterResult(*args, out)};
             });
  router.Add(
      "POST", "/scheduler/prioritize", "prioritize", [svc](HttpRequest& req, RequestContext& ctx) {
        auto args = ctx.decoder.DecodeExtenderArgs(req.body);
        if (!args.ok()) {
          return BadRequestError(
              400, StrCat("gpusched: bad ExtenderArgs: ", FromAbsl(args.status().message())));
        }
        return HttpResponse{200, "application/json",
                            codec::EncodePrioritizeResult(*args, svc->Prioritize(*args))};
      });
  router.Add("POST", "/scheduler/bind", "bind",
             [svc, metrics = deps.metrics](HttpRequest& req, RequestContext& ctx) {
               auto args = ctx.decoder.DecodeBindingArgs(req.body);
               if (!args.ok()) {
                 std::string err = StrCat("gpusched: bad ExtenderBindingArgs: ",
                                          FromAbsl(args.status().message()));
                 HttpResponse semantic{200, "application/json", codec::EncodeBindingResult(err)};
                 return DecodeFailure(args.status(), std::move(semantic), std::move(err));
               }
               std::string err = svc->Bind(*args);
               if (metrics != nullptr) {
                 metrics->Inc("gpusched_binds_total", "Bind results.",
                              {{"result", err.empty() ? "ok" : "error"}});
               }
               return HttpResponse{200, "application/json", codec::EncodeBindingResult(err)};
             });
  router.Add("POST", "/scheduler/preempt", "preempt", [svc](HttpRequest& req, RequestContext& ctx) {
    auto args = ctx.decoder.DecodePreemptionArgs(req.body);
    if (!args.ok()) {
      // ExtenderPreemptionResult has no Error field: a non-200
      // makes kube-scheduler skip preemption for this attempt.
      return BadRequestError(
          400, StrCat("gpusched: bad ExtenderPreemptionArgs: ", FromAbsl(args.status().message())));
    }
    return HttpResponse{200, "application/json",
                        codec::EncodePreemptionResult(svc->Preempt(*args))};
  });
}

// GET /debug/queues, /debug/pods/<ns>/<name> and /debug/config (404 where
// `deps` has no such view).
void AddDebugRoutes(Router& router, const RouteDeps& deps) {
  auto debug_queues = deps.debug_queues;
  router.Add(
      "GET", "/debug/queues", "debug_queues", [debug_queues](HttpRequest& req, RequestContext&) {
        if (!debug_queues) return JsonError(404, "gpusched: no queue manager");
        queue::ReportQuery query;
        if (std::string why = ParseReportQuery(req.target, &query); !why.empty()) {
          return BadRequestError(400, why);
        }
        return HttpResponse{200, "application/json", codec::EncodeQueueReport(debug_queues(query))};
      });
  auto debug_pod = deps.debug_pod;
  router.AddPrefix(
      "GET", "/debug/pods/", "debug_pods", [debug_pod](HttpRequest& req, RequestContext&) {
        std::string rest = req.target.substr(std::string("/debug/pods/").size());
        rest = rest.substr(0, rest.find('?'));
        const size_t slash = rest.find('/');
        if (!debug_pod) return JsonError(404, "gpusched: no queue manager");
        if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size()) {
          return BadRequestError(400, "gpusched: use /debug/pods/<namespace>/<name>");
        }
        auto report = debug_pod(rest.substr(0, slash), rest.substr(slash + 1));
        if (!report.has_value()) {
          return JsonError(404, StrCat("gpusched: pod ", rest, " is not known to gpusched"));
        }
        return HttpResponse{200, "application/json", codec::EncodePodReport(*report)};
      });
  auto debug_config = deps.debug_config;
  router.Add("GET", "/debug/config", "debug_config", [debug_config](HttpRequest&, RequestContext&) {
    if (!debug_config) return JsonError(404, "gpusched: no running config");
    return HttpResponse{200, "application/json", debug_config()};
  });
}

}  // namespace

void AddExtenderRoutes(Router& router, RouteDeps deps) {
  AddVerbRoutes(router, deps);
  AddDebugRoutes(router, deps);
  AddProbeRoutes(router, deps);
  Metrics* metrics = deps.metrics;
  router.Add("GET", "/metrics", "metrics", [metrics](HttpRequest&, RequestContext&) {
    return HttpResponse{200, "text/plain; version=0.0.4", metrics->Render()};
  });
}

void AddProbeRoutes(Router& router, const RouteDeps& deps) {
  router.Add("GET", "/healthz", "healthz", [](HttpRequest&, RequestContext&) {
    return HttpResponse{200, "text/plain", "ok\n"};
  });
  router.Add("GET", "/readyz", "readyz",
             [svc = deps.service, ready = deps.ready](HttpRequest&, RequestContext&) {
               if (svc->ready() && ready()) return HttpResponse{200, "text/plain", "ready\n"};
               return HttpResponse{503, "text/plain", "not ready\n"};
             });
}

}  // namespace gpusched::http
