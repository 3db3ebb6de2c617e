#include "scheduler/kube/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>
#include <thread>

#include "gpusched/util/strings.h"

namespace gpusched::kube {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps),
      burst_(std::max(1, burst)),
      tokens_(burst_),
      last_(std::chrono::steady_clock::now()) {}

void TokenBucket::Take() {
  if (qps_ <= 0) return;
  std::chrono::duration<double> wait{0};
  {
    absl::MutexLock lock(&mu_);
    auto now = std::chrono::steady_clock::now();
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * qps_);
    last_ = now;
    tokens_ -= 1;  // may go negative: later callers queue behind
    if (tokens_ < 0) wait = std::chrono::duration<double>(-tokens_ / qps_);
  }
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
}

void StreamCanceller::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (abort_) abort_();
}

bool StreamCanceller::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

bool StreamCanceller::Arm(std::function<void()> abort) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  abort_ = std::move(abort);
  return true;
}

void StreamCanceller::Disarm() {
  absl::MutexLock lock(&mu_);
  abort_ = nullptr;
}

struct KubeHttpClient::Tls {
  asio::ssl::context ctx{asio::ssl::context::tls_client};
};

struct KubeHttpClient::Conn {
  explicit Conn(asio::ssl::context& ctx) : stream(ioc, ctx) {}
  asio::io_context ioc;
  beast::ssl_stream<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  // Starts `op(handler)` and runs the I/O until it completes.
  template <typename Op>
  ErrorCode Run(std::chrono::milliseconds timeout, Op&& op) {
    ErrorCode result = asio::error::would_block;
    beast::get_lowest_layer(stream).expires_after(timeout);
    op([&result](ErrorCode ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }
  void Close() {
    ErrorCode ignored;
    beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(stream).close();
  }
};

namespace {

absl::Status Transport(std::string_view what, const ErrorCode& ec) {
  if (ec == beast::error::timeout) return absl::DeadlineExceededError(StrCat(what, ": timed out"));
  return absl::UnavailableError(StrCat(what, ": ", ec.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<KubeHttpClient>> KubeHttpClient::Create(KubeConfig config,
                                                                       ClientOptions options) {
  auto tls = std::make_unique<Tls>();
  ErrorCode ec;
  tls->ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
  if (config.insecure_skip_verify) {
    tls->ctx.set_verify_mode(asio::ssl::verify_none);
  } else {
    tls->ctx.set_verify_mode(asio::ssl::verify_peer);
    if (config.ca_pem.empty()) {
      tls->ctx.set_default_verify_paths(ec);
    } else {
      tls->ctx.add_certificate_authority(asio::buffer(config.ca_pem), ec);
    }
    if (ec) return absl::InvalidArgumentError(StrCat(options.peer, " CA: ", ec.message()));
  }
  if (!config.client_cert_pem.empty()) {
    tls->ctx.use_certificate_chain(asio::buffer(config.client_cert_pem), ec);
    if (!ec)
      tls->ctx.use_private_key(asio::buffer(config.client_key_pem), asio::ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(StrCat("client certificate: ", ec.message()));
  }
  return std::unique_ptr<KubeHttpClient>(
      new KubeHttpClient(std::move(config), std::move(options), std::move(tls)));
}

KubeHttpClient::KubeHttpClient(KubeConfig config, ClientOptions options, std::unique_ptr<Tls> tls)
    : config_(std::move(config)),
      options_(std::move(options)),
      tls_(std::move(tls)),
      token_(config_),
      bucket_(options_.qps, options_.burst) {}

KubeHttpClient::~KubeHttpClient() = default;

std::string KubeHttpClient::Authorization() {
  std::string t = token_.Get();
  return t.empty() ? std::string() : StrCat("Bearer ", t);
}

absl::StatusOr<std::unique_ptr<KubeHttpClient::Conn>> KubeHttpClient::Connect(
    std::chrono::milliseconds timeout) {
  auto c = std::make_unique<Conn>(tls_->ctx);
  tcp::resolver resolver(c->ioc);
  ErrorCode ec;
  auto endpoints = resolver.resolve(config_.host, config_.port, ec);
  if (ec) return Transport(StrCat("resolve ", config_.host), ec);
  ec = c->Run(timeout,
              [&](auto h) { beast::get_lowest_layer(c->stream).async_connect(endpoints, h); });
  if (ec) return Transport(StrCat("connect ", config_.host, ":", config_.port), ec);
  beast::get_lowest_layer(c->stream).socket().set_option(tcp::no_delay(true), ec);
  SSL* ssl = c->stream.native_handle();
  ErrorCode not_ip;
  asio::ip::make_address(config_.host, not_ip);
  if (not_ip) SSL_set_tlsext_host_name(ssl, config_.host.c_str());
  if (!config_.insecure_skip_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    int ok = not_ip ? X509_VERIFY_PARAM_set1_host(param, config_.host.c_str(), 0)
                    : X509_VERIFY_PARAM_set1_ip_asc(param, config_.host.c_str());
    if (ok != 1) return absl::InvalidArgumentError(StrCat("bad server name ", config_.host));
  }
  ec = c->Run(timeout,
              [&](auto h) { c->stream.async_handshake(asio::ssl::stream_base::client, h); });
  if (ec) return Transport(StrCat("TLS handshake with ", options_.peer), ec);
  return c;
}

std::unique_ptr<KubeHttpClient::Conn> KubeHttpClient::TakeIdle() {
  absl::MutexLock lock(&mu_);
  if (idle_.empty()) return nullptr;
  auto c = std::move(idle_.back());
  idle_.pop_back();
  return c;
}

void KubeHttpClient::PutIdle(std::unique_ptr<Conn> c) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(idle_.size()) < options_.max_idle_connections) idle_.push_back(std::move(c));
}

absl::StatusOr<HttpResult> KubeHttpClient::Do(std::string_view method, std::string_view target,
                                              std::string body, std::string_view content_type,
                                              std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = options_.timeout;
  bucket_.Take();
  http::request<http::string_body> req{
      http::string_to_verb(boost::beast::string_view(method.data(), method.size())),
      std::string(target), 11};
  req.set(http::field::host, config_.host);
  req.set(http::field::user_agent, options_.user_agent);
  req.set(http::field::accept, "application/json");
  std::string auth = Authorization();
  if (!auth.empty()) req.set(http::field::authorization, auth);
  if (!body.empty()) req.set(http::field::content_type, std::string(content_type));
  req.body() = std::move(body);
  req.keep_alive(true);
  req.prepare_payload();
  // A pooled connection may have been closed by the server while idle: one
  // retry on a fresh connection. (Callers' writes are idempotent or detect a
  // repeat: 409 on a second binding, 404 on a second eviction.)
  bool auth_retried = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<Conn> c = attempt == 0 ? TakeIdle() : nullptr;
    const bool reused = c != nullptr;
    if (!c) {
      auto fresh = Connect(timeout);
      if (!fresh.ok()) return fresh.status();
      c = *std::move(fresh);
    }
    ErrorCode ec = c->Run(timeout, [&](auto h) { http::async_write(c->stream, req, h); });
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{1} << 30);
    if (!ec)
      ec = c->Run(timeout, [&](auto h) { http::async_read(c->stream, c->buffer, parser, h); });
    if (ec) {
      if (reused && ec != beast::error::timeout) continue;
      return Transport(StrCat(method, " ", target), ec);
    }
    auto& res = parser.get();
    HttpResult out{static_cast<int>(res.result_int()), std::move(res.body())};
    if (res.keep_alive()) PutIdle(std::move(c));
    // A credential plugin's token the server refuses: one retry with a
    // fresh token, if the plugin gives a different one.
    if (out.status == 401 && !auth_retried && token_.Invalidate()) {
      auth_retried = true;
      if (std::string fresh = Authorization(); fresh != auth && !fresh.empty()) {
        auth = std::move(fresh);
        req.set(http::field::authorization, auth);
        attempt = -1;
        continue;
      }
    }
    return out;
  }
  return absl::UnavailableError(StrCat(method, " ", target, ": connection lost"));
}

absl::StatusOr<int> KubeHttpClient::Stream(std::string_view target, std::chrono::milliseconds idle,
                                           const std::function<bool(std::string&)>& on_line,
                                           std::string* error_body, StreamCanceller* canceller,
                                           const std::function<void()>& on_read) {
  bucket_.Take();
  auto conn = Connect(std::min(idle, options_.timeout));
  if (!conn.ok()) return conn.status();
  std::shared_ptr<Conn> c(std::move(*conn).release());
  // The canceller and the handler it posts hold the connection weakly: a
  // handler left in the queue after the stream ended must not keep the
  // connection (which owns the queue) alive.
  std::weak_ptr<Conn> weak = c;
  if (canceller != nullptr && !canceller->Arm([weak] {
        if (auto live = weak.lock()) {
          asio::post(live->ioc, [weak] {
            if (auto conn = weak.lock()) conn->Close();
          });
        }
      })) {
    return absl::CancelledError("watch cancelled");
  }
  struct Disarm {
    StreamCanceller* c;
    ~Disarm() {
      if (c) c->Disarm();
    }
  } disarm{canceller};
  http::request<http::empty_body> req{http::verb::get, std::string(target), 11};
  req.set(http::field::host, config_.host);
  req.set(http::field::user_agent, options_.user_agent);
  req.set(http::field::accept, "application/json");
  if (std::string auth = Authorization(); !auth.empty()) req.set(http::field::authorization, auth);
  auto failed = [&](std::string_view what, const ErrorCode& ec) -> absl::Status {
    if (canceller != nullptr && canceller->cancelled())
      return absl::CancelledError("watch cancelled");
    return Transport(what, ec);
  };
  ErrorCode ec = c->Run(idle, [&](auto h) { http::async_write(c->stream, req, h); });
  if (ec) return failed(StrCat("GET ", target), ec);
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  ec = c->Run(idle, [&](auto h) { http::async_read_header(c->stream, c->buffer, parser, h); });
  if (ec) return failed(StrCat("GET ", target), ec);
  const int status = static_cast<int>(parser.get().result_int());
  if (status == 401) token_.Invalidate();  // the watch's retry gets a fresh plugin token
  std::string pending;
  char chunk[64 * 1024];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    ec = c->Run(idle, [&](auto h) { http::async_read_some(c->stream, c->buffer, parser, h); });
    pending.append(chunk, sizeof(chunk) - parser.get().body().size);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return failed(StrCat("watch ", target), ec);
    if (status != 200) continue;
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = pending.substr(start, nl - start);
      if (line.empty()) continue;
      if (!on_line(line)) {
        c->Close();
        return status;
      }
    }
    pending.erase(0, start);
    if (on_read) on_read();
  }
  if (status != 200) {
    if (error_body != nullptr) *error_body = std::move(pending);
  } else if (!pending.empty()) {
    on_line(pending);
  }
  c->Close();
  return status;
}

}  // namespace gpusched::kube
