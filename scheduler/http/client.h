// HttpClient: a small Boost.Beast HTTP/1.1 client for one plain-HTTP server
// (the simulator's end-to-end mode speaking to `gpusched serve`, and
// `gpusched queue --explain` reading its debug page). It keeps one
// keep-alive connection, opened on first use; a request on a connection the
// server has since closed is retried once on a fresh connection. Connect and
// each request (write + read) have timeouts.
//
// Callers: the simulate and queue commands, tests. Errors: a transport failure is
// absl::UnavailableError (DeadlineExceededError on a timeout); PostJson also
// turns a non-200 status into UnavailableError with the body's text.
//
// Not thread-safe: one connection, one request at a time; use one client per
// thread.
#ifndef GPUSCHED_HTTP_CLIENT_H_
#define GPUSCHED_HTTP_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpusched::http {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{30000};
};

struct ClientResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `base_url`: "http://HOST:PORT[/PREFIX]" (e.g.
  // "http://127.0.0.1:8888/scheduler"); request paths are appended to PREFIX.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(const std::string& base_url,
                                                            ClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` as application/json to PREFIX + `path`.
  absl::StatusOr<ClientResponse> Post(const std::string& path, const std::string& body);
  // GETs PREFIX + `path`.
  absl::StatusOr<ClientResponse> Get(const std::string& path);
  // Post, then the body of a 200 answer (anything else is an error).
  absl::StatusOr<std::string> PostJson(const std::string& path, const std::string& body);

  // Connections opened so far (1 while keep-alive holds).
  int connections() const;

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  absl::StatusOr<ClientResponse> Send(bool post, const std::string& path, const std::string& body);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::http

#endif  // GPUSCHED_HTTP_CLIENT_H_
