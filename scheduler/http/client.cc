#include "scheduler/http/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "gpusched/util/strings.h"

namespace gpusched::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

struct HttpClient::Impl {
  ClientOptions options;
  std::string host;
  std::string port;
  std::string prefix;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  int connections = 0;

  // Runs the queued asynchronous operations to completion.
  void RunAll() {
    ioc.restart();
    ioc.run();
  }

  absl::Status Error(const beast::error_code& ec, std::string_view what) const {
    std::string msg = StrCat(what, " http://", host, ":", port, ": ", ec.message());
    if (ec == beast::error::timeout) return absl::DeadlineExceededError(msg);
    return absl::UnavailableError(msg);
  }

  void Close() {
    if (stream.has_value()) {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream->socket().close(ignored);
      stream.reset();
    }
    buffer.consume(buffer.size());
  }

  absl::Status Connect() {
    Close();
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    auto results = resolver.resolve(host, port, ec);
    if (ec) return Error(ec, "resolve");
    stream.emplace(ioc);
    stream->expires_after(options.connect_timeout);
    stream->async_connect(results,
                          [&ec](const beast::error_code& e, const tcp::endpoint&) { ec = e; });
    RunAll();
    if (ec) {
      Close();
      return Error(ec, "connect");
    }
    stream->socket().set_option(tcp::no_delay(true), ec);
    ++connections;
    return absl::OkStatus();
  }

  // One request and its response on the current connection.
  absl::StatusOr<ClientResponse> Exchange(const bhttp::request<bhttp::string_body>& req) {
    beast::error_code ec;
    stream->expires_after(options.request_timeout);
    bhttp::async_write(*stream, req, [&ec](const beast::error_code& e, size_t) { ec = e; });
    RunAll();
    if (ec) return Error(ec, "write to");
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    bhttp::async_read(*stream, buffer, parser,
                      [&ec](const beast::error_code& e, size_t) { ec = e; });
    RunAll();
    if (ec) return Error(ec, "read from");
    stream->expires_never();
    auto res = parser.release();
    ClientResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    if (!res.keep_alive()) Close();
    return out;
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpClient::~HttpClient() {
  if (impl_) impl_->Close();
}

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const std::string& base_url,
                                                               ClientOptions options) {
  constexpr std::string_view kScheme = "http://";
  std::string_view rest = base_url;
  if (rest.substr(0, kScheme.size()) != kScheme) {
    return absl::InvalidArgumentError(
        StrCat("extender URL '", base_url, "': only http://HOST:PORT[/PREFIX] is supported"));
  }
  rest.remove_prefix(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  std::string_view host = authority;
  std::string_view port = "80";
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(StrCat("extender URL '", base_url, "': bad IPv6 host"));
    }
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') {
        return absl::InvalidArgumentError(StrCat("extender URL '", base_url, "': bad port"));
      }
      port = authority.substr(close + 2);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  uint32_t port_number = 0;
  if (host.empty() || !absl::SimpleAtoi(ToAbsl(port), &port_number) || port_number == 0 ||
      port_number > 65535) {
    return absl::InvalidArgumentError(StrCat("extender URL '", base_url, "': bad host or port"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->host = std::string(host);
  impl->port = std::string(port);
  impl->prefix = std::move(prefix);
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

absl::StatusOr<ClientResponse> HttpClient::Post(const std::string& path, const std::string& body) {
  return Send(true, path, body);
}

absl::StatusOr<ClientResponse> HttpClient::Get(const std::string& path) {
  return Send(false, path, "");
}

absl::StatusOr<ClientResponse> HttpClient::Send(bool post, const std::string& path,
                                                const std::string& body) {
  Impl& m = *impl_;
  bhttp::request<bhttp::string_body> req{post ? bhttp::verb::post : bhttp::verb::get,
                                         m.prefix + path, 11};
  req.set(bhttp::field::host, m.host + ":" + m.port);
  if (post) req.set(bhttp::field::content_type, "application/json");
  req.set(bhttp::field::user_agent, "gpusched-client");
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  const bool reused = m.stream.has_value();
  if (!reused) {
    if (auto s = m.Connect(); !s.ok()) return s;
  }
  auto r = m.Exchange(req);
  if (r.ok()) return r;
  m.Close();
  // A kept-alive connection may have been closed by the server (idle
  // timeout) since the last request: retry once on a new one.
  if (!reused || absl::IsDeadlineExceeded(r.status())) return r.status();
  if (auto s = m.Connect(); !s.ok()) return s;
  r = m.Exchange(req);
  if (!r.ok()) m.Close();
  return r;
}

absl::StatusOr<std::string> HttpClient::PostJson(const std::string& path, const std::string& body) {
  auto r = Post(path, body);
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return absl::UnavailableError(
        StrCat("POST ", impl_->prefix, path, ": HTTP ", r->status, ": ", r->body.substr(0, 512)));
  }
  return std::move(r->body);
}

int HttpClient::connections() const { return impl_->connections; }

}  // namespace gpusched::http
