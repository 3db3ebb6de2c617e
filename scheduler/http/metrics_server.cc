#include "scheduler/http/metrics_server.h"

#include <utility>

namespace gpusched::http {

void AddMetricsRoutes(Router& router, Metrics* metrics) {
  router.Add("GET", "/metrics", "metrics", [metrics](HttpRequest&, RequestContext&) {
    return HttpResponse{200, "text/plain; version=0.0.4", metrics->Render()};
  });
  router.Add("GET", "/healthz", "healthz", [](HttpRequest&, RequestContext&) {
    return HttpResponse{200, "text/plain", "ok\n"};
  });
}

MetricsServer::MetricsServer(std::string host, uint16_t port, Metrics* metrics)
    : metrics_(metrics) {
  AddMetricsRoutes(router_, metrics_);
  ServerOptions o;
  o.host = std::move(host);
  o.port = port;
  o.threads = 1;
  // A scrape is a GET with no body and an answer of a few KiB.
  o.max_body_bytes = 64 << 10;
  o.max_connections = 16;
  o.max_connections_per_source = 8;
  o.max_inflight_body_bytes = 4 << 20;
  o.small_lane_bytes = 1 << 20;
  o.small_request_bytes = 64 << 10;
  o.shutdown_grace = std::chrono::seconds(2);
  server_ = std::make_unique<HttpServer>(std::move(o), &router_, metrics_);
}

MetricsServer::~MetricsServer() { Stop(); }

absl::Status MetricsServer::Start(std::function<void()> on_signal) {
  if (absl::Status s = server_->Listen(); !s.ok()) return s;
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    server_->Run();
    if (!stopping_ && on_signal) on_signal();
  });
  return absl::OkStatus();
}

uint16_t MetricsServer::port() const { return server_->port(); }

void MetricsServer::Stop() {
  stopping_ = true;
  if (!thread_.joinable()) return;
  server_->Shutdown();
  thread_.join();
}

}  // namespace gpusched::http
