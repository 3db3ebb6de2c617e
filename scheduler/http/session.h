// Internals of HttpServer (server.cc, the only includer): the state shared
// by all connections and Session, one HTTP/1.1 connection's loop.
//
// A session reads a request header by itself (so it sees the first byte, and
// counts every header byte against the limit, which Beast's parser alone
// does not when a header arrives in pieces), reads the body into a string it
// grows as bytes arrive (each growth charged to the ConnTable budget), hands
// the request to the Router, charges the answer in the body's place, and
// writes it piece by piece with a stall timeout. ConnTable may evict it at
// any wait; it then closes without an answer.
#ifndef GPUSCHED_HTTP_SESSION_H_
#define GPUSCHED_HTTP_SESSION_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "gpusched/util/strings.h"
#include "scheduler/http/conn_table.h"
#include "scheduler/http/router.h"
#include "scheduler/http/server.h"

namespace gpusched::http::internal {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

// Spare capacity reserved after a request body, so the JSON decoder (which
// needs 64 readable bytes past the end) parses it in place without a copy.
inline constexpr size_t kBodyPadding = 64;
// Read buffer capacity per connection. Beast reads at most the buffer's free
// capacity (at least 512 bytes, at most 64 KiB) per call, so a buffer left to
// grow on its own reads a 100 KB ExtenderArgs in hundreds of 512-byte
// recvmsg calls, each with its own epoll round trip.
inline constexpr size_t kReadBufferBytes = 64 * 1024;
// Every byte of a request header, request line included, counts.
inline constexpr size_t kHeaderLimit = 64 * 1024;
inline constexpr int kMaxHeaderFields = 100;
// A connection in a refusal slot is answered from a small header read.
inline constexpr size_t kRefusedHeaderLimit = 8 * 1024;
inline constexpr int kRefusedSlots = 64;
// A JSON decoder keeps the capacity of the largest body it parsed, and its
// parse touches up to ~20x a body's bytes. Every connection may keep what a
// body of kFreeDecoderBytes needs; beyond that, all connections together may
// keep decoders for kRetainedDecoderBytes of bodies (kube-scheduler's few
// connections with their ~100 KB requests fit); the others are dropped after
// their request.
inline constexpr int64_t kFreeDecoderBytes = 64 * 1024;
inline constexpr int64_t kRetainedDecoderBytes = 8 << 20;
// After a refusal, unread request bytes are drained (at most this many, for
// at most a second) so the client sees the answer instead of a reset.
inline constexpr size_t kDrainBytes = 1 << 20;
inline constexpr int kRetryAfterSeconds = 1;

// At most one line per second per key; the lines skipped meanwhile are
// counted in the next one.
class RateLimitedLog {
 public:
  // Returns `line` (with the count of lines skipped since the last one) to
  // log now, or "" if this one is suppressed.
  std::string Note(const std::string& key, std::string line);

 private:
  struct Kind {
    bool logged = false;
    std::chrono::steady_clock::time_point last;
    int64_t suppressed = 0;
  };
  absl::Mutex mu_;
  std::map<std::string, Kind> kinds_ ABSL_GUARDED_BY(mu_);
};

// Untrusted text for a log line: printable ASCII only, at most 120 bytes.
std::string Printable(std::string_view s);

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void CloseIfIdle() = 0;
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
  int index = 0;  // ConnTable listener index
};

struct Shared {
  ServerOptions opt;
  Metrics* metrics = nullptr;
  std::atomic<bool> stopping{false};
  std::shared_ptr<ConnTable> table;
  // Body bytes beyond kFreeDecoderBytes whose decoders sessions keep.
  std::atomic<int64_t> retained_decoder{0};
  RateLimitedLog logs;
  std::vector<std::string> listener_names;  // by Listener::index
  absl::Mutex mu;
  std::list<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);

  void Log(const std::string& line);
  // A request refused at the HTTP layer: metric and rate-limited log line.
  void Refused(int status, std::string_view what);
  // A request the router answered as bad (4xx, or 200 with a decode Error).
  void BadRequest(const std::string& route, int status, std::string_view what);
  // Closes evicted connections; metric and rate-limited log line each.
  void Evicted(const std::vector<Eviction>& evicted, int listener);
};

