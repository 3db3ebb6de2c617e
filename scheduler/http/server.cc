#include "scheduler/http/server.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <list>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void CloseIfIdle() = 0;
};

struct Shared {
  ServerOptions opt;
  const Router* router;
  Metrics* metrics;
  std::atomic<bool> stopping{false};
  absl::Mutex mu;
  std::list<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);
};

template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, Shared* shared) : stream_(std::move(stream)), shared_(shared) {
    buffer_.reserve(kReadBufferBytes);
  }

  void Start() {
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
    parser_->header_limit(64 * 1024);
    idle_ = true;
    if (shared_->stopping && buffer_.size() == 0) return Close();
    beast::get_lowest_layer(stream_).expires_after(shared_->opt.idle_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&Session::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, std::size_t) {
    idle_ = false;
    start_ = std::chrono::steady_clock::now();
    if (ec) return OnReadError(ec);
    beast::get_lowest_layer(stream_).expires_after(shared_->opt.read_timeout);
    if (parser_->is_done()) return OnRead({}, 0);
    // Size the body once (plus the decoder's parsing padding) instead of
    // growing it chunk by chunk; the limit was checked against the header.
    if (auto len = parser_->content_length();
        len && *len <= static_cast<uint64_t>(shared_->opt.max_body_bytes)) {
      parser_->get().body().reserve(*len + kBodyPadding);
    }
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Session::OnRead, this->shared_from_this()));
  }

  void OnReadError(beast::error_code ec) {
    if (ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::connection_reset) {
      return Close();
    }
    int status = 400;
    std::string msg = StrCat("bad HTTP request: ", ec.message());
    if (ec == bhttp::error::body_limit) {
      status = 413;
      msg = StrCat("request body exceeds the limit of ", shared_->opt.max_body_bytes, " bytes");
    } else if (ec == bhttp::error::header_limit) {
      status = 431;
      msg = "request headers too large";
    }
    shared_->metrics->Inc("gpusched_http_rejected_total", "Requests rejected before routing.",
                          {{"code", std::to_string(status)}});
    Send(JsonError(status, msg), false, 11);
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    auto msg = parser_->release();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    req.body = std::move(msg.body());
    const bool keep_alive = msg.keep_alive();
    std::string route;
    HttpResponse res = shared_->router->Dispatch(req, ctx_, &route);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    shared_->metrics->Inc("gpusched_requests_total", "Requests by route and HTTP code.",
                          {{"verb", route}, {"code", std::to_string(res.status)}});
    if (res.status >= 400) {
      shared_->metrics->Inc("gpusched_request_errors_total", "Requests answered with 4xx/5xx.",
                            {{"verb", route}});
    }
    shared_->metrics->Observe("gpusched_request_duration_seconds",
                              "Time from request header to response, by route.", {{"verb", route}},
                              secs);
    Send(std::move(res), keep_alive && !shared_->stopping, msg.version());
  }

  void Send(HttpResponse res, bool keep_alive, unsigned version) {
    res_.emplace(static_cast<bhttp::status>(res.status), version);
    res_->set(bhttp::field::server, "gpusched");
    res_->set(bhttp::field::content_type, res.content_type);
    res_->keep_alive(keep_alive);
    res_->body() = std::move(res.body);
    res_->prepare_payload();
    bhttp::async_write(
        stream_, *res_,
        beast::bind_front_handler(&Session::OnWrite, this->shared_from_this(), keep_alive));
  }

  void OnWrite(bool keep_alive, beast::error_code ec, std::size_t) {
    res_.reset();
    if (ec || !keep_alive) return Close();
    ReadHeader();
  }

  void Close() {
    beast::error_code ec;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_send, ec);
    beast::get_lowest_layer(stream_).close();
  }

  Stream stream_;
  Shared* shared_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::string_body>> res_;
  RequestContext ctx_;
  std::chrono::steady_clock::time_point start_;
  bool idle_ = false;
};

}  // namespace

struct HttpServer::Impl {
  Shared shared;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::optional<ssl::context> tls;
  net::signal_set stop_signals{ioc};
  net::signal_set hup_signal{ioc};
  std::vector<std::unique_ptr<net::steady_timer>> timers;
  // Stops the io_context if connections outlive the shutdown grace period.
  absl::Mutex watchdog_mu;
  bool run_done ABSL_GUARDED_BY(watchdog_mu) = false;
  std::thread watchdog;

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (!acceptor.is_open()) return;
        return Accept();
      }
      socket.set_option(tcp::no_delay(true), ec);
      std::shared_ptr<SessionBase> base;
      if (tls) {
        using TlsStream = beast::ssl_stream<beast::tcp_stream>;
        auto s = std::make_shared<Session<TlsStream>>(TlsStream(std::move(socket), *tls), &shared);
        s->Start();
        base = s;
      } else {
        auto s = std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)),
                                                              &shared);
        s->Start();
        base = s;
      }
      {
        absl::MutexLock l(&shared.mu);
        shared.sessions.remove_if([](const auto& w) { return w.expired(); });
        shared.sessions.push_back(base);
      }
      Accept();
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
    acceptor.close(ec);
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
};

HttpServer::HttpServer(ServerOptions options, const Router* router, Metrics* metrics)
    : impl_(std::make_unique<Impl>()) {
  impl_->shared.opt = std::move(options);
  impl_->shared.router = router;
  impl_->shared.metrics = metrics;
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
  }
  auto addr = net::ip::make_address(opt.host, ec);
  if (ec) return absl::InvalidArgumentError(StrCat("listen host '", opt.host, "': ", ec.message()));
  tcp::endpoint ep(addr, opt.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        StrCat("listen on ", opt.host, ":", opt.port, ": ", ec.message()));
  }
  return absl::OkStatus();
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
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
  im.Accept();
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
