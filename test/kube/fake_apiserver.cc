#include "test/kube/fake_apiserver.h"

#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"

namespace gpusched::testing {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Stream = ssl::stream<tcp::socket>;

namespace {

struct Reply {
  int status = 200;
  std::string body;
};

Reply StatusReply(int code, const std::string& reason, const std::string& message) {
  Json j = {
      {"kind", "Status"}, {"apiVersion", "v1"}, {"status", code < 300 ? "Success" : "Failure"},
      {"code", code},     {"reason", reason},   {"message", message}};
  return {code, j.dump()};
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) out.push_back(part);
  return out;
}

std::map<std::string, std::string> Query(const std::string& q) {
  std::map<std::string, std::string> out;
  std::stringstream ss(q);
  std::string kv;
  while (std::getline(ss, kv, '&')) {
    size_t eq = kv.find('=');
    out[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  return out;
}

std::string KeyOf(const Json& obj) {
  const Json& m = obj["metadata"];
  std::string name = m.value("name", "");
  return m.contains("namespace") ? m["namespace"].get<std::string>() + "/" + name : name;
}

}  // namespace

struct FakeApiServer::Impl {
  struct Event {
    int64_t rv;
    std::string kind, type;
    Json obj;
  };
  FakeApiServer* self;
  std::string token;
  asio::io_context ioc;
  ssl::context ctx{ssl::context::tls_server};
  tcp::acceptor acceptor{ioc};
  std::thread accept_thread;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  int64_t rv = 100;
  int64_t compacted = 0;
  int drop_gen = 0;
  int uid_seq = 0;
  std::map<std::string, std::map<std::string, Json>> store;
  std::vector<Event> log;
  // A paginated list's items as of its first page (shared: a continue reads
  // its page without copying the list).
  // Each object serialized as last written (kind -> key -> (resourceVersion,
  // JSON)): lists are built from these, so listing 200,000 pods serializes
  // nothing. An entry whose version is not the object's is not used.
  std::map<std::string,
           std::map<std::string, std::pair<int64_t, std::shared_ptr<const std::string>>>>
      dumps;
  // A paginated list's items as of its first page (serialized, shared with
  // `dumps`: neither the first page nor a continue copies the objects).
  using Listed = std::vector<std::shared_ptr<const std::string>>;
  std::map<std::string, std::pair<int64_t, std::shared_ptr<const Listed>>> snapshots;
  int snapshot_seq = 0;
  std::map<std::string, int> counts;
  std::map<std::string, std::vector<std::string>> watch_versions;  // path -> resourceVersion asked
  int fail_n = 0, fail_status = 0;
  std::string fail_prefix;
  int expire_continues = 0;  // continue requests still to answer 410
  std::string expire_kind;
  int events = 0;
  std::vector<Json> event_log;  // bodies of created events
  std::set<int> fds;
  std::set<std::string> tokens;
  std::set<std::string> api_groups;  // served "<group>/<version>"
  std::set<std::string> forbidden;   // path prefixes answered 403 (RBAC)
  std::vector<std::thread> threads;

  // REQUIRES: mu held.
  Json& PutLocked(const std::string& kind, Json obj) {
    std::string key = KeyOf(obj);
    auto& m = store[kind];
    bool exists = m.count(key) > 0;
    if (kind.find('/') != std::string::npos) StampCustomLocked(exists ? &m[key] : nullptr, obj);
    obj["metadata"]["resourceVersion"] = std::to_string(++rv);
    if (!obj["metadata"].contains("uid"))
      obj["metadata"]["uid"] = "uid-" + std::to_string(++uid_seq);
    log.push_back({rv, kind, exists ? "MODIFIED" : "ADDED", obj});
    cv.notify_all();
    dumps[kind][key] = {rv, std::make_shared<const std::string>(obj.dump())};
    return m[key] = std::move(obj);
  }
  // Custom resources get what the API server sets: uid and creationTimestamp
  // kept from the stored object, metadata.generation bumped when the spec
  // changes. REQUIRES: mu held.
  void StampCustomLocked(const Json* old, Json& obj) {
    Json& meta = obj["metadata"];
    if (old != nullptr) {
      const Json& om = (*old)["metadata"];
      if (om.contains("uid")) meta["uid"] = om["uid"];
      meta["creationTimestamp"] = om.value("creationTimestamp", "");
      const int64_t g = om.value("generation", int64_t{1});
      meta["generation"] = obj.value("spec", Json()) == old->value("spec", Json()) ? g : g + 1;
      if (!obj.contains("status") && old->contains("status")) obj["status"] = (*old)["status"];
      return;
    }
    meta["generation"] = 1;
    if (!meta.contains("creationTimestamp")) {
      char ts[32];
      std::snprintf(ts, sizeof ts, "2026-01-01T00:%02d:%02dZ", static_cast<int>(rv / 60 % 60),
                    static_cast<int>(rv % 60));
      meta["creationTimestamp"] = ts;
    }
  }
  // As if other objects had been written since: every version a client
  // holds is now too old. REQUIRES: mu held.
  void CompactLocked() {
    rv += 1;
    compacted = rv;
    log.clear();
    snapshots.clear();
  }
  void DeleteLocked(const std::string& kind, const std::string& key) {
    auto& m = store[kind];
    auto it = m.find(key);
    if (it == m.end()) return;
    Json obj = it->second;
    obj["metadata"]["resourceVersion"] = std::to_string(++rv);
    m.erase(it);
    dumps[kind].erase(key);
    log.push_back({rv, kind, "DELETED", obj});
    cv.notify_all();
  }

  void Serve(tcp::socket sock);
  Reply Handle(http::request<http::string_body>& req, Stream& s, bool* streamed);
  Reply HandleList(const std::string& kind, std::map<std::string, std::string>& q);
  void HandleWatch(const std::string& kind, std::map<std::string, std::string>& q, Stream& s);
  Reply HandlePod(http::request<http::string_body>& req, const std::vector<std::string>& p,
                  Stream& s, bool* streamed);
  Reply HandleLease(http::request<http::string_body>& req, const std::vector<std::string>& p);
  // GET, PUT (409 unless metadata.resourceVersion is the stored one) and
  // POST (409 if it exists) of a namespaced object; `p` as for leases
  // ("", "apis", group, version, "namespaces", ns, plural[, name]).
  Reply HandleNamespaced(http::request<http::string_body>& req, const std::vector<std::string>& p,
                         const std::string& kind);
};

FakeApiServer::FakeApiServer(const TestPki& pki, std::string token)
    : impl_(std::make_unique<Impl>()) {
  impl_->self = this;
  impl_->token = std::move(token);
  impl_->ctx.use_certificate_chain(asio::buffer(pki.server_cert_pem));
  impl_->ctx.use_private_key(asio::buffer(pki.server_key_pem), ssl::context::pem);
  impl_->api_groups.insert("batch/v1");  // built in: every API server serves Jobs
}

FakeApiServer::~FakeApiServer() { Stop(); }

void FakeApiServer::Start() {
  Impl* im = impl_.get();
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  im->acceptor.open(ep.protocol());
  im->acceptor.set_option(tcp::acceptor::reuse_address(true));
  im->acceptor.bind(ep);
  im->acceptor.listen();
  im->accept_thread = std::thread([im] {
    while (true) {
      boost::system::error_code ec;
      tcp::socket sock(im->ioc);
      im->acceptor.accept(sock, ec);
      std::lock_guard<std::mutex> lock(im->mu);
      if (ec || im->stopping) return;
      im->fds.insert(sock.native_handle());
      im->threads.emplace_back([im, s = std::move(sock)]() mutable { im->Serve(std::move(s)); });
    }
  });
}

void FakeApiServer::Stop() {
  Impl* im = impl_.get();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(im->mu);
    if (im->stopping) return;
    im->stopping = true;
    for (int fd : im->fds) ::shutdown(fd, SHUT_RDWR);
    im->cv.notify_all();
  }
  boost::system::error_code ec;
  ::shutdown(im->acceptor.native_handle(), SHUT_RDWR);
  im->acceptor.close(ec);
  if (im->accept_thread.joinable()) im->accept_thread.join();
  {
    std::lock_guard<std::mutex> lock(im->mu);
    threads.swap(im->threads);
  }
  for (auto& t : threads) t.join();
}

uint16_t FakeApiServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void FakeApiServer::Put(const std::string& kind, Json obj) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->PutLocked(kind, std::move(obj));
}

