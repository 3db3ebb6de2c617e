// HttpServer: the Boost.Beast HTTP/1.1 server in front of the Router. The
// only file set in gpusched that includes Beast or Asio.
//
//  - keep-alive (kube-scheduler reuses connections), TCP_NODELAY;
//  - a body limit (413 with a JSON body, then close); a header limit on the
//    total of a request's header bytes and fields (431);
//  - timeouts: idle between requests, a header's first to last byte, the rest
//    of a request after its header, each stalled piece of an answer written;
//  - malformed HTTP gets 400 with a JSON body, then close;
//  - memory caps (ConnTable): connections per listener and per source
//    address, a new connection past them evicting the one waiting longest
//    without a whole request header; one budget for the bytes of request
//    bodies (charged as they arrive) and answers (until written) across all
//    connections, a charge past it evicting stalled bodies and answers; past
//    a cap with nothing to evict, 503 with a JSON body and Retry-After;
//  - `Expect: 100-continue` is answered before the body is read, or the
//    request is refused without reading it; HEAD answers carry no body;
//  - out of file descriptors (EMFILE/ENFILE), accepting backs off
//    (50 ms doubling to 500 ms) instead of spinning;
//  - requests refused at the HTTP layer (400, 404, 405, 413, 431, 503) are
//    logged, at most one line per second per status with a suppressed count;
//  - an optional second, plain-HTTP listener (the health port) that serves
//    only its own router (the probes), never TLS;
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
#include "scheduler/http/conn_table.h"
#include "scheduler/http/router.h"

namespace gpusched::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8888;  // 0 = ephemeral (tests)
  int threads = 2;
  int64_t max_body_bytes = 32 << 20;
  // Memory caps, sized for the deploy's 1 GiB limit (deploy/extender.yaml).
  // Measured: a request's peak memory (body, JSON parse, answer) is ~5x its
  // body for a Nodes list and up to ~14x for dense NodeNames of unknown
  // nodes (each gets a reason in the answer); count 20x. So 32 MiB of bodies
  // in flight peak under 640 MiB. A connection keeps a 64 KiB read buffer
  // and a decoder (~25 KiB measured after a small request, at most 20x
  // 64 KiB = 1.3 MiB kept per connection, plus 8 MiB of bodies' worth, 160
  // MiB, shared by all): 128 connections keep under 330 MiB. So requests
  // alone stay under ~970 MiB even in that worst case; raise the caps
  // together with the memory limit. An answer is charged in its body's place
  // (it is part of that 20x while made), so a client that never reads keeps
  // at most the budget alive, and only until someone needs the room.
  int max_connections = 128;
  // Bytes of request bodies and of answers in flight, all connections
  // together; answers count from when they are made until written.
  int64_t max_inflight_body_bytes = 32 << 20;
  // Connections on the main port from one remote address (0 = half of
  // max_connections). Past it, the source's own connection waiting longest
  // for a request header is evicted.
  int max_connections_per_source = 0;
  // Requests and answers of at most small_request_bytes may also use
  // small_lane_bytes past max_inflight_body_bytes: a large request being
  // handled (not evictable) never makes kube-scheduler's ~100 KB ones wait.
  int64_t small_lane_bytes = 4 << 20;
  int64_t small_request_bytes = 1 << 20;
  // A body being read or an answer being written that made no progress for
  // slow_after, or moved fewer than min_transfer_rate bytes/s on average
  // once older than that, may be evicted when the budget is short.
  std::chrono::milliseconds slow_after{250};
  int64_t min_transfer_rate = 1 << 20;
  // Plain-HTTP probe listener "HOST:PORT" ("" = none; port 0 = ephemeral),
  // served by the health router given to the constructor, with its own
  // connection cap so a flood on the main port never starves the probes.
  std::string health_listen;
  int health_max_connections = 32;
  // Receives the server's log lines (refused requests, accept back-off);
  // unset = stderr.
  std::function<void(const std::string&)> log;
  // From a request's header to its last body byte.
  std::chrono::seconds read_timeout{30};
  // From a request header's first byte to its last (a TLS handshake too).
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds idle_timeout{90};
  // For each piece of an answer the socket takes.
  std::chrono::seconds write_timeout{10};
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
  // `health_router` serves the health listener (options.health_listen).
  HttpServer(ServerOptions options, const Router* router, Metrics* metrics,
             const Router* health_router = nullptr);
  ~HttpServer();

  // Binds the listening socket. Returns the bound port via port().
  absl::Status Listen();
  uint16_t port() const;
  // The health listener's bound port; 0 if there is none.
  uint16_t health_port() const;
  // Serves until Shutdown() or SIGTERM/SIGINT. REQUIRES: Listen() succeeded.
  void Run();
  // Stops accepting and closes connections once their request is answered.
  void Shutdown();
  // False once shutdown has begun (for /readyz).
  bool accepting() const;
  // Connection slots of the main (or health) listener and the memory budget.
  ConnStats stats(bool health = false) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses "HOST:PORT" ("0.0.0.0:8888", "[::1]:8888").
absl::Status ParseListen(const std::string& text, std::string* host, uint16_t* port);

}  // namespace gpusched::http

#endif  // GPUSCHED_HTTP_SERVER_H_
