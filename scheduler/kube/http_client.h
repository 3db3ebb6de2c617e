// KubeHttpClient: HTTPS/1.1 to the Kubernetes API server with Boost.Beast
// over OpenSSL. Bearer-token (static, file, or a kubeconfig credential
// plugin's, renewed and retried once when the server answers 401) or
// client-certificate authentication, server
// verification against the configured CA (host name or IP SAN), keep-alive
// connection reuse, a client-side QPS/burst token bucket, per-request
// timeouts, and streaming GETs for watches.
//
// Callers: the list/watch source, the writer, leader election and the
// topology agent (all in scheduler/kube). Errors: a transport failure is
// absl::UnavailableError (DeadlineExceeded on a timeout); any HTTP status is
// a successful result that the caller interprets.
//
// Thread-safe: any number of threads may call Do and Stream concurrently;
// each call uses its own connection (taken from or returned to the pool).
#ifndef GPUSCHED_KUBE_HTTP_CLIENT_H_
#define GPUSCHED_KUBE_HTTP_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/kube/kube_config.h"

namespace gpusched::kube {

struct ClientOptions {
  double qps = 50;  // sustained requests per second (0 = unlimited)
  int burst = 100;
  std::chrono::milliseconds timeout{10000};  // whole request, unless overridden
  int max_idle_connections = 8;
  std::string user_agent = "gpusched";
  std::string peer = "the API server";  // who the server is, in errors
};

struct HttpResult {
  int status = 0;
  std::string body;
};

// Token bucket: Take() blocks until a token is available. Thread-safe.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst);
  void Take() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  const double qps_;
  const double burst_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_ ABSL_GUARDED_BY(mu_);
};

// Lets another thread abort a running Stream (or one about to start).
// Thread-safe.
class StreamCanceller {
 public:
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_);
  // Used by the client: `abort` closes the stream's connection.
  bool Arm(std::function<void()> abort) ABSL_LOCKS_EXCLUDED(mu_);
  void Disarm() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> abort_ ABSL_GUARDED_BY(mu_);
};

class KubeHttpClient {
 public:
  static absl::StatusOr<std::unique_ptr<KubeHttpClient>> Create(KubeConfig config,
                                                                ClientOptions options);
  ~KubeHttpClient();
  KubeHttpClient(const KubeHttpClient&) = delete;
  KubeHttpClient& operator=(const KubeHttpClient&) = delete;

  // One request. `timeout` 0 = options.timeout.
  absl::StatusOr<HttpResult> Do(std::string_view method, std::string_view target,
                                std::string body = "",
                                std::string_view content_type = "application/json",
                                std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // A streaming GET (watch). Returns the HTTP status; a non-200 body goes to
  // `error_body`. For 200, calls `on_line` with each non-empty line until the
  // server ends the response (returns 200), `on_line` returns false (200), or
  // the stream fails (transport error, CancelledError after Cancel). `idle`
  // bounds each wait for data. `on_read`, if given, is called after the lines
  // of each read from the socket were passed to `on_line` (a caller batching
  // what arrived together applies it there).
  absl::StatusOr<int> Stream(std::string_view target, std::chrono::milliseconds idle,
                             const std::function<bool(std::string&)>& on_line,
                             std::string* error_body, StreamCanceller* canceller,
                             const std::function<void()>& on_read = nullptr);

  const KubeConfig& config() const { return config_; }

 private:
  struct Conn;
  struct Tls;
  KubeHttpClient(KubeConfig config, ClientOptions options, std::unique_ptr<Tls> tls);
  absl::StatusOr<std::unique_ptr<Conn>> Connect(std::chrono::milliseconds timeout);
  std::unique_ptr<Conn> TakeIdle() ABSL_LOCKS_EXCLUDED(mu_);
  void PutIdle(std::unique_ptr<Conn> c) ABSL_LOCKS_EXCLUDED(mu_);
  std::string Authorization();

  const KubeConfig config_;
  const ClientOptions options_;
  std::unique_ptr<Tls> tls_;
  TokenSource token_;
  TokenBucket bucket_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_HTTP_CLIENT_H_