void FakeApiServer::ServeApiGroup(const std::string& group_version) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->api_groups.insert(group_version);
}

void FakeApiServer::StopServingApiGroup(const std::string& group_version) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->api_groups.erase(group_version);
}

void FakeApiServer::Forbid(const std::string& path_prefix) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->forbidden.insert(path_prefix);
}

void FakeApiServer::Delete(const std::string& kind, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->DeleteLocked(kind, key);
}

std::optional<Json> FakeApiServer::Get(const std::string& kind, const std::string& key) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& m = impl_->store[kind];
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> FakeApiServer::List(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<Json> out;
  for (auto& [k, v] : impl_->store[kind]) out.push_back(v);
  return out;
}

int64_t FakeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->rv;
}

void FakeApiServer::CompactAndDropWatches() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->CompactLocked();
  ++impl_->drop_gen;
  impl_->cv.notify_all();
}

void FakeApiServer::FailNext(int n, int status, std::string path_prefix) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->fail_n = n;
  impl_->fail_status = status;
  impl_->fail_prefix = std::move(path_prefix);
}

void FakeApiServer::ExpireNextContinues(int n, const std::string& kind) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->expire_continues = n;
  impl_->expire_kind = kind;
}

void FakeApiServer::AllowToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tokens.insert(token);
}