template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, Shared* shared, Listener* listener, std::shared_ptr<ConnEntry> entry,
          bool refuse)
      : stream_(std::move(stream)),
        shared_(shared),
        listener_(listener),
        entry_(std::move(entry)),
        refuse_(refuse) {
    if (!refuse_) buffer_.reserve(kReadBufferBytes);
    ctx_.emplace();
  }
  ~Session() override {
    shared_->table->Close(*entry_);
    shared_->retained_decoder.fetch_sub(retained_);
  }

  void Start() {
    peer_ = entry_->source;
    std::weak_ptr<Session> weak = this->shared_from_this();
    auto exec = stream_.get_executor();
    auto cancel = [weak, exec] {
      net::post(exec, [weak] {
        if (auto s = weak.lock()) beast::get_lowest_layer(s->stream_).close();
      });
    };
    if (!shared_->table->SetCancel(*entry_, std::move(cancel))) return;
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      ReadHeader();
    } else {
      beast::get_lowest_layer(stream_).expires_after(shared_->opt.header_timeout);
      stream_.async_handshake(
          ssl::stream_base::server,
          beast::bind_front_handler(&Session::OnHandshake, this->shared_from_this()));
    }
  }

  void CloseIfIdle() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->phase_ == ConnPhase::kIdle) beast::get_lowest_layer(self->stream_).cancel();
    });
  }

 private:
  using Clock = std::chrono::steady_clock;
  auto& Tcp() { return beast::get_lowest_layer(stream_); }
  // Records the phase; false if the connection was evicted.
  bool Enter(ConnPhase phase) {
    phase_ = phase;
    return shared_->table->SetPhase(*entry_, phase, Clock::now());
  }
  // Sets this connection's budget holding; false if it does not fit.
  bool Hold(int64_t bytes) {
    std::vector<Eviction> evicted;
    const bool ok = shared_->table->Hold(*entry_, bytes, Clock::now(), &evicted);
    shared_->Evicted(evicted, listener_->index);
    return ok;
  }

  void OnHandshake(beast::error_code ec) {
    if (ec) return Close(false);
    ReadHeader();
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(shared_->opt.max_body_bytes));
    header_limit_ = refuse_ ? kRefusedHeaderLimit : kHeaderLimit;
    parser_->header_limit(static_cast<uint32_t>(header_limit_));
    header_bytes_ = 0;
    head_ = false;
    target_.clear();
    body_ = std::string();
    got_ = 0;
    if (shared_->stopping && buffer_.size() == 0) return Close(false);
    const bool pending = buffer_.size() > 0;
    if (!Enter(pending ? ConnPhase::kHeader : ConnPhase::kIdle)) return Close(false);
    Tcp().expires_after(pending || refuse_ ? shared_->opt.header_timeout
                                           : shared_->opt.idle_timeout);
    ContinueHeader();
  }

  void ContinueHeader() {
    beast::error_code ec;
    if (FeedHeader(ec)) return OnHeader();
    if (ec) return OnReadError(ec);
    stream_.async_read_some(
        buffer_.prepare(beast::read_size(buffer_, kReadBufferBytes)),
        beast::bind_front_handler(&Session::OnHeaderBytes, this->shared_from_this()));
  }

  void OnHeaderBytes(beast::error_code ec, std::size_t n) {
    buffer_.commit(n);
    if (ec) return OnReadError(ec);
    if (phase_ == ConnPhase::kIdle) {
      // The header's first bytes: from now on it has header_timeout.
      if (!Enter(ConnPhase::kHeader)) return Close(false);
      Tcp().expires_after(shared_->opt.header_timeout);
    }
    ContinueHeader();
  }

  // Gives the buffered bytes to the parser. True once the header is
  // complete; false with `ec` clear when more bytes are needed.
  bool FeedHeader(beast::error_code& ec) {
    while (buffer_.size() > 0) {
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      header_bytes_ += used;
      if (ec == bhttp::error::need_more) {
        ec = {};
        if (header_bytes_ + buffer_.size() >= header_limit_ || TooManyFields()) {
          ec = bhttp::error::header_limit;
          return false;
        }
        // Beast limits only the bytes it has not parsed yet: the rest of the
        // header gets what the parsed part left.
        parser_->header_limit(static_cast<uint32_t>(header_limit_ - header_bytes_));
        return false;
      }
      if (ec) return false;
      if (parser_->is_header_done()) {
        if (TooManyFields()) ec = bhttp::error::header_limit;
        return !ec;
      }
      if (used == 0) return false;
    }
    return false;
  }

  bool TooManyFields() const {
    int n = 0;
    for (auto it = parser_->get().begin(); it != parser_->get().end(); ++it) {
      if (++n > kMaxHeaderFields) return true;
    }
    return false;
  }

  void OnHeader() {
    start_ = Clock::now();
    const auto& h = parser_->get();
    head_ = h.method() == bhttp::verb::head;
    target_ = Printable(StrCat(std::string(h.method_string()), " ", std::string(h.target())));
    // The rest of the request must arrive within read_timeout.
    Tcp().expires_after(shared_->opt.read_timeout);
    if (refuse_) {
      return Refuse(503, StrCat("gpusched: too many connections (limit ",
                                listener_->max_connections, "); retry later"));
    }
    if (parser_->is_done()) return OnRead();
    if (beast::iequals(h[bhttp::field::expect], "100-continue") && h.version() >= 11) {
      // Refused without reading the body if it cannot fit now.
      auto len = parser_->content_length();
      if (len && !shared_->table->HasRoom(*entry_, static_cast<int64_t>(*len), Clock::now())) {
        return RefuseBudget();
      }
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
    if (!Enter(ConnPhase::kBody)) return Close(false);
    ReadBodySome();
  }

  void ReadBodySome() {
    if (body_.size() == got_ && buffer_.size() == 0) {
      // Room is charged for bytes in hand only: wait for them first.
      return stream_.async_read_some(
          buffer_.prepare(beast::read_size(buffer_, kReadBufferBytes)),
          beast::bind_front_handler(&Session::OnBodyBytes, this->shared_from_this()));
    }
    if (!GrowBody()) return;
    auto& b = parser_->get().body();
    b.data = body_.data() + got_;
    b.size = body_.size() - got_;
    b.more = true;
    bhttp::async_read_some(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&Session::OnBodySome, this->shared_from_this()));
  }

  void OnBodyBytes(beast::error_code ec, std::size_t n) {
    buffer_.commit(n);
    if (ec) return OnReadError(ec);
    ReadBodySome();
  }

  // Makes room for more body bytes once the string is full: for the bytes
  // in hand and one read buffer more, or double (at most the announced
  // length or the body limit), charging the budget first. So a body holds at
  // most twice its bytes received, or 64 KiB more. False after answering a
  // refusal.
  bool GrowBody() {
    if (body_.size() > got_) return true;
    const uint64_t limit =
        parser_->content_length().value_or(static_cast<uint64_t>(shared_->opt.max_body_bytes));
    if (got_ >= limit) {
      Refuse(413,
             StrCat("request body exceeds the limit of ", shared_->opt.max_body_bytes, " bytes"));
      return false;
    }
    const size_t area = static_cast<size_t>(std::min<uint64_t>(
        limit, std::max({got_ + buffer_.size() + kReadBufferBytes, 2 * body_.size()})));
    // The padding is not charged, so a body of the budget's size fits.
    if (!Hold(static_cast<int64_t>(area))) {
      RefuseBudget();
      return false;
    }
    body_.reserve(area + kBodyPadding);
    body_.resize(area);
    return true;
  }

  void OnBodySome(beast::error_code ec, std::size_t) {
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) return OnReadError(ec);
    const size_t wrote = (body_.size() - got_) - parser_->get().body().size;
    got_ += wrote;
    shared_->table->Progress(*entry_, static_cast<int64_t>(wrote), Clock::now());
    if (!parser_->is_done()) return ReadBodySome();
    body_.resize(got_);
    OnRead();
  }

  void RefuseBudget() {
    Refuse(503, StrCat("gpusched: request bodies and answers in flight exceed ",
                       shared_->opt.max_inflight_body_bytes, " bytes; retry later"));
  }

  void OnReadError(beast::error_code ec) {
    Hold(0);
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == net::error::operation_aborted || ec == beast::error::timeout ||
        ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::bad_descriptor || shared_->table->evicted(*entry_)) {
      return Close(false);
    }
    if (ec == bhttp::error::body_limit) {
      return Refuse(
          413, StrCat("request body exceeds the limit of ", shared_->opt.max_body_bytes, " bytes"));
    }
    if (ec == bhttp::error::header_limit) {
      return Refuse(431, StrCat("request headers too large (at most ", header_limit_, " bytes and ",
                                kMaxHeaderFields, " fields)"));
    }
    Refuse(400, StrCat("bad HTTP request: ", ec.message()));
  }

  // Answers `status` without reading (more of) the request, then closes.
  void Refuse(int status, std::string message) {
    Hold(0);
    shared_->Refused(status, StrCat(target_.empty() ? "" : target_ + " ", "from ", peer_,
                                    " on the ", listener_->name, " port: ", message));
    Send(JsonError(status, message), false, 11, status == 503 ? kRetryAfterSeconds : 0, true);
  }

  void OnRead() {
    if (!Enter(ConnPhase::kHandling)) return Close(false);
    auto msg = parser_->release();
    const bool keep_alive = msg.keep_alive();
    std::string route;
    HttpResponse res;
    size_t body_bytes = 0;
    {
      HttpRequest req;
      req.method = std::string(msg.method_string());
      req.target = std::string(msg.target());
      req.body = std::move(body_);
      body_bytes = req.body.size();
      res = listener_->router->Dispatch(req, *ctx_, &route);
    }
    KeepOrDropDecoder(static_cast<int64_t>(body_bytes));
    int retry_after = 0;
    if (!Hold(static_cast<int64_t>(res.body.size()))) retry_after = RefuseAnswer(&res);
    Account(route, res);
    Send(std::move(res), keep_alive && !shared_->stopping, msg.version(), retry_after, false);
  }

  // The answer does not fit in the budget: replaces it with a 503 (small,
  // not charged). Returns the Retry-After seconds (0: it can never fit).
  int RefuseAnswer(HttpResponse* res) {
    Hold(0);
    const int64_t n = static_cast<int64_t>(res->body.size());
    const int64_t cap = shared_->opt.max_inflight_body_bytes;
    std::string message = StrCat("gpusched: the answer (", n, " bytes) does not fit in the ", cap,
                                 "-byte budget of request bodies and answers in flight",
                                 n > cap ? "" : "; retry later");
    shared_->Refused(
        503, StrCat(target_, " from ", peer_, " on the ", listener_->name, " port: ", message));
    *res = JsonError(503, message);
    return n > cap ? 0 : kRetryAfterSeconds;
  }

  // Request metrics and the bad-request log for an answered request.
  void Account(const std::string& route, const HttpResponse& res) {
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    Metrics* m = shared_->metrics;
    m->Inc("gpusched_requests_total", "Requests by route and HTTP code.",
           {{"verb", route}, {"code", std::to_string(res.status)}});
    if (res.status >= 400 || !res.client_error.empty()) {
      m->Inc("gpusched_request_errors_total",
             "Requests answered with 4xx/5xx, or with an Error because they could not be decoded.",
             {{"verb", route}});
    }
    if (route == "unknown") {
      shared_->Refused(res.status, StrCat(target_, " from ", peer_, " on the ", listener_->name,
                                          " port: no such route"));
    } else if (!res.client_error.empty()) {
      shared_->BadRequest(route, res.status,
                          StrCat(target_, " from ", peer_, ": ", Printable(res.client_error)));
    }
    m->Observe("gpusched_request_duration_seconds",
               "Time from request header to response, by route.", {{"verb", route}}, secs);
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
    if (!Enter(ConnPhase::kAnswer)) return Close(false);
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
    sr_.emplace(*res_);
    WriteSome(keep_alive, drain);
  }

  // Writes what the socket takes now; each piece has write_timeout.
  void WriteSome(bool keep_alive, bool drain) {
    Tcp().expires_after(shared_->opt.write_timeout);
    bhttp::async_write_some(stream_, *sr_,
                            beast::bind_front_handler(&Session::OnWriteSome,
                                                      this->shared_from_this(), keep_alive, drain));
  }

  void OnWriteSome(bool keep_alive, bool drain, beast::error_code ec, std::size_t n) {
    if (!ec) shared_->table->Progress(*entry_, static_cast<int64_t>(n), Clock::now());
    if (!ec && !sr_->is_done()) return WriteSome(keep_alive, drain);
    sr_.reset();
    res_.reset();
    Hold(0);
    if (ec || !keep_alive) return Close(drain && !ec);
    shared_->table->RequestDone(*entry_);
    ReadHeader();
  }

  // `drain`: read and drop what the client still sends (up to kDrainBytes,
  // for up to a second) after our FIN, so the answer is not lost to a reset.
  void Close(bool drain) {
    Enter(ConnPhase::kClosing);
    Hold(0);
    parser_.reset();
    body_ = std::string();
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
    if (!drain || ec) return Tcp().close();
    Tcp().expires_after(std::chrono::seconds(1));
    Drain({}, 0);
  }

  void Drain(beast::error_code ec, std::size_t n) {
    drained_ += n;
    if (ec || drained_ > kDrainBytes) return Tcp().close();
    Tcp().async_read_some(net::buffer(drain_buf_),
                          beast::bind_front_handler(&Session::Drain, this->shared_from_this()));
  }

  Stream stream_;
  Shared* shared_;
  Listener* listener_;
  std::shared_ptr<ConnEntry> entry_;
  const bool refuse_;
  ConnPhase phase_ = ConnPhase::kIdle;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> parser_;
  size_t header_limit_ = kHeaderLimit;
  size_t header_bytes_ = 0;
  std::string body_;  // sized to what is charged; the first got_ bytes are read
  size_t got_ = 0;
  std::optional<bhttp::response<bhttp::empty_body>> continue_;
  std::optional<bhttp::response<bhttp::string_body>> res_;
  std::optional<bhttp::response_serializer<bhttp::string_body>> sr_;
  std::optional<RequestContext> ctx_;
  Clock::time_point start_;
  std::string peer_;
  std::string target_;  // "METHOD /path" of the current request, for logs
  bool head_ = false;
  size_t drained_ = 0;
  int64_t retained_ = 0;  // charged to Shared::retained_decoder
  std::array<char, 4096> drain_buf_;
};

}  // namespace gpusched::http::internal

#endif  // GPUSCHED_HTTP_SESSION_H_
