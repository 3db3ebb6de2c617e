#include "scheduler/http/server.h"

#include <algorithm>
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
#include "scheduler/http/session.h"

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

namespace internal {

std::string RateLimitedLog::Note(const std::string& key, std::string line) {
  absl::MutexLock l(&mu_);
  Kind& k = kinds_[key];
  const auto now = std::chrono::steady_clock::now();
  if (k.logged && now - k.last < std::chrono::seconds(1)) {
    ++k.suppressed;
    return "";
  }
  if (k.suppressed > 0) line += StrCat(" (", k.suppressed, " more not logged)");
  k = {true, now, 0};
  return line;
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 120) out += "...";
  return out;
}

void Shared::Log(const std::string& line) {
  if (opt.log) return opt.log(line);
  std::string l = line + "\n";
  fwrite(l.data(), 1, l.size(), stderr);
}

void Shared::Refused(int status, std::string_view what) {
  metrics->Inc("gpusched_http_rejected_total", "Requests refused at the HTTP layer.",
               {{"code", std::to_string(status)}});
  std::string line = logs.Note(StrCat("refused ", status),
                               StrCat("gpusched: refused HTTP request: ", status, " ", what));
  if (!line.empty()) Log(line);
}

void Shared::BadRequest(const std::string& route, int status, std::string_view what) {
  std::string line =
      logs.Note(StrCat("bad ", route), StrCat("gpusched: bad request (", status, "): ", what));
  if (!line.empty()) Log(line);
}

void Shared::Evicted(const std::vector<Eviction>& evicted, int listener) {
  for (const Eviction& e : evicted) {
    if (e.cancel) e.cancel();
    const char* reason = EvictReasonName(e.reason);
    metrics->Inc("gpusched_http_evictions_total",
                 "Connections closed to make room: header pending, fresh (no byte sent), "
                 "idle keep-alive (connection slots full); body, answer (stalled while the "
                 "memory budget was short).",
                 {{"reason", reason}});
    const bool slots = e.reason == EvictReason::kHeader || e.reason == EvictReason::kFresh ||
                       e.reason == EvictReason::kIdle;
    std::string line =
        logs.Note(StrCat("evict ", reason),
                  StrCat("gpusched: closed a connection from ", e.source, " on the ",
                         listener_names[static_cast<size_t>(listener)], " port to make room (",
                         reason, ", waiting ", e.waited.count(), " ms; ",
                         slots ? "connection slots full" : "memory budget short", ")"));
    if (!line.empty()) Log(line);
  }
}

}  // namespace internal

namespace {

using internal::Listener;
using internal::Session;
using internal::SessionBase;
using internal::Shared;

constexpr std::chrono::milliseconds kBackoffFirst{50};
constexpr std::chrono::milliseconds kBackoffMax{500};

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
    l.acceptor.async_accept(net::make_strand(ioc),
                            [this, &l](beast::error_code ec, tcp::socket socket) {
                              if (ec) {
                                if (!l.acceptor.is_open() || shared.stopping) return;
                                if (IsResourceExhaustion(ec)) return BackOff(l, ec);
                                return Accept(l);
                              }
                              l.backoff = std::chrono::milliseconds(0);
                              Admit(l, std::move(socket));
                              Accept(l);
                            });
  }

  // Gives an accepted connection a slot (evicting one if ConnTable says so),
  // a refusal slot, or closes it.
  void Admit(Listener& l, tcp::socket socket) {
    beast::error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    const std::string source = ec ? "?" : remote.address().to_string();
    ConnTable::Opened opened = shared.table->Open(l.index, source, ConnClock::now());
    shared.Evicted(opened.evicted, l.index);
    if (opened.admission == ConnTable::Admission::kDrop) {
      shared.Refused(503, StrCat("from ", source, " on the ", l.name,
                                 " port: connection and refusal slots full, closed without an "
                                 "answer"));
      socket.close(ec);
      return;
    }
    const bool refuse = opened.admission == ConnTable::Admission::kRefuse;
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<SessionBase> base;
    if (l.tls != nullptr) {
      using TlsStream = beast::ssl_stream<beast::tcp_stream>;
      auto s = std::make_shared<Session<TlsStream>>(TlsStream(std::move(socket), *l.tls), &shared,
                                                    &l, std::move(opened.entry), refuse);
      s->Start();
      base = s;
    } else {
      auto s = std::make_shared<Session<beast::tcp_stream>>(
          beast::tcp_stream(std::move(socket)), &shared, &l, std::move(opened.entry), refuse);
      s->Start();
      base = s;
    }
    absl::MutexLock lock(&shared.mu);
    shared.sessions.remove_if([](const auto& w) { return w.expired(); });
    shared.sessions.push_back(base);
  }

  // One log line per episode (the first failure); then 50 ms doubling to
  // 500 ms between attempts until an accept succeeds.
  void BackOff(Listener& l, const beast::error_code& ec) {
    if (l.backoff.count() == 0) {
      l.backoff = kBackoffFirst;
      shared.Log(StrCat("gpusched: accept on the ", l.name, " port failed: ", ec.message(), " (",
                        shared.table->Stats(l.index).open,
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

namespace {
// Connection and budget gauges, read at scrape time. The collector keeps the
// table alive, so it may outlive the server.
void AddGauges(Metrics* metrics, std::shared_ptr<ConnTable> table, std::vector<std::string> names) {
  if (metrics == nullptr) return;
  metrics->AddCollector([table, names](GaugeWriter& w) {
    for (size_t i = 0; i < names.size(); ++i) {
      const ConnStats st = table->Stats(static_cast<int>(i));
      w.Gauge("gpusched_http_connections", "Open connections by listener and slot kind.",
              {{"listener", names[i]}, {"slot", "served"}}, st.open);
      w.Gauge("gpusched_http_connections", "Open connections by listener and slot kind.",
              {{"listener", names[i]}, {"slot", "refusal"}}, st.refused);
    }
    const ConnStats st = table->Stats(0);
    w.Gauge("gpusched_http_inflight_bytes",
            "Bytes of request bodies and answers in flight (the memory budget's count).", {},
            static_cast<double>(st.inflight_bytes));
    w.Gauge("gpusched_http_inflight_peak_bytes", "Highest gpusched_http_inflight_bytes so far.", {},
            static_cast<double>(st.peak_inflight_bytes));
  });
}
}  // namespace

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
  const ServerOptions& opt = impl_->shared.opt;
  std::vector<ListenerLimits> limits;
  for (const auto& l : impl_->listeners) {
    impl_->shared.listener_names.push_back(l->name);
    // The probes come from the kubelet's one address: no per-source cap.
    int per_source = l->max_connections;
    if (l->index == 0) {
      per_source = opt.max_connections_per_source > 0 ? opt.max_connections_per_source
                                                      : std::max(1, opt.max_connections / 2);
    }
    limits.push_back({l->max_connections, per_source, internal::kRefusedSlots});
  }
  impl_->shared.table = std::make_shared<ConnTable>(
      std::move(limits),
      BudgetLimits{opt.max_inflight_body_bytes, opt.small_lane_bytes, opt.small_request_bytes,
                   opt.slow_after, opt.min_transfer_rate});
  AddGauges(metrics, impl_->shared.table, impl_->shared.listener_names);
}

HttpServer::~HttpServer() = default;

ConnStats HttpServer::stats(bool health) const {
  return impl_->shared.table->Stats(health ? 1 : 0);
}

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