void FakeApiServer::RevokeToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tokens.erase(token);
}

void FakeApiServer::DropWatches() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  ++impl_->drop_gen;
  impl_->cv.notify_all();
}

int FakeApiServer::requests(const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  int n = 0;
  for (auto& [k, v] : impl_->counts) {
    if (k.rfind(prefix, 0) == 0) n += v;
  }
  return n;
}

std::vector<std::string> FakeApiServer::watch_versions(const std::string& path) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->watch_versions.find(path);
  return it == impl_->watch_versions.end() ? std::vector<std::string>{} : it->second;
}

int FakeApiServer::events_created() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->events;
}

std::vector<Json> FakeApiServer::Events() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->event_log;
}

std::string KubeconfigYaml(uint16_t port, const std::string& ca_pem, const std::string& token) {
  std::string ca;
  absl::Base64Escape(ca_pem, &ca);
  return "apiVersion: v1\nkind: Config\n# test cluster\nclusters:\n- cluster:\n"
         "    certificate-authority-data: " +
         ca + "\n    server: https://127.0.0.1:" + std::to_string(port) +
         "\n  name: fake\ncontexts:\n- context:\n    cluster: fake\n"
         "    user: gpusched\n  name: fake\ncurrent-context: fake\npreferences: {}\nusers:\n"
         "- name: gpusched\n  user:\n    token: \"" +
         token + "\"\n";
}

