#include "scheduler/http/server.h"

#include <array>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"

namespace gpusched::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

absl::Status ParseListen(const std::string& text, std::string* host, uint16_t* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 >= text.size()) {
    return absl::InvalidArgumentError(StrCat("listen address '", text, "' is not HOST:PORT"));
  }
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(StrCat("listen address '", text, "' has a bad port"));
  }
  *host = h.empty() ? "0.0.0.0" : h;
  *port = static_cast<uint16_t>(p);
  return absl::OkStatus();
}

namespace {

// Spare capacity reserved after a request body, so the JSON decoder (which
// needs 64 readable bytes past the end) parses it in place without a copy.
constexpr size_t kBodyPadding = 64;

// Read buffer capacity per connection. Beast reads at most the buffer's free
// capacity (at least 512 bytes, at most 64 KiB) per call, so a buffer left to
// grow on its own reads a 100 KB ExtenderArgs in hundreds of 512-byte
// recvmsg calls, each with its own epoll round trip.
constexpr size_t kReadBufferBytes = 64 * 1024;
constexpr uint32_t kHeaderLimit = 64 * 1024;
// A connection over the cap is answered from a small header read.
constexpr uint32_t kRefusedHeaderLimit = 8 * 1024;
// Connections over the cap that still get a 503; past these, accept-and-close.
constexpr int kRefusedSlots = 64;
// A JSON decoder keeps the capacity of the largest body it parsed, and its
// parse touches up to ~20x a body's bytes. Every connection may keep what a
// body of kFreeDecoderBytes needs; beyond that, all connections together may
// keep decoders for kRetainedDecoderBytes of bodies (kube-scheduler's few
// connections with their ~100 KB requests fit); the others are dropped after
// their request.
constexpr int64_t kFreeDecoderBytes = 64 * 1024;
constexpr int64_t kRetainedDecoderBytes = 8 << 20;
// After a refusal, unread request bytes are drained (at most this many, for
// at most a second) so the client sees the answer instead of a reset.
constexpr size_t kDrainBytes = 1 << 20;
constexpr int kRetryAfterSeconds = 1;
constexpr std::chrono::milliseconds kBackoffFirst{50};
constexpr std::chrono::milliseconds kBackoffMax{500};

// At most one line per second per HTTP status; the lines skipped meanwhile
// are counted in the next one.
class RefusalLog {
 public:
  // Returns the line to log now, or "" if this one is suppressed.
  std::string Note(int status, std::string_view what) {
    absl::MutexLock l(&mu_);
    Kind& k = kinds_[status];
    const auto now = std::chrono::steady_clock::now();
    if (k.logged && now - k.last < std::chrono::seconds(1)) {
      ++k.suppressed;
      return "";
    }
    std::string line = StrCat("gpusched: refused HTTP request: ", status, " ", what);
    if (k.suppressed > 0) line += StrCat(" (", k.suppressed, " more ", status, "s not logged)");
    k = {true, now, 0};
    return line;
  }

 private:
  struct Kind {
    bool logged = false;
    std::chrono::steady_clock::time_point last;
    int64_t suppressed = 0;
  };
  absl::Mutex mu_;
  std::map<int, Kind> kinds_ ABSL_GUARDED_BY(mu_);
};

// Untrusted text for a log line: printable ASCII only, at most 120 bytes.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 120) out += "...";
  return out;
}

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void CloseIfIdle() = 0;
};

struct Shared {
  ServerOptions opt;
  Metrics* metrics;
  std::atomic<bool> stopping{false};
  // Bytes of request bodies charged by sessions, across all listeners.
  std::atomic<int64_t> inflight_body{0};
  // Sessions alive per listener (Listener::index), refused ones included.
  // Here, not in Listener: sessions still queued in the io_context when it
  // is destroyed outlive the listeners.
  std::atomic<int> open[2] = {0, 0};
  // Body bytes beyond kFreeDecoderBytes whose decoders sessions keep.
  std::atomic<int64_t> retained_decoder{0};
  RefusalLog refusals;
  absl::Mutex mu;
  std::list<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);

  void Log(const std::string& line) {
    if (opt.log) return opt.log(line);
    std::string l = line + "\n";
    fwrite(l.data(), 1, l.size(), stderr);
  }
  void Refused(int status, std::string_view what) {
    metrics->Inc("gpusched_http_rejected_total", "Requests refused at the HTTP layer.",
                 {{"code", std::to_string(status)}});
    if (std::string line = refusals.Note(status, what); !line.empty()) Log(line);
  }
};

