#include "scheduler/http/router.h"

#include "gpusched/util/strings.h"

namespace gpusched::http {

HttpResponse JsonError(int status, std::string_view message) {
  return HttpResponse{status, "application/json", codec::EncodeErrorBody(message)};
}

HttpResponse BadRequestError(int status, std::string_view message) {
  HttpResponse res = JsonError(status, message);
  res.client_error = std::string(message);
  return res;
}

void Router::Add(std::string method, std::string path, std::string name, Handler h) {
  routes_.push_back({std::move(method), std::move(path), std::move(name), false, std::move(h)});
}

void Router::AddPrefix(std::string method, std::string prefix, std::string name, Handler h) {
  routes_.push_back({std::move(method), std::move(prefix), std::move(name), true, std::move(h)});
}

HttpResponse Router::Dispatch(HttpRequest& req, RequestContext& ctx, std::string* route) const {
  // HEAD is GET without the body (the server drops the body bytes).
  const std::string_view method = req.method == "HEAD" ? std::string_view("GET") : req.method;
  std::string_view path = req.target;
  if (auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  bool path_known = false;
  for (int pass = 0; pass < 2; ++pass) {
    for (const Route& r : routes_) {
      if (r.prefix != (pass == 1)) continue;
      bool match = r.prefix ? path.substr(0, r.path.size()) == r.path : path == r.path;
      if (!match) continue;
      path_known = true;
      if (r.method != method) continue;
      *route = r.name;
      return r.handler(req, ctx);
    }
  }
  *route = "unknown";
  if (path_known) {
    return JsonError(405, StrCat("method ", req.method, " not allowed on ", path));
  }
  return JsonError(404, StrCat("no such path: ", path));
}

}  // namespace gpusched::http