void FakeApiServer::Impl::Serve(tcp::socket sock) {
  const int fd = sock.native_handle();
  Stream s(std::move(sock), ctx);
  boost::system::error_code ec;
  s.handshake(ssl::stream_base::server, ec);
  beast::flat_buffer buf;
  while (!ec) {
    http::request<http::string_body> req;
    http::read(s, buf, req, ec);
    if (ec) break;
    if (int d = self->delay_ms_.load(); d > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(d));
    bool streamed = false;
    Reply r = Handle(req, s, &streamed);
    if (streamed) break;
    if (r.status < 0) break;  // lost response: close without answering
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    res.set(http::field::content_type, "application/json");
    res.keep_alive(req.keep_alive());
    res.body() = std::move(r.body);
    res.prepare_payload();
    http::write(s, res, ec);
    if (!req.keep_alive()) break;
  }
  boost::system::error_code ignored;
  s.lowest_layer().shutdown(tcp::socket::shutdown_both, ignored);
  std::lock_guard<std::mutex> lock(mu);
  fds.erase(fd);
}

Reply FakeApiServer::Impl::Handle(http::request<http::string_body>& req, Stream& s,
                                  bool* streamed) {
  std::string target(req.target());
  size_t qm = target.find('?');
  std::string path = target.substr(0, qm);
  auto q = Query(qm == std::string::npos ? "" : target.substr(qm + 1));
  const bool watch = q.count("watch") > 0;
  const std::string method(req.method_string());
  {
    std::lock_guard<std::mutex> lock(mu);
    ++counts[method + " " + path + (watch ? "?watch" : "")];
    if (watch)
      watch_versions[path].push_back(q.count("resourceVersion") ? q["resourceVersion"] : "");
    std::string auth(req[http::field::authorization]);
    if (auth != "Bearer " + token &&
        (auth.rfind("Bearer ", 0) != 0 || !tokens.count(auth.substr(7)))) {
      return StatusReply(401, "Unauthorized", "Unauthorized");
    }
    for (const std::string& f : forbidden) {
      if (path.rfind(f, 0) == 0) {
        return StatusReply(403, "Forbidden",
                           "forbidden: the service account cannot " + method + " " + path);
      }
    }
    if (fail_n > 0 && path.rfind(fail_prefix, 0) == 0) {
      --fail_n;
      return StatusReply(fail_status, fail_status == 429 ? "TooManyRequests" : "InternalError",
                         "injected fault");
    }
  }
  auto p = Split(path);  // "", "api", "v1", ...
  if (p.size() == 4 && p[1] == "api" && (p[3] == "nodes" || p[3] == "pods") && method == "GET") {
    if (watch) {
      *streamed = true;
      HandleWatch(p[3], q, s);
      return {};
    }
    return HandleList(p[3], q);
  }
  // A namespaced pod list (as `gpusched queue -n NS` asks): the pods of NS.
  if (p.size() == 6 && p[1] == "api" && p[3] == "namespaces" && p[5] == "pods" && method == "GET" &&
      !watch) {
    q["namespace"] = p[4];
    return HandleList("pods", q);
  }
  if (p.size() == 5 && p[1] == "api" && p[3] == "nodes") {
    std::lock_guard<std::mutex> lock(mu);
    auto it = store["nodes"].find(p[4]);
    if (it == store["nodes"].end())
      return StatusReply(404, "NotFound", "nodes \"" + p[4] + "\" not found");
    if (method == "GET") return {200, it->second.dump()};
    if (method != "PATCH") return StatusReply(405, "MethodNotAllowed", method);
    if (req[http::field::content_type] != "application/merge-patch+json") {
      return StatusReply(415, "UnsupportedMediaType", "want merge-patch");
    }
    Json patch = Json::parse(req.body(), nullptr, false);
    if (patch.is_discarded()) return StatusReply(400, "BadRequest", "bad JSON");
    Json obj = it->second;
    obj.merge_patch(patch);
    return {200, PutLocked("nodes", obj).dump()};
  }
  if (p.size() >= 7 && p[1] == "api" && p[3] == "namespaces" && p[5] == "pods") {
    return HandlePod(req, p, s, streamed);
  }
  if (p.size() == 6 && p[1] == "api" && p[3] == "namespaces" && p[5] == "events" &&
      method == "POST") {
    std::lock_guard<std::mutex> lock(mu);
    ++events;
    Json ev = Json::parse(req.body(), nullptr, false);
    if (!ev.is_discarded()) event_log.push_back(std::move(ev));
    return {201, req.body()};
  }
  if (p.size() >= 7 && p[1] == "apis" && p[2] == "coordination.k8s.io" && p[6] == "leases") {
    return HandleLease(req, p);
  }
  if (p.size() >= 6 && p[1] == "api" && p[3] == "namespaces" && p[5] == "configmaps") {
    // As leases, one index earlier: /api/v1/namespaces/<ns>/configmaps[/<name>].
    std::vector<std::string> q = p;
    q.insert(q.begin() + 1, "");
    return HandleNamespaced(req, q, "configmaps");
  }
  if (p.size() == 5 && p[1] == "apis" && method == "GET") {
    bool served;
    {
      std::lock_guard<std::mutex> lock(mu);
      served = api_groups.count(p[2] + "/" + p[3]) > 0;
    }
    if (served && watch) {
      *streamed = true;
      HandleWatch(p[2] + "/" + p[4], q, s);
      return {};
    }
    if (served) return HandleList(p[2] + "/" + p[4], q);
  }
  if (p.size() == 9 && p[1] == "apis" && p[4] == "namespaces" && p[8] == "status" &&
      method == "PATCH") {
    std::lock_guard<std::mutex> lock(mu);
    if (!api_groups.count(p[2] + "/" + p[3])) return StatusReply(404, "NotFound", "not served");
    auto& m = store[p[2] + "/" + p[6]];
    auto it = m.find(p[5] + "/" + p[7]);
    if (it == m.end()) return StatusReply(404, "NotFound", p[6] + " \"" + p[7] + "\" not found");
    if (req[http::field::content_type] != "application/merge-patch+json") {
      return StatusReply(415, "UnsupportedMediaType", "want merge-patch");
    }
    Json patch = Json::parse(req.body(), nullptr, false);
    if (patch.is_discarded() || !patch.is_object())
      return StatusReply(400, "BadRequest", "bad JSON");
    Json obj = it->second;
    Json status = obj.value("status", Json::object());
    status.merge_patch(patch.value("status", Json::object()));
    obj["status"] = std::move(status);  // the status subresource changes nothing else
    return {200, PutLocked(p[2] + "/" + p[6], obj).dump()};
  }
  if (p.size() >= 4 && p[1] == "apis" && method == "GET") {
    std::lock_guard<std::mutex> lock(mu);
    if (api_groups.count(p[2] + "/" + p[3])) {
      if (p.size() == 4) {
        return {200, Json{{"kind", "APIResourceList"}, {"groupVersion", p[2] + "/" + p[3]}}.dump()};
      }
      if (p.size() == 8 && p[4] == "namespaces") {
        auto& m = store[p[2] + "/" + p[6]];
        auto it = m.find(p[5] + "/" + p[7]);
        if (it == m.end())
          return StatusReply(404, "NotFound", p[6] + " \"" + p[7] + "\" not found");
        return {200, it->second.dump()};
      }
    }
  }
  return StatusReply(404, "NotFound", "no route " + method + " " + path);
}