// One listening socket: the main port or the health port.
struct Listener {
  explicit Listener(net::io_context& ioc) : acceptor(ioc), backoff_timer(ioc) {}
  std::string name;  // "main", "health": names the listener in logs
  const Router* router = nullptr;
  int max_connections = 0;
  ssl::context* tls = nullptr;  // null = plain HTTP
  tcp::acceptor acceptor;
  net::steady_timer backoff_timer;
  std::chrono::milliseconds backoff{0};
  int index = 0;  // into Shared::open
};

// Request body bytes a session has charged to Shared::inflight_body.
class BodyCharge {
 public:
  explicit BodyCharge(Shared* shared) : shared_(shared) {}
  ~BodyCharge() { Release(); }
  // Adds `n` bytes unless that takes the total past the cap.
  bool Add(int64_t n) {
    int64_t cur = shared_->inflight_body.load();
    do {
      if (cur + n > shared_->opt.max_inflight_body_bytes) return false;
    } while (!shared_->inflight_body.compare_exchange_weak(cur, cur + n));
    bytes_ += n;
    return true;
  }
  void Release() {
    if (bytes_ > 0) shared_->inflight_body.fetch_sub(bytes_);
    bytes_ = 0;
  }

 private:
  Shared* shared_;
  int64_t bytes_ = 0;
};

