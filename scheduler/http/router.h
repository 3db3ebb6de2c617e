// Router: maps (method, path) to a handler. Requests and responses here are
// plain structs, so handlers are unit-tested without sockets; the Beast
// server (server.h) converts to and from the wire.
//
// Routes are registered before the server starts; lookups are then read-only
// and thread-safe. Handlers must be thread-safe (they run on any I/O thread);
// per-connection scratch state is passed in RequestContext.
#ifndef GPUSCHED_HTTP_ROUTER_H_
#define GPUSCHED_HTTP_ROUTER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/codec/extender_codec.h"

namespace gpusched::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, e.g. "/scheduler/filter"
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Set when the request was bad (it could not be decoded), whatever the
  // status: the server logs it (rate-limited) and counts it in
  // gpusched_request_errors_total. Not sent.
  std::string client_error = {};
};

// Per-connection scratch space: reused between requests on one connection.
struct RequestContext {
  codec::RequestDecoder decoder;
};

using Handler = std::function<HttpResponse(HttpRequest&, RequestContext&)>;

// Returns a JSON error response {"Error": message}.
HttpResponse JsonError(int status, std::string_view message);
// JsonError for a request that could not be decoded (client_error set).
HttpResponse BadRequestError(int status, std::string_view message);

class Router {
 public:
  // Exact path match. `name` labels the route in metrics ("filter").
  void Add(std::string method, std::string path, std::string name, Handler h);
  // Path prefix match (for /debug/pods/<ns>/<name>); tried after exact routes.
  void AddPrefix(std::string method, std::string prefix, std::string name, Handler h);

  // Returns the response; 404 for unknown paths, 405 for a known path with
  // another method. HEAD is dispatched as GET (the server sends no body). `*route` receives the
  // route's name ("unknown" if none).
  HttpResponse Dispatch(HttpRequest& req, RequestContext& ctx, std::string* route) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    std::string name;
    bool prefix;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace gpusched::http

#endif  // GPUSCHED_HTTP_ROUTER_H_