Reply FakeApiServer::Impl::HandleList(const std::string& kind,
                                      std::map<std::string, std::string>& q) {
  std::lock_guard<std::mutex> lock(mu);
  int64_t list_rv = rv;
  std::shared_ptr<const Listed> listed;
  size_t offset = 0;
  std::string id;
  if (!q["continue"].empty()) {
    std::string token = q["continue"];
    size_t colon = token.find(':');
    id = token.substr(0, colon);
    auto it = snapshots.find(id);
    const bool expire = expire_continues > 0 && kind == expire_kind;
    if (it == snapshots.end() || expire) {
      if (expire) --expire_continues;
      return StatusReply(410, "Expired", "continue token expired");
    }
    offset = std::stoul(token.substr(colon + 1));
    list_rv = it->second.first;
    listed = it->second.second;
  } else {
    auto fresh = std::make_shared<Listed>();
    auto& cached = dumps[kind];
    for (auto& [k, v] : store[kind]) {
      if (q["namespace"].empty() || v["metadata"].value("namespace", "") == q["namespace"]) {
        auto c = cached.find(k);
        const bool current =
            c != cached.end() && std::to_string(c->second.first) ==
                                     v["metadata"].value("resourceVersion", std::string());
        fresh->push_back(current ? c->second.second
                                 : std::make_shared<const std::string>(v.dump()));
      }
    }
    listed = std::move(fresh);
  }
  const Listed& items = *listed;
  size_t limit = q["limit"].empty() ? items.size() : std::stoul(q["limit"]);
  Json metadata = {{"resourceVersion", std::to_string(list_rv)}};
  if (offset + limit < items.size()) {
    if (id.empty()) {
      id = std::to_string(++snapshot_seq);
      snapshots[id] = {list_rv, listed};
    }
    metadata["continue"] = id + ":" + std::to_string(offset + limit);
  }
  std::string body = Json{
      {"kind", kind == "nodes" ? "NodeList" : "PodList"},
      {"apiVersion", "v1"},
      {"metadata",
       metadata}}.dump();
  body.pop_back();  // the closing brace: the items follow
  body += ",\"items\":[";
  for (size_t i = offset; i < items.size() && i < offset + limit; ++i) {
    if (i > offset) body += ',';
    body += *items[i];
  }
  body += "]}";
  return {200, std::move(body)};
}