template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // Takes over one count of shared->open[listener->index]. `refuse`: over the connection
  // cap; the first request is answered 503.
  Session(Stream stream, Shared* shared, Listener* listener, bool refuse)
      : stream_(std::move(stream)),
        shared_(shared),
        listener_(listener),
        charge_(shared),
        open_index_(listener->index),
        refuse_(refuse) {
    if (!refuse_) buffer_.reserve(kReadBufferBytes);
    ctx_.emplace();
    // The parser keeps a reference to this callback.
    on_chunk_ = [this](std::uint64_t, beast::string_view data, beast::error_code& e) {
      if (!charge_.Add(static_cast<int64_t>(data.size()))) {
        over_budget_ = true;
        e = bhttp::error::body_limit;
        return std::size_t{0};
      }
      parser_->get().body().append(data.data(), data.size());
      return data.size();
    };
  }
  ~Session() override {
    shared_->open[open_index_].fetch_sub(1);
    shared_->retained_decoder.fetch_sub(retained_);
  }

  void Start() {
    try {
      peer_ = beast::get_lowest_layer(stream_).socket().remote_endpoint().address().to_string();
    } catch (const std::exception&) {
      peer_ = "?";
    }
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      ReadHeader();
    } else {
      beast::get_lowest_layer(stream_).expires_after(shared_->opt.read_timeout);
      stream_.async_handshake(
          ssl::stream_base::server,
          beast::bind_front_handler(&Session::OnHandshake, this->shared_from_this()));
    }
  }

  void CloseIfIdle() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->idle_) beast::get_lowest_layer(self->stream_).cancel();
    });
  }

 private:
  void OnHandshake(beast::error_code ec) {
    if (ec) return;
    ReadHeader();
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(shared_->opt.max_body_bytes));
    parser_->header_limit(refuse_ ? kRefusedHeaderLimit : kHeaderLimit);
    idle_ = true;
    head_ = false;
    target_.clear();
    if (shared_->stopping && buffer_.size() == 0) return Close(false);
    beast::get_lowest_layer(stream_).expires_after(refuse_ ? shared_->opt.read_timeout
                                                           : shared_->opt.idle_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&Session::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, std::size_t) {
    idle_ = false;
    start_ = std::chrono::steady_clock::now();
    if (ec) return OnReadError(ec);
    const auto& h = parser_->get();
    head_ = h.method() == bhttp::verb::head;
    target_ = Printable(StrCat(std::string(h.method_string()), " ", std::string(h.target())));
    beast::get_lowest_layer(stream_).expires_after(shared_->opt.read_timeout);
    if (refuse_) {
      return Refuse(503, StrCat("gpusched: too many connections (limit ",
                                listener_->max_connections, "); retry later"));
    }
    if (parser_->is_done()) return OnRead({}, 0);
    if (auto len = parser_->content_length()) {
      // Announced: charged whole before a byte of it is read.
      if (!charge_.Add(static_cast<int64_t>(*len))) return RefuseBudget();
      // Size the body once (plus the decoder's parsing padding) instead of
      // growing it chunk by chunk; the limit was checked against the header.
      parser_->get().body().reserve(*len + kBodyPadding);
    } else {
      // Chunked: charged chunk by chunk as it arrives.
      parser_->on_chunk_body(on_chunk_);
    }
    if (beast::iequals(h[bhttp::field::expect], "100-continue") && h.version() >= 11) {
      continue_.emplace(bhttp::status::continue_, h.version());
      return bhttp::async_write(
          stream_, *continue_,
          beast::bind_front_handler(&Session::OnContinueSent, this->shared_from_this()));
    }
    ReadBody();
  }

  void OnContinueSent(beast::error_code ec, std::size_t) {
    continue_.reset();
    if (ec) return Close(false);
    ReadBody();
  }

  void ReadBody() {
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Session::OnRead, this->shared_from_this()));
  }

  void RefuseBudget() {
    Refuse(503, StrCat("gpusched: request bodies in flight exceed ",
                       shared_->opt.max_inflight_body_bytes, " bytes; retry later"));
  }

  void OnReadError(beast::error_code ec) {
    charge_.Release();
    if (ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::connection_reset) {
      return Close(false);
    }
    if (over_budget_) return RefuseBudget();
    if (ec == bhttp::error::body_limit) {
      return Refuse(
          413, StrCat("request body exceeds the limit of ", shared_->opt.max_body_bytes, " bytes"));
    }
    if (ec == bhttp::error::header_limit) return Refuse(431, "request headers too large");
    Refuse(400, StrCat("bad HTTP request: ", ec.message()));
  }

  // Answers `status` without reading (more of) the request, then closes.
  void Refuse(int status, std::string message) {
    charge_.Release();
    shared_->Refused(status, StrCat(target_.empty() ? "" : target_ + " ", "from ", peer_,
                                    " on the ", listener_->name, " port: ", message));
    HttpResponse res = JsonError(status, message);
    Send(std::move(res), false, 11, status == 503 ? kRetryAfterSeconds : 0, true);
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    auto msg = parser_->release();
    const bool keep_alive = msg.keep_alive();
    const unsigned version = msg.version();
    std::string route;
    HttpResponse res;
    size_t body_bytes = 0;
    {
      HttpRequest req;
      req.method = std::string(msg.method_string());
      req.target = std::string(msg.target());
      req.body = std::move(msg.body());
      body_bytes = req.body.size();
      res = listener_->router->Dispatch(req, *ctx_, &route);
    }
    charge_.Release();
    KeepOrDropDecoder(static_cast<int64_t>(body_bytes));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    shared_->metrics->Inc("gpusched_requests_total", "Requests by route and HTTP code.",
                          {{"verb", route}, {"code", std::to_string(res.status)}});
    if (res.status >= 400) {
      shared_->metrics->Inc("gpusched_request_errors_total", "Requests answered with 4xx/5xx.",
                            {{"verb", route}});
    }
    if (route == "unknown") {
      shared_->Refused(res.status, StrCat(target_, " from ", peer_, " on the ", listener_->name,
                                          " port: no such route"));
    }
    shared_->metrics->Observe("gpusched_request_duration_seconds",
                              "Time from request header to response, by route.", {{"verb", route}},
                              secs);
    Send(std::move(res), keep_alive && !shared_->stopping, version, 0, false);
  }

  // Keeps the decoder that parsed `body_bytes` if the retained-decoder
  // budget allows, else replaces it with a fresh one.
  void KeepOrDropDecoder(int64_t body_bytes) {
    const int64_t want = body_bytes - kFreeDecoderBytes;
    if (want <= retained_) return;
    std::atomic<int64_t>& total = shared_->retained_decoder;
    int64_t cur = total.load();
    do {
      if (cur - retained_ + want > kRetainedDecoderBytes) {
        total.fetch_sub(retained_);
        retained_ = 0;
        ctx_.emplace();
        return;
      }
    } while (!total.compare_exchange_weak(cur, cur - retained_ + want));
    retained_ = want;
  }

  // `drain`: the request was not read to its end (a refusal).
  void Send(HttpResponse res, bool keep_alive, unsigned version, int retry_after, bool drain) {
    res_.emplace(static_cast<bhttp::status>(res.status), version);
    res_->set(bhttp::field::server, "gpusched");
    res_->set(bhttp::field::content_type, res.content_type);
    if (retry_after > 0) res_->set(bhttp::field::retry_after, std::to_string(retry_after));
    res_->keep_alive(keep_alive);
    res_->body() = std::move(res.body);
    res_->prepare_payload();
    if (head_) {
      // HEAD: the headers GET would send, no body bytes.
      const size_t length = res_->body().size();
      res_->body().clear();
      res_->content_length(length);
    }
    bhttp::async_write(
        stream_, *res_,
        beast::bind_front_handler(&Session::OnWrite, this->shared_from_this(), keep_alive, drain));
  }

  void OnWrite(bool keep_alive, bool drain, beast::error_code ec, std::size_t) {
    res_.reset();
    if (ec || !keep_alive) return Close(drain && !ec);
    ReadHeader();
  }

  // `drain`: read and drop what the client still sends (up to kDrainBytes,
  // for up to a second) after our FIN, so the answer is not lost to a reset.
  void Close(bool drain) {
    auto& tcp = beast::get_lowest_layer(stream_);
    beast::error_code ec;
    tcp.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (!drain || ec) return tcp.close();
    tcp.expires_after(std::chrono::seconds(1));
    Drain({}, 0);
  }

  void Drain(beast::error_code ec, std::size_t n) {
    drained_ += n;
    auto& tcp = beast::get_lowest_layer(stream_);
    if (ec || drained_ > kDrainBytes) return tcp.close();
    tcp.async_read_some(net::buffer(drain_buf_),
                        beast::bind_front_handler(&Session::Drain, this->shared_from_this()));
  }

  Stream stream_;
  Shared* shared_;
  Listener* listener_;
  BodyCharge charge_;
  const int open_index_;
  const bool refuse_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::empty_body>> continue_;
  std::optional<bhttp::response<bhttp::string_body>> res_;
  std::optional<RequestContext> ctx_;
  std::function<std::size_t(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
  std::chrono::steady_clock::time_point start_;
  std::string peer_;
  std::string target_;  // "METHOD /path" of the current request, for logs
  bool idle_ = false;
  bool head_ = false;
  bool over_budget_ = false;
  size_t drained_ = 0;
  int64_t retained_ = 0;  // charged to Shared::retained_decoder
  std::array<char, 4096> drain_buf_;
};

