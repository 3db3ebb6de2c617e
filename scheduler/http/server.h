// HttpServer: the Boost.Beast HTTP/1.1 server in front of the Router. The
// only file set in gpusched that includes Beast or Asio.
//
//  - keep-alive (kube-scheduler reuses connections), TCP_NODELAY;
//  - a body limit (413 with a JSON body, then close), header limit (431);
//  - an idle timeout between requests and a read timeout per request;
//  - malformed HTTP gets 400 with a JSON body, then close;
//  - SIGTERM/SIGINT: stop accepting, mark not ready, finish in-flight
//    requests, close idle connections, return from Run();
//  - SIGHUP and periodic tasks run the callbacks given in Options.
//
// Run() blocks on `threads` I/O threads; each connection lives on its own
// strand. Thread-safe: Shutdown() may be called from any thread.
#ifndef GPUSCHED_HTTP_SERVER_H_
#define GPUSCHED_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpusched/util/metrics.h"
#include "scheduler/http/router.h"

namespace gpusched::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8888;  // 0 = ephemeral (tests)
  int threads = 2;
  int64_t max_body_bytes = 32 << 20;
  std::chrono::seconds read_timeout{30};
  std::chrono::seconds idle_timeout{90};
  std::chrono::seconds shutdown_grace{10};
  // TLS: PEM files; empty = plain HTTP. With client_ca, clients must present
  // a certificate signed by it (mTLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::function<void()> on_sighup;
  struct Periodic {
    std::chrono::milliseconds every;
    std::function<void()> fn;
  };
  std::vector<Periodic> periodic;
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, const Router* router, Metrics* metrics);
  ~HttpServer();

  // Binds the listening socket. Returns the bound port via port().
  absl::Status Listen();
  uint16_t port() const;
  // Serves until Shutdown() or SIGTERM/SIGINT. REQUIRES: Listen() succeeded.
  void Run();
  // Stops accepting and closes connections once their request is answered.
  void Shutdown();
  // False once shutdown has begun (for /readyz).
  bool accepting() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses "HOST:PORT" ("0.0.0.0:8888", "[::1]:8888").
absl::Status ParseListen(const std::string& text, std::string* host, uint16_t* port);

}  // namespace gpusched::http

#endif  // GPUSCHED_HTTP_SERVER_H_