void FakeApiServer::Impl::HandleWatch(const std::string& kind,
                                      std::map<std::string, std::string>& q, Stream& s) {
  self->open_watches_++;
  struct Dec {
    std::atomic<int>& n;
    ~Dec() { --n; }
  } dec{self->open_watches_};
  boost::system::error_code ec;
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::content_type, "application/json");
  res.chunked(true);
  http::response_serializer<http::empty_body> sr{res};
  http::write_header(s, sr, ec);
  if (ec) return;
  auto send = [&](const Json& j) {
    std::string line = j.dump() + "\n";
    asio::write(s, http::make_chunk(asio::buffer(line)), ec);
    return !ec;
  };
  int64_t cursor = q["resourceVersion"].empty() ? 0 : std::stoll(q["resourceVersion"]);
  const bool bookmarks = q["allowWatchBookmarks"] == "true";
  const int timeout = q["timeoutSeconds"].empty() ? 1800 : std::stoi(q["timeoutSeconds"]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  auto last_bookmark = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu);
  const int my_drop = drop_gen;
  if (cursor < compacted) {
    Json err = {{"type", "ERROR"},
                {"object",
                 {{"kind", "Status"},
                  {"apiVersion", "v1"},
                  {"status", "Failure"},
                  {"code", 410},
                  {"reason", "Expired"},
                  {"message", "too old resource version: " + std::to_string(cursor) + " (" +
                                  std::to_string(compacted) + ")"}}}};
    lock.unlock();
    send(err);
    asio::write(s, http::make_chunk_last(), ec);
    return;
  }
  while (true) {
    std::vector<Json> out;
    for (const Event& e : log) {
      if (e.rv > cursor && e.kind == kind) out.push_back({{"type", e.type}, {"object", e.obj}});
    }
    if (!log.empty()) cursor = std::max(cursor, log.back().rv);
    const int bm = self->bookmark_ms_.load();
    bool bookmark = bookmarks && std::chrono::steady_clock::now() - last_bookmark >=
                                     std::chrono::milliseconds(bm);
    if (bookmark) {
      last_bookmark = std::chrono::steady_clock::now();
      out.push_back({{"type", "BOOKMARK"},
                     {"object",
                      {{"kind", kind == "nodes" ? "Node" : "Pod"},
                       {"apiVersion", "v1"},
                       {"metadata", {{"resourceVersion", std::to_string(rv)}}}}}});
      cursor = std::max(cursor, rv);
    }
    lock.unlock();
    for (const Json& j : out) {
      if (!send(j)) return;
    }
    lock.lock();
    if (stopping || drop_gen != my_drop) return;  // abrupt: no last chunk
    if (std::chrono::steady_clock::now() >= deadline) break;
    int64_t seen = cursor;
    cv.wait_for(lock, std::chrono::milliseconds(std::max(10, bm / 2)), [&] {
      return stopping || drop_gen != my_drop || (!log.empty() && log.back().rv > seen);
    });
    if (stopping || drop_gen != my_drop) return;
  }
  lock.unlock();
  asio::write(s, http::make_chunk_last(), ec);
}