// Out of descriptors or kernel memory: retrying at once would spin.
bool IsResourceExhaustion(const beast::error_code& ec) {
  if (ec.category() != boost::system::system_category()) return false;
  const int v = ec.value();
  return v == EMFILE || v == ENFILE || v == ENOBUFS || v == ENOMEM;
}

}  // namespace

struct HttpServer::Impl {
  Shared shared;
  net::io_context ioc;
  std::optional<ssl::context> tls;
  std::vector<std::unique_ptr<Listener>> listeners;  // [0] main, [1] health
  net::signal_set stop_signals{ioc};
  net::signal_set hup_signal{ioc};
  std::vector<std::unique_ptr<net::steady_timer>> timers;
  // Stops the io_context if connections outlive the shutdown grace period.
  absl::Mutex watchdog_mu;
  bool run_done ABSL_GUARDED_BY(watchdog_mu) = false;
  std::thread watchdog;

  // Accept handlers of one listener run one at a time (one accept is
  // outstanding), so its back-off state needs no lock.
  void Accept(Listener& l) {
    l.acceptor.async_accept(
        net::make_strand(ioc), [this, &l](beast::error_code ec, tcp::socket socket) {
          if (ec) {
            if (!l.acceptor.is_open() || shared.stopping) return;
            if (IsResourceExhaustion(ec)) return BackOff(l, ec);
            return Accept(l);
          }
          l.backoff = std::chrono::milliseconds(0);
          std::atomic<int>& count = shared.open[l.index];
          const int open = count.fetch_add(1) + 1;
          if (open > l.max_connections + kRefusedSlots) {
            count.fetch_sub(1);
            shared.Refused(503, StrCat("on the ", l.name, " port: ", open - 1,
                                       " connections open, closed without an answer"));
            socket.close(ec);
            return Accept(l);
          }
          const bool refuse = open > l.max_connections;
          socket.set_option(tcp::no_delay(true), ec);
          std::shared_ptr<SessionBase> base;
          if (l.tls != nullptr) {
            using TlsStream = beast::ssl_stream<beast::tcp_stream>;
            auto s = std::make_shared<Session<TlsStream>>(TlsStream(std::move(socket), *l.tls),
                                                          &shared, &l, refuse);
            s->Start();
            base = s;
          } else {
            auto s = std::make_shared<Session<beast::tcp_stream>>(
                beast::tcp_stream(std::move(socket)), &shared, &l, refuse);
            s->Start();
            base = s;
          }
          {
            absl::MutexLock lock(&shared.mu);
            shared.sessions.remove_if([](const auto& w) { return w.expired(); });
            shared.sessions.push_back(base);
          }
          Accept(l);
        });
  }

