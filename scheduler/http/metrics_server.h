// MetricsServer: a small plain-HTTP listener for a process whose only HTTP
// is its metrics (gpusched node-agent): GET /metrics (the Metrics registry
// as Prometheus text 0.0.4) and GET /healthz, served by HttpServer on a
// thread of its own, with caps sized for a scrape (a few connections, no
// request bodies).
//
// HttpServer handles SIGTERM and SIGINT while it runs: such a signal stops
// the listener and then calls the `on_signal` given to Start, so the owner
// stops too. Thread-safe; Stop (or the destructor) joins the thread.
#ifndef GPUSCHED_HTTP_METRICS_SERVER_H_
#define GPUSCHED_HTTP_METRICS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gpusched/util/metrics.h"
#include "scheduler/http/router.h"
#include "scheduler/http/server.h"

namespace gpusched::http {

// GET /metrics and GET /healthz.
void AddMetricsRoutes(Router& router, Metrics* metrics);

class MetricsServer {
 public:
  // `host`: the address to listen on ("0.0.0.0", "::"); `port` 0: an
  // ephemeral one (tests). `metrics` must outlive the server.
  MetricsServer(std::string host, uint16_t port, Metrics* metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds and serves. `on_signal` runs on the server's thread once a
  // SIGTERM or SIGINT has stopped it (not after Stop).
  absl::Status Start(std::function<void()> on_signal);
  uint16_t port() const;
  void Stop();

 private:
  Metrics* metrics_;
  Router router_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace gpusched::http

#endif  // GPUSCHED_HTTP_METRICS_SERVER_H_