Reply FakeApiServer::Impl::HandlePod(http::request<http::string_body>& req,
                                     const std::vector<std::string>& p, Stream& s, bool* streamed) {
  const std::string method(req.method_string());
  const std::string key = p[4] + "/" + p[6];
  const std::string sub = p.size() > 7 ? p[7] : "";
  std::unique_lock<std::mutex> lock(mu);
  auto& pods = store["pods"];
  auto it = pods.find(key);
  if (it == pods.end()) return StatusReply(404, "NotFound", "pods \"" + p[6] + "\" not found");
  if (sub.empty() && method == "GET") return {200, it->second.dump()};
  Json body = Json::parse(req.body(), nullptr, false);
  if (body.is_discarded()) return StatusReply(400, "BadRequest", "bad JSON");
  if (sub.empty() && method == "PATCH") {
    if (req[http::field::content_type] != "application/merge-patch+json") {
      return StatusReply(415, "UnsupportedMediaType", "want merge-patch");
    }
    Json obj = it->second;
    obj.merge_patch(body);
    return {200, PutLocked("pods", obj).dump()};
  }
  if (sub == "binding" && method == "POST") {
    Json obj = it->second;
    std::string uid = body["metadata"].value("uid", "");
    if (!uid.empty() && uid != obj["metadata"]["uid"]) {
      return StatusReply(409, "Conflict", "Precondition failed: UID in precondition: " + uid);
    }
    std::string current = obj["spec"].value("nodeName", "");
    if (!current.empty()) {
      return StatusReply(409, "Conflict",
                         "pod " + p[6] + " is already assigned to node \"" + current + "\"");
    }
    obj["spec"]["nodeName"] = body["target"]["name"];
    PutLocked("pods", obj);
    if (self->lose_bind_.exchange(false)) {
      *streamed = true;  // applied, but the client never hears back
      lock.unlock();
      boost::system::error_code ignored;
      s.lowest_layer().shutdown(tcp::socket::shutdown_both, ignored);
      return {};
    }
    return StatusReply(201, "", "");
  }
  if (sub == "eviction" && method == "POST") {
    if (self->evict_429_.load() > 0) {
      --self->evict_429_;
      return StatusReply(429, "TooManyRequests",
                         "Cannot evict pod as it would violate the pod's disruption budget.");
    }
    DeleteLocked("pods", key);
    return StatusReply(201, "", "");
  }
  return StatusReply(405, "MethodNotAllowed", method + " " + sub);
}

Reply FakeApiServer::Impl::HandleLease(http::request<http::string_body>& req,
                                       const std::vector<std::string>& p) {
  return HandleNamespaced(req, p, "leases");
}