  // One log line per episode (the first failure); then 50 ms doubling to
  // 500 ms between attempts until an accept succeeds.
  void BackOff(Listener& l, const beast::error_code& ec) {
    if (l.backoff.count() == 0) {
      l.backoff = kBackoffFirst;
      shared.Log(StrCat("gpusched: accept on the ", l.name, " port failed: ", ec.message(), " (",
                        shared.open[l.index].load(),
                        " connections open); retrying with back-off up to ", kBackoffMax.count(),
                        " ms"));
    } else {
      l.backoff = std::min(2 * l.backoff, kBackoffMax);
    }
    l.backoff_timer.expires_after(l.backoff);
    l.backoff_timer.async_wait([this, &l](beast::error_code e) {
      if (e || shared.stopping) return;
      Accept(l);
    });
  }

  void Periodic(size_t i) {
    timers[i]->expires_after(shared.opt.periodic[i].every);
    timers[i]->async_wait([this, i](beast::error_code ec) {
      if (ec || shared.stopping) return;
      shared.opt.periodic[i].fn();
      Periodic(i);
    });
  }

  void WaitHup() {
    hup_signal.async_wait([this](beast::error_code ec, int) {
      if (ec || shared.stopping) return;
      if (shared.opt.on_sighup) shared.opt.on_sighup();
      WaitHup();
    });
  }

  void BeginShutdown() {
    if (shared.stopping.exchange(true)) return;
    beast::error_code ec;
    for (auto& l : listeners) {
      l->acceptor.close(ec);
      l->backoff_timer.cancel();
    }
    stop_signals.cancel(ec);
    hup_signal.cancel(ec);
    for (auto& t : timers) t->cancel();
    std::list<std::weak_ptr<SessionBase>> sessions;
    {
      absl::MutexLock l(&shared.mu);
      sessions = shared.sessions;
    }
    for (auto& w : sessions) {
      if (auto s = w.lock()) s->CloseIfIdle();
    }
    watchdog = std::thread([this] {
      absl::MutexLock l(&watchdog_mu);
      auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(watchdog_mu) { return run_done; };
      if (!watchdog_mu.AwaitWithTimeout(absl::Condition(&done),
                                        absl::Seconds(shared.opt.shutdown_grace.count()))) {
        ioc.stop();
      }
    });
  }

  absl::Status Bind(Listener& l, const std::string& host, uint16_t port) {
    beast::error_code ec;
    auto addr = net::ip::make_address(host, ec);
    if (ec) return absl::InvalidArgumentError(StrCat("listen host '", host, "': ", ec.message()));
    tcp::endpoint ep(addr, port);
    auto& a = l.acceptor;
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          StrCat("listen on ", host, ":", port, " (", l.name, " port): ", ec.message()));
    }
    return absl::OkStatus();
  }
};

HttpServer::HttpServer(ServerOptions options, const Router* router, Metrics* metrics,
                       const Router* health_router)
    : impl_(std::make_unique<Impl>()) {
  impl_->shared.opt = std::move(options);
  impl_->shared.metrics = metrics;
  auto main = std::make_unique<Listener>(impl_->ioc);
  main->name = "main";
  main->router = router;
  main->max_connections = impl_->shared.opt.max_connections;
  impl_->listeners.push_back(std::move(main));
  if (!impl_->shared.opt.health_listen.empty()) {
    auto health = std::make_unique<Listener>(impl_->ioc);
    health->name = "health";
    health->index = 1;
    health->router = health_router;
    health->max_connections = impl_->shared.opt.health_max_connections;
    impl_->listeners.push_back(std::move(health));
  }
}