Reply FakeApiServer::Impl::HandleNamespaced(http::request<http::string_body>& req,
                                            const std::vector<std::string>& p,
                                            const std::string& kind) {
  const std::string method(req.method_string());
  std::lock_guard<std::mutex> lock(mu);
  auto& leases = store[kind];
  if (p.size() == 7 && method == "POST") {
    Json body = Json::parse(req.body(), nullptr, false);
    if (body.is_discarded()) return StatusReply(400, "BadRequest", "bad JSON");
    std::string key = p[5] + "/" + body["metadata"].value("name", "");
    if (leases.count(key)) return StatusReply(409, "AlreadyExists", kind + " exists");
    body["metadata"]["namespace"] = p[5];
    body["metadata"].erase("resourceVersion");
    return {201, PutLocked(kind, body).dump()};
  }
  if (p.size() != 8) return StatusReply(404, "NotFound", "bad " + kind + " path");
  std::string key = p[5] + "/" + p[7];
  auto it = leases.find(key);
  if (method == "GET") {
    if (it == leases.end())
      return StatusReply(404, "NotFound", kind + " \"" + p[7] + "\" not found");
    return {200, it->second.dump()};
  }
  if (method == "PUT") {
    if (it == leases.end()) return StatusReply(404, "NotFound", kind + " not found");
    Json body = Json::parse(req.body(), nullptr, false);
    if (body.is_discarded()) return StatusReply(400, "BadRequest", "bad JSON");
    if (body["metadata"].value("resourceVersion", "") !=
        it->second["metadata"]["resourceVersion"]) {
      return StatusReply(
          409, "Conflict",
          "the object has been modified; please apply your changes to the latest version");
    }
    body["metadata"]["namespace"] = p[5];
    body["metadata"]["uid"] = it->second["metadata"]["uid"];
    return {200, PutLocked(kind, body).dump()};
  }
  return StatusReply(405, "MethodNotAllowed", method);
}

Json NodeJson(const std::string& name, int gpus, const std::string& product) {
  std::string n = std::to_string(gpus);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.present", "true"},
              {"nvidia.com/gpu.product", product},
              {"nvidia.com/gpu.memory", "81920"},
              {"nvidia.com/gpu.count", n}}}}},
          {"spec", Json::object()},
          {"status",
           {{"capacity", {{"cpu", "96"}, {"memory", "1000Gi"}, {"nvidia.com/gpu", n}}},
            {"allocatable", {{"cpu", "96"}, {"memory", "1000Gi"}, {"nvidia.com/gpu", n}}}}}};
}

Json PodJson(const std::string& ns, const std::string& name, int gpus, const std::string& node,
             const std::string& gpu_ids, const std::string& phase) {
  std::string g = std::to_string(gpus);
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", ns},
                {"uid", "uid-" + ns + "-" + name},
                {"creationTimestamp", "2026-01-01T00:00:00Z"},
                {"annotations", Json::object()}}},
              {"spec",
               {{"schedulerName", "gpu-scheduler"},
                {"containers",
                 {{{"name", "main"},
                   {"resources",
                    {{"limits", {{"nvidia.com/gpu", g}, {"cpu", "1"}, {"memory", "1Gi"}}},
                     {"requests", {{"nvidia.com/gpu", g}, {"cpu", "1"}, {"memory", "1Gi"}}}}}}}}}},
              {"status", {{"phase", phase}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!gpu_ids.empty()) pod["metadata"]["annotations"]["gpusched.io/gpu-ids"] = gpu_ids;
  return pod;
}

void PutProductionCluster(FakeApiServer& api, int nodes, int running_per_node, int pending) {
  auto ns = [](int i) { return "team-" + std::to_string(i % 500); };
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "n-" + std::to_string(n);
    api.Put("nodes", NodeJson(node, 8));
    for (int d = 0; d < running_per_node; ++d) {
      api.Put("pods", PodJson(ns(n * running_per_node + d), node + "-p" + std::to_string(d), 1,
                              node, std::to_string(d), "Running"));
    }
  }
  for (int p = 0; p < pending; ++p) {
    api.Put("pods", PodJson(ns(p), "wait-" + std::to_string(p), 1));
  }
}

}  // namespace gpusched::testing