HttpServer::~HttpServer() = default;

absl::Status HttpServer::Listen() {
  const ServerOptions& opt = impl_->shared.opt;
  beast::error_code ec;
  if (!opt.tls_cert.empty()) {
    impl_->tls.emplace(ssl::context::tls_server);
    impl_->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                            ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                            ssl::context::no_tlsv1_1);
    impl_->tls->use_certificate_chain_file(opt.tls_cert, ec);
    if (ec)
      return absl::InvalidArgumentError(StrCat("--tls-cert ", opt.tls_cert, ": ", ec.message()));
    impl_->tls->use_private_key_file(opt.tls_key, ssl::context::pem, ec);
    if (ec)
      return absl::InvalidArgumentError(StrCat("--tls-key ", opt.tls_key, ": ", ec.message()));
    if (!opt.tls_client_ca.empty()) {
      impl_->tls->load_verify_file(opt.tls_client_ca, ec);
      if (ec) {
        return absl::InvalidArgumentError(
            StrCat("--tls-client-ca ", opt.tls_client_ca, ": ", ec.message()));
      }
      impl_->tls->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    impl_->listeners[0]->tls = &*impl_->tls;
  }
  if (opt.max_connections < 1 || opt.health_max_connections < 1) {
    return absl::InvalidArgumentError("connection caps must be at least 1");
  }
  if (opt.max_inflight_body_bytes < opt.max_body_bytes) {
    return absl::InvalidArgumentError(
        StrCat("bytes of bodies in flight (", opt.max_inflight_body_bytes,
               ") must be at least the body limit (", opt.max_body_bytes, ")"));
  }
  GPUSCHED_RETURN_IF_ERROR(impl_->Bind(*impl_->listeners[0], opt.host, opt.port));
  if (impl_->listeners.size() > 1) {
    if (impl_->listeners[1]->router == nullptr) {
      return absl::InvalidArgumentError("a health listener needs a health router");
    }
    std::string host;
    uint16_t port = 0;
    GPUSCHED_RETURN_IF_ERROR(ParseListen(opt.health_listen, &host, &port));
    GPUSCHED_RETURN_IF_ERROR(impl_->Bind(*impl_->listeners[1], host, port));
  }
  return absl::OkStatus();
}

namespace {
uint16_t BoundPort(const tcp::acceptor& a) {
  beast::error_code ec;
  auto ep = a.local_endpoint(ec);
  return ec ? 0 : ep.port();
}
}  // namespace

uint16_t HttpServer::port() const { return BoundPort(impl_->listeners[0]->acceptor); }

uint16_t HttpServer::health_port() const {
  return impl_->listeners.size() > 1 ? BoundPort(impl_->listeners[1]->acceptor) : 0;
}

void HttpServer::Run() {
  Impl& im = *impl_;
  im.stop_signals.add(SIGINT);
  im.stop_signals.add(SIGTERM);
  im.stop_signals.async_wait([&im](beast::error_code ec, int) {
    if (!ec) im.BeginShutdown();
  });
  im.hup_signal.add(SIGHUP);
  im.WaitHup();
  for (size_t i = 0; i < im.shared.opt.periodic.size(); ++i) {
    im.timers.push_back(std::make_unique<net::steady_timer>(im.ioc));
    im.Periodic(i);
  }
  for (auto& l : im.listeners) im.Accept(*l);
  std::vector<std::thread> threads;
  for (int i = 1; i < im.shared.opt.threads; ++i) threads.emplace_back([&im] { im.ioc.run(); });
  im.ioc.run();
  for (auto& t : threads) t.join();
  {
    absl::MutexLock l(&im.watchdog_mu);
    im.run_done = true;
  }
  if (im.watchdog.joinable()) im.watchdog.join();
}

void HttpServer::Shutdown() {
  net::post(impl_->ioc, [this] { impl_->BeginShutdown(); });
}

bool HttpServer::accepting() const { return !impl_->shared.stopping; }

}  // namespace gpusched::http
