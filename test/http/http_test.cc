// HTTP tests over loopback: a real HttpServer on an ephemeral port, spoken to
// with plain POSIX sockets so the client shares no code with the server.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gpusched/core/extender_service.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/http/server.h"
#include "test/testing/builders.h"
#include "test/testing/child_process.h"

namespace gpusched::http {
namespace {

using json = nlohmann::json;

class Client {
 public:
  // `source`: the local loopback address to connect from (another source
  // for the server's per-source cap). `rcvbuf` > 0: a small receive buffer,
  // set before connecting (a client that reads slowly or never).
  explicit Client(uint16_t port, const char* source = nullptr, int rcvbuf = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (source != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, source, &local.sin_addr);
      if (bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) return;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Client() { close(fd_); }
  bool connected() const { return connected_; }

  void SendRaw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  struct Response {
    int status = 0;
    std::string headers;
    std::string body;
  };

  // Reads one response's status line and headers only (HEAD, 100 Continue).
  Response ReadHead() {
    Response r;
    while (buf_.find("\r\n\r\n") == std::string::npos) {
      if (!Fill()) return r;
    }
    size_t end = buf_.find("\r\n\r\n");
    r.headers = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    r.status = std::stoi(r.headers.substr(9, 3));
    return r;
  }
  // The next `n` bytes the server sends, left unread ("" if it closes first).
  std::string Peek(size_t n) {
    while (buf_.size() < n) {
      if (!Fill()) return "";
    }
    return buf_.substr(0, n);
  }

  // Reads one response (Content-Length framed). status 0 = connection closed.
  Response Read() {
    Response r;
    while (buf_.find("\r\n\r\n") == std::string::npos) {
      if (!Fill()) return r;
    }
    size_t end = buf_.find("\r\n\r\n");
    r.headers = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    r.status = std::stoi(r.headers.substr(9, 3));
    size_t cl = 0;
    auto pos = r.headers.find("Content-Length: ");
    if (pos != std::string::npos) cl = std::stoul(r.headers.substr(pos + 16));
    while (buf_.size() < cl) {
      if (!Fill()) break;
    }
    r.body = buf_.substr(0, cl);
    buf_.erase(0, cl);
    return r;
  }

  Response Post(const std::string& path, const std::string& body, bool keep_alive = true) {
    SendRaw("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
            (keep_alive ? "" : "Connection: close\r\n") +
            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    return Read();
  }
  Response Get(const std::string& path) {
    SendRaw("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    return Read();
  }
  // True if the server closed the connection (read returns 0).
  bool Closed() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }
  // Reads and drops whatever comes until the server closes (true) or 5 s
  // pass without a byte (false).
  bool DrainUntilClosed() {
    char tmp[65536];
    for (;;) {
      ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  bool Fill() {
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_;
  bool connected_ = false;
  std::string buf_;
};

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = testing::DemoClusterState();
    ASSERT_NE(state_, nullptr);
    service_ = std::make_unique<ExtenderService>(state_.get(),
                                                 *policy::Framework::Create(ScoringConfig{}));
    service_->SetReady(true);
    ServerOptions opt;
    opt.port = 0;
    opt.threads = 2;
    opt.max_body_bytes = 64 * 1024;
    opt.idle_timeout = std::chrono::seconds(2);
    opt.read_timeout = std::chrono::seconds(2);
    opt.health_listen = "127.0.0.1:0";
    opt.log = [this](const std::string& line) {
      absl::MutexLock l(&log_mu_);
      log_.push_back(line);
    };
    Tune(opt);
    server_ = std::make_unique<HttpServer>(opt, &router_, &metrics_, &health_router_);
    RouteDeps deps;
    deps.service = service_.get();
    deps.metrics = &metrics_;
    AddExtenderRoutes(router_, deps);
    AddProbeRoutes(health_router_, deps);
    ASSERT_TRUE(server_->Listen().ok());
    port_ = server_->port();
    thread_ = std::thread([this] { server_->Run(); });
  }
  void TearDown() override {
    server_->Shutdown();
    thread_.join();
  }
  // Adjusts the server options before the server is made.
  virtual void Tune(ServerOptions&) {}
  // Log lines so far that contain `what`.
  std::vector<std::string> LogLines(const std::string& what) {
    absl::MutexLock l(&log_mu_);
    std::vector<std::string> out;
    for (const auto& line : log_) {
      if (line.find(what) != std::string::npos) out.push_back(line);
    }
    return out;
  }

  absl::Mutex log_mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(log_mu_);
  Router health_router_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
  Metrics metrics_;
  Router router_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

TEST_F(HttpTest, FilterPrioritizeBindOnOneKeepAliveConnection) {
  Client c(port_);
  ASSERT_TRUE(c.connected());
  auto f =
      c.Post("/scheduler/filter", testing::ReadSourceFile("config/examples/filter-request.json"));
  ASSERT_EQ(f.status, 200);
  json fr = json::parse(f.body);
  EXPECT_EQ(fr["Error"], "");
  EXPECT_EQ(fr["NodeNames"], json({"dgx-a100-01", "dgx-a100-02", "hgx-h100-01", "hgx-h100-02"}));
  EXPECT_EQ(fr["FailedAndUnresolvableNodes"]["t4-01"],
            "gpusched: GPU Tesla-T4 not in requested models [A100 H100]");
  auto p = c.Post("/scheduler/prioritize",
                  testing::ReadSourceFile("config/examples/prioritize-request.json"));
  ASSERT_EQ(p.status, 200);
  json pr = json::parse(p.body);
  ASSERT_TRUE(pr.is_array());
  ASSERT_EQ(pr.size(), 4u);
  for (const auto& hp : pr) {
    EXPECT_GE(hp["Score"].get<int>(), 0);
    EXPECT_LE(hp["Score"].get<int>(), 10);
  }
  auto b = c.Post("/scheduler/bind", testing::ReadSourceFile("config/examples/bind-request.json"));
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(json::parse(b.body)["Error"], "");
  // The assumption is visible to the next filter: dgx-a100-02 has 4 free now.
  EXPECT_EQ(state_->Snapshot()->Find("dgx-a100-02")->free_count(), 4);
  // Binding the same pod elsewhere changes nothing.
  auto b2 = c.Post(
      "/scheduler/bind",
      R"({"PodName":"llm-pretrain-0-7xq2d","PodNamespace":"team-a","PodUID":"uid-team-a-llm-pretrain-0-7xq2d","Node":"dgx-a100-01"})");
  EXPECT_NE(json::parse(b2.body)["Error"], "");
  EXPECT_EQ(state_->Snapshot()->Find("dgx-a100-01")->free_count(), 6);
  EXPECT_EQ(metrics_.CounterValue("gpusched_requests_total", {{"verb", "filter"}, {"code", "200"}}),
            1);
  EXPECT_EQ(metrics_.CounterValue("gpusched_requests_total", {{"verb", "bind"}, {"code", "200"}}),
            2);
}

// kube-scheduler retries a bind whose answer it did not get: the same pod to
// the same node again is answered as success without taking more devices; the
// same pod to another node is refused, naming where it is bound.
TEST_F(HttpTest, RepeatedBindIsIdempotentAndABindElsewhereIsRefused) {
  Client c(port_);
  ASSERT_TRUE(c.connected());
  const std::string bind = testing::ReadSourceFile("config/examples/bind-request.json");
  for (int i = 0; i < 2; ++i) {
    auto b = c.Post("/scheduler/bind", bind);
    ASSERT_EQ(b.status, 200);
    EXPECT_EQ(json::parse(b.body)["Error"], "") << "bind " << i + 1;
    EXPECT_EQ(state_->Snapshot()->Find("dgx-a100-02")->free_count(), 4) << "bind " << i + 1;
  }
  auto elsewhere = c.Post(
      "/scheduler/bind",
      R"({"PodName":"llm-pretrain-0-7xq2d","PodNamespace":"team-a","PodUID":"uid-team-a-llm-pretrain-0-7xq2d","Node":"dgx-a100-01"})");
  ASSERT_EQ(elsewhere.status, 200);
  EXPECT_EQ(json::parse(elsewhere.body)["Error"],
            "gpusched: pod team-a/llm-pretrain-0-7xq2d is already bound to dgx-a100-02");
  EXPECT_EQ(state_->Snapshot()->Find("dgx-a100-01")->free_count(), 6);
  EXPECT_EQ(state_->Snapshot()->Find("dgx-a100-02")->free_count(), 4);
}

TEST_F(HttpTest, BadInputGetsJsonErrorsAndServerKeepsServing) {
  Client c(port_);
  auto r = c.Post("/scheduler/filter", R"({"Pod": {"metadata": )");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("malformed JSON"),
            std::string::npos);
  r = c.Post("/scheduler/filter", R"({"Pod": 5, "NodeNames": ["a"]})");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("ExtenderArgs.Pod"),
            std::string::npos);
  r = c.Post("/scheduler/prioritize", "[]");
  EXPECT_EQ(r.status, 400);
  r = c.Get("/no/such/path");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(json::parse(r.body).contains("Error"));
  r = c.Get("/scheduler/filter");
  EXPECT_EQ(r.status, 405);
  // Still serving on the same connection.
  r = c.Get("/healthz");
  EXPECT_EQ(r.status, 200);
  // Unknown node is failed, never passed.
  r = c.Post(
      "/scheduler/filter",
      R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},"Nodes":null,"NodeNames":["ghost","t4-01"]})");
  json fr = json::parse(r.body);
  EXPECT_EQ(fr["NodeNames"], json({"t4-01"}));
  EXPECT_TRUE(fr["FailedAndUnresolvableNodes"].contains("ghost"));
}

TEST_F(HttpTest, BodyOverLimitIs413ThenClose) {
  Client c(port_);
  std::string big(100 * 1024, ' ');
  auto r = c.Post("/scheduler/filter", big);
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("limit"), std::string::npos);
  EXPECT_TRUE(c.Closed());
  Client again(port_);  // the server is still up
  EXPECT_EQ(again.Get("/healthz").status, 200);
}

TEST_F(HttpTest, MalformedHttpIs400) {
  Client c(port_);
  c.SendRaw("THIS IS NOT HTTP\r\n\r\n");
  auto r = c.Read();
  EXPECT_EQ(r.status, 400);
}

TEST_F(HttpTest, IdleConnectionTimesOut) {
  Client c(port_);
  EXPECT_EQ(c.Get("/healthz").status, 200);
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.Closed());  // idle timeout is 2 s in this fixture
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

TEST_F(HttpTest, ReadyzAndMetrics) {
  Client c(port_);
  EXPECT_EQ(c.Get("/readyz").status, 200);
  service_->SetReady(false);
  EXPECT_EQ(c.Get("/readyz").status, 503);
  auto f =
      c.Post("/scheduler/filter", testing::ReadSourceFile("config/examples/filter-request.json"));
  EXPECT_EQ(json::parse(f.body)["Error"], "gpusched: cluster state not synced yet");
  service_->SetReady(true);
  auto m = c.Get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("gpusched_request_duration_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 1"),
            std::string::npos);
  EXPECT_NE(m.body.find("gpusched_requests_total{verb=\"readyz\",code=\"503\"}"), std::string::npos)
      << m.body;
}

TEST_F(HttpTest, GracefulShutdownFinishesAndCloses) {
  Client c(port_);
  EXPECT_EQ(c.Get("/healthz").status, 200);
  server_->Shutdown();
  EXPECT_TRUE(c.Closed());  // idle keep-alive connection is closed
}

// The plain health port serves the probes and nothing else: no metrics, no
// debug pages, no extender verbs.
TEST_F(HttpTest, HealthPortServesOnlyProbes) {
  ASSERT_NE(server_->health_port(), 0);
  ASSERT_NE(server_->health_port(), port_);
  Client c(server_->health_port());
  EXPECT_EQ(c.Get("/healthz").status, 200);
  EXPECT_EQ(c.Get("/readyz").status, 200);
  for (const char* path : {"/metrics", "/debug/queues", "/debug/pods/a/b", "/debug/config"}) {
    auto r = c.Get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(json::parse(r.body).contains("Error")) << path;
  }
  auto f =
      c.Post("/scheduler/filter", testing::ReadSourceFile("config/examples/filter-request.json"));
  EXPECT_EQ(f.status, 404);
  EXPECT_TRUE(json::parse(f.body).contains("Error"));
  service_->SetReady(false);
  EXPECT_EQ(c.Get("/readyz").status, 503);
  // The main port still serves everything, probes included.
  Client m(port_);
  EXPECT_EQ(m.Get("/healthz").status, 200);
  EXPECT_EQ(m.Get("/metrics").status, 200);
}

// HEAD gets the headers GET would get (Content-Length included) and no body
// bytes: the next response on the connection starts right after them.
TEST_F(HttpTest, HeadAnswersCarryNoBody) {
  Client c(port_);
  struct Case {
    const char* path;
    int status;
    size_t length;  // 0 = any non-zero
  };
  for (const Case& k : {Case{"/scheduler/filter", 405, 0}, Case{"/healthz", 200, 3},
                        Case{"/no/such/path", 404, 0}}) {
    c.SendRaw(std::string("HEAD ") + k.path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    auto h = c.ReadHead();
    EXPECT_EQ(h.status, k.status) << k.path;
    auto pos = h.headers.find("Content-Length: ");
    ASSERT_NE(pos, std::string::npos) << h.headers;
    const size_t length = std::stoul(h.headers.substr(pos + 16));
    if (k.length != 0) {
      EXPECT_EQ(length, k.length) << k.path;
    }
    EXPECT_GT(length, 0u) << k.path;
    c.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(c.Peek(9), "HTTP/1.1 ") << "body bytes after HEAD " << k.path;
    EXPECT_EQ(c.Read().status, 200);
  }
}

// Expect: 100-continue: an acceptable request gets 100 Continue before the
// body is sent; a refused one gets its final answer without it.
TEST_F(HttpTest, ExpectContinueIsHonoured) {
  const std::string body = testing::ReadSourceFile("config/examples/filter-request.json");
  Client c(port_);
  c.SendRaw(
      "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(c.ReadHead().status, 100);
  c.SendRaw(body);
  auto r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["Error"], "");

  Client big(port_);  // over the 64 KiB body limit of this fixture
  big.SendRaw(
      "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: 1000000\r\n\r\n");
  auto refused = big.Read();
  EXPECT_EQ(refused.status, 413);
  EXPECT_TRUE(json::parse(refused.body).contains("Error"));
}

// Requests refused at the HTTP layer are logged, at most one line per
// second per status, the next line counting those skipped.
TEST_F(HttpTest, RefusedRequestsAreLoggedRateLimited) {
  for (int i = 0; i < 6; ++i) {
    Client c(port_);
    c.SendRaw("THIS IS NOT HTTP\r\n\r\n");
    EXPECT_EQ(c.Read().status, 400);
  }
  Client c(port_);
  EXPECT_EQ(c.Get("/no/such/path").status, 404);
  auto bad = LogLines("refused HTTP request: 400");
  ASSERT_GE(bad.size(), 1u);
  EXPECT_LT(bad.size(), 6u) << "not rate-limited";
  EXPECT_NE(bad[0].find("bad HTTP request"), std::string::npos) << bad[0];
  auto missing = LogLines("refused HTTP request: 404");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("GET /no/such/path"), std::string::npos) << missing[0];
  EXPECT_NE(missing[0].find("127.0.0.1"), std::string::npos) << missing[0];
}

// Memory caps: 100 KiB of bodies and answers in flight (and 2 connections
// in HttpConnectionCapTest). Holders are never slow here (slow_after is an
// hour), so nothing is evicted for the budget.
class HttpCapsTest : public HttpTest {
 protected:
  void Tune(ServerOptions& opt) override {
    opt.max_connections = max_connections_;
    opt.max_connections_per_source = max_connections_;
    opt.max_body_bytes = 64 * 1024;
    opt.max_inflight_body_bytes = 100 * 1024;
    opt.small_lane_bytes = lane_;
    opt.small_request_bytes = 8 * 1024;
    opt.slow_after = std::chrono::hours(1);
  }
  // A filter request padded with spaces to `size` bytes.
  static std::string PaddedFilter(size_t size) {
    std::string body = testing::ReadSourceFile("config/examples/filter-request.json");
    body.resize(size, ' ');
    return body;
  }
  static std::string PostHeader(size_t length, bool expect) {
    return std::string("POST /scheduler/filter HTTP/1.1\r\nHost: x\r\n") +
           (expect ? "Expect: 100-continue\r\n" : "") +
           "Content-Type: application/json\r\nContent-Length: " + std::to_string(length) +
           "\r\n\r\n";
  }
  static void ExpectRetryLater(const Client::Response& r) {
    EXPECT_EQ(r.status, 503);
    EXPECT_NE(r.headers.find("Retry-After: "), std::string::npos) << r.headers;
    EXPECT_TRUE(json::parse(r.body).contains("Error")) << r.body;
  }
  int max_connections_ = 64;
  int64_t lane_ = 0;
};

class HttpConnectionCapTest : public HttpCapsTest {
 protected:
  HttpConnectionCapTest() { max_connections_ = 2; }
};

class HttpLaneTest : public HttpCapsTest {
 protected:
  HttpLaneTest() { lane_ = 32 * 1024; }  // for requests of at most 8 KiB
};

// Bodies are charged as they arrive: a sent 60 KiB body blocks a second
// one; announced bytes charge nothing.
TEST_F(HttpCapsTest, BodiesInFlightPastTheCapGet503ThenServingGoesOn) {
  const size_t size = 60 * 1024;  // two of them exceed 100 KiB
  const std::string body = PaddedFilter(size);
  Client announced(port_);  // only a header: holds nothing
  announced.SendRaw(PostHeader(size, false));
  Client first(port_);
  first.SendRaw(PostHeader(size, false) + body.substr(0, size - 1));
  ASSERT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes >= 59 * 1024; }));
  {
    Client second(port_);
    auto r = second.Post("/scheduler/filter", body);
    ExpectRetryLater(r);
    EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("in flight"), std::string::npos);
    EXPECT_TRUE(second.Closed());
  }
  {
    Client third(port_);  // with Expect: the answer comes without 100 Continue
    third.SendRaw(PostHeader(size, true));
    ExpectRetryLater(third.Read());
  }
  {
    Client chunked(port_);  // chunked: charged as it arrives, refused past the cap
    std::string chunk(50 * 1024, ' ');
    char len[16];
    snprintf(len, sizeof(len), "%zx", chunk.size());
    chunked.SendRaw(
        "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
        std::string(len) + "\r\n" + chunk + "\r\n");
    ExpectRetryLater(chunked.Read());
  }
  first.SendRaw(body.substr(size - 1));
  EXPECT_EQ(first.Read().status, 200);
  // Released: a body of the same size is served again.
  Client after(port_);
  EXPECT_EQ(after.Post("/scheduler/filter", body).status, 200);
  EXPECT_GE(metrics_.CounterValue("gpusched_http_rejected_total", {{"code", "503"}}), 3);
  EXPECT_LE(server_->stats().peak_inflight_bytes, 100 * 1024);
}

TEST_F(HttpCapsTest, ConcurrentLargeBodiesAreServedOrRefusedWithRetryAfter) {
  constexpr int kClients = 8;
  std::vector<Client::Response> answers(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      Client c(port_);
      answers[i] = c.Post("/scheduler/filter", PaddedFilter(60 * 1024), false);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : answers) {
    if (r.status == 200) continue;
    ExpectRetryLater(r);  // over a connection or a body cap
  }
  Client c(port_);
  EXPECT_EQ(c.Post("/scheduler/filter", PaddedFilter(60 * 1024)).status, 200);
  EXPECT_LE(server_->stats().peak_inflight_bytes, 100 * 1024);
}

// Past the cap, a new connection takes the slot of the longest idle one;
// only when every connection is busy is it refused.
TEST_F(HttpConnectionCapTest, ConnectionsPastTheCapEvictIdleOnesElseGet503) {
  auto a = std::make_unique<Client>(port_);
  Client b(port_);
  EXPECT_EQ(a->Get("/healthz").status, 200);
  EXPECT_EQ(b.Get("/healthz").status, 200);
  {
    Client c(port_);  // a has been idle longest
    EXPECT_EQ(c.Get("/healthz").status, 200);
    EXPECT_TRUE(a->Closed());
  }
  // Two connections busy reading a body: nothing to evict.
  std::vector<std::unique_ptr<Client>> busy;
  for (int i = 1; i <= 2; ++i) {
    busy.push_back(std::make_unique<Client>(port_));
    busy.back()->SendRaw(PostHeader(1000, false) + "{");
    // Each holds room for its body's 1,000 bytes.
    ASSERT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes >= i * 1000; }));
  }
  ASSERT_TRUE(testing::WaitFor([&] { return server_->stats().open == 2; }));
  {
    Client c(port_);
    auto r = c.Get("/healthz");
    ExpectRetryLater(r);
    EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("too many connections"),
              std::string::npos);
    EXPECT_TRUE(c.Closed());
  }
  // The probes have their own cap.
  Client probe(server_->health_port());
  EXPECT_EQ(probe.Get("/healthz").status, 200);
  EXPECT_GE(metrics_.CounterValue("gpusched_http_evictions_total", {{"reason", "idle"}}), 1);
}

// Large bodies fill the budget and are never slow here; kube-scheduler's
// small requests still pass, in the lane only they may use.
TEST_F(HttpLaneTest, SmallRequestsPassWhileLargeOnesFillTheBudget) {
  std::vector<std::unique_ptr<Client>> large;
  for (size_t size : {60 * 1024, 40 * 1024}) {
    large.push_back(std::make_unique<Client>(port_));
    large.back()->SendRaw(PostHeader(size, false) + PaddedFilter(size - 1));
  }
  ASSERT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes >= 99 * 1024; }));
  const std::string small = testing::ReadSourceFile("config/examples/filter-request.json");
  ASSERT_LE(small.size(), 8u * 1024);
  for (int i = 0; i < 3; ++i) {
    Client c(port_);
    EXPECT_EQ(c.Post("/scheduler/filter", small).status, 200);
  }
  Client medium(port_);  // over 8 KiB: the budget only, which is full
  ExpectRetryLater(medium.Post("/scheduler/filter", PaddedFilter(20 * 1024)));
  EXPECT_LE(server_->stats().peak_inflight_bytes, (100 + 32) * 1024);
}

// Request headers: every byte and field counts, however the header arrives.
TEST_F(HttpTest, HeaderTotalIsCapped) {
  for (int fields : {90, 10000}) {  // ~109 KB either way, read by the server in pieces
    std::string many;
    const std::string value(std::max(1, 109000 / fields - 12), 'v');
    for (int i = 0; i < fields; ++i)
      many += "X-F" + std::to_string(100000 + i) + ": " + value + "\r\n";
    ASSERT_GT(many.size(), 100000u);
    Client c(port_);
    c.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + "\r\n");
    auto r = c.Read();
    EXPECT_EQ(r.status, 431) << fields << " fields";
    EXPECT_NE(r.body.find("too large"), std::string::npos) << r.body;
  }

  std::string fields;  // 150 fields in 2 KB
  for (int i = 0; i < 150; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
  Client d(port_);
  d.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n" + fields + "\r\n");
  EXPECT_EQ(d.Read().status, 431);

  Client e(port_);  // one 60 KB field, sent in small pieces: within the cap
  std::string req =
      "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(60000, 'a') + "\r\n\r\n";
  for (size_t off = 0; off < req.size(); off += 7000) e.SendRaw(req.substr(off, 7000));
  EXPECT_EQ(e.Read().status, 200);
}

// A body that fails to decode is logged (rate-limited) and counted, whether
// it is answered 400 (malformed JSON) or 200 with Error (bad ExtenderArgs).
TEST_F(HttpTest, BadRequestsAreLoggedAndCounted) {
  Client c(port_);
  EXPECT_EQ(c.Post("/scheduler/filter", R"({"Pod": )").status, 400);
  auto r = c.Post("/scheduler/filter", R"({"Pod": 5, "NodeNames": ["a"]})");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(json::parse(r.body)["Error"], "");
  EXPECT_EQ(c.Post("/scheduler/bind", R"({"PodName": 7})").status, 200);
  EXPECT_EQ(c.Post("/scheduler/preempt", "[").status, 400);
  EXPECT_EQ(metrics_.CounterValue("gpusched_request_errors_total", {{"verb", "filter"}}), 2);
  EXPECT_EQ(metrics_.CounterValue("gpusched_request_errors_total", {{"verb", "bind"}}), 1);
  EXPECT_EQ(metrics_.CounterValue("gpusched_request_errors_total", {{"verb", "preempt"}}), 1);
  auto lines = LogLines("gpusched: bad request");
  ASSERT_GE(lines.size(), 3u);
  EXPECT_NE(lines[0].find("POST /scheduler/filter from 127.0.0.1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("malformed JSON"), std::string::npos) << lines[0];
  for (int i = 0; i < 5; ++i) c.Post("/scheduler/filter", "{");
  EXPECT_EQ(metrics_.CounterValue("gpusched_request_errors_total", {{"verb", "filter"}}), 7);
  EXPECT_LT(LogLines("POST /scheduler/filter").size(), 7u) << "not rate-limited";
  // A good request is neither.
  c.Post("/scheduler/filter", testing::ReadSourceFile("config/examples/filter-request.json"));
  EXPECT_EQ(metrics_.CounterValue("gpusched_request_errors_total", {{"verb", "filter"}}), 7);
}

TEST_F(HttpTest, PreemptAnswersANodeListedTwiceOnce) {
  std::string body = testing::ReadSourceFile("config/examples/preempt-request.json");
  const size_t first = body.find("\"dgx1-v100-01\"");
  const size_t second = body.find("\"dgx1-v100-02\"");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(second, std::string::npos);
  // The first node's entry again, before the second node's.
  body.insert(second, body.substr(first, second - first));
  Client c(port_);
  auto r = c.Post("/scheduler/preempt", body);
  ASSERT_EQ(r.status, 200);
  size_t count = 0;
  for (size_t at = r.body.find("\"dgx1-v100-01\""); at != std::string::npos;
       at = r.body.find("\"dgx1-v100-01\"", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << r.body;
}

// Hostile clients. Each test checks that a well-behaved client's filter is
// answered (200, not 503 or a closed connection) while the attack goes on,
// and that the memory budget's count never passes its cap.
class HttpAttackTest : public HttpTest {
 protected:
  static constexpr int64_t kBudget = 4 << 20;
  static constexpr int64_t kLane = 256 << 10;  // for requests of at most 64 KiB
  void Tune(ServerOptions& opt) override {
    opt.max_connections = 16;  // 8 per source
    opt.max_body_bytes = 1 << 20;
    opt.max_inflight_body_bytes = kBudget;
    opt.small_lane_bytes = kLane;
    opt.small_request_bytes = 64 << 10;
    opt.slow_after = std::chrono::milliseconds(100);
    opt.header_timeout = std::chrono::seconds(5);
    opt.read_timeout = std::chrono::seconds(30);  // as deployed
    opt.write_timeout = std::chrono::seconds(2);
  }
  // A filter for the example pod, padded with spaces to `size` bytes.
  static std::string PaddedFilter(size_t size) {
    std::string body = testing::ReadSourceFile("config/examples/filter-request.json");
    body.resize(size, ' ');
    return body;
  }
  // A filter naming `n` nodes the cluster does not have: each gets a reason
  // in the answer, which is several times the body.
  static std::string UnknownNodesFilter(int n) {
    json pod = json::parse(testing::ReadSourceFile("config/examples/filter-request.json"))["Pod"];
    std::string body = R"({"Pod":)" + pod.dump() + R"(,"NodeNames":[)";
    for (int i = 0; i < n; ++i) body += (i ? ",\"u" : "\"u") + std::to_string(1000000 + i) + "\"";
    return body + "]}";
  }
  // A well-behaved filter on a new connection: its status.
  int WellBehavedFilter() {
    Client c(port_);
    auto r =
        c.Post("/scheduler/filter", testing::ReadSourceFile("config/examples/filter-request.json"));
    if (r.status == 200) {
      EXPECT_EQ(json::parse(r.body)["Error"], "");
    }
    return r.status;
  }
  int64_t Evictions(const char* reason) {
    return metrics_.CounterValue("gpusched_http_evictions_total", {{"reason", reason}});
  }
};

// The headers of maximal POSTs hold nothing: budget is charged as bytes
// arrive, not as announced.
TEST_F(HttpAttackTest, AnnouncedBodiesHoldNoBudget) {
  std::vector<std::unique_ptr<Client>> attackers;
  for (int i = 0; i < 6; ++i) {  // 6 MiB announced, over the 4 MiB budget
    attackers.push_back(std::make_unique<Client>(port_, "127.0.0.2"));
    attackers.back()->SendRaw(
        "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n");
  }
  EXPECT_EQ(WellBehavedFilter(), 200);
  // Only the well-behaved request was charged, released once its answer is written.
  EXPECT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes == 0; }));
  EXPECT_LT(server_->stats().peak_inflight_bytes, 1 << 20);
}

// Connections that sent the header of a maximal POST and wait, far more
// than the slots: they hold no budget and give up their slots to newcomers.
TEST_F(HttpAttackTest, HeaderOnlyPostsDoNotShutOutNewConnections) {
  std::vector<std::unique_ptr<Client>> attackers;
  for (int i = 0; i < 100; ++i) {  // past the 16 slots and 64 refusal slots
    attackers.push_back(std::make_unique<Client>(port_));
    attackers.back()->SendRaw(
        "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n");
  }
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(WellBehavedFilter(), 200) << "round " << round;
  }
  // Mostly bodies not begun; a few still in their header or unread.
  EXPECT_GE(Evictions("body") + Evictions("header") + Evictions("fresh"), 80);
  EXPECT_GE(Evictions("body"), 1);
  EXPECT_EQ(server_->stats().refused, 0);
}

// Bodies sent nearly whole and then stalled hold budget, but only until
// someone needs the room: the stalled holders are evicted.
TEST_F(HttpAttackTest, StalledBodiesAreEvictedWhenOthersNeedTheRoom) {
  const std::string almost = PaddedFilter((1 << 20) - 1);
  std::vector<std::unique_ptr<Client>> attackers;
  for (int i = 0; i < 4; ++i) {  // each holds 1 MiB: together the whole budget
    attackers.push_back(std::make_unique<Client>(port_, "127.0.0.2"));
    attackers.back()->SendRaw("POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                              std::to_string(1 << 20) + "\r\n\r\n" + almost);
  }
  ASSERT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes >= 3 << 20; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past slow_after
  Client c(port_);                                              // needs more than the ~1 MiB left
  EXPECT_EQ(c.Post("/scheduler/filter", PaddedFilter((1 << 20) - 100)).status, 200);
  EXPECT_GE(Evictions("body"), 1);
  EXPECT_LE(server_->stats().peak_inflight_bytes, kBudget + kLane);
  EXPECT_EQ(WellBehavedFilter(), 200);
}

// An answer counts in the budget until written; one larger than the whole
// budget is refused instead of being held.
TEST_F(HttpAttackTest, AnswerLargerThanTheBudgetIsRefused) {
  const std::string body = UnknownNodesFilter(90000);  // ~0.9 MB in, several MB out
  ASSERT_LT(body.size(), 1u << 20);
  Client c(port_);
  auto r = c.Post("/scheduler/filter", body);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("does not fit"), std::string::npos)
      << r.body;
  EXPECT_LE(server_->stats().peak_inflight_bytes, kBudget + kLane);
  EXPECT_EQ(server_->stats().inflight_bytes, 0);
  EXPECT_EQ(WellBehavedFilter(), 200);
}

// A client that never reads its answer: the answer is charged while held,
// evicted when another request needs the room, and in any case dropped once
// a write stalls for write_timeout.
TEST_F(HttpAttackTest, NeverReadAnswersAreEvictedAndTheirWritesTimeOut) {
  const std::string body = UnknownNodesFilter(54000);  // a ~3.3 MB answer
  Client sink(port_, "127.0.0.2", 4096);
  sink.SendRaw("POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes > 1 << 20; }));
  const int64_t answer = server_->stats().inflight_bytes;
  // A request that needs more than what is left evicts the stalled answer.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past slow_after
  Client big(port_);
  const std::string big_body = PaddedFilter(static_cast<size_t>(kBudget - answer) + 1000);
  ASSERT_LT(big_body.size(), 1u << 20);
  EXPECT_EQ(big.Post("/scheduler/filter", big_body).status, 200);
  EXPECT_EQ(Evictions("answer"), 1);
  EXPECT_TRUE(sink.DrainUntilClosed());
  // Without contention the write stall alone ends it (write_timeout 2 s).
  Client sink2(port_, "127.0.0.2", 4096);
  sink2.SendRaw("POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes > 1 << 20; }));
  EXPECT_EQ(WellBehavedFilter(), 200);
  EXPECT_TRUE(testing::WaitFor([&] { return server_->stats().inflight_bytes == 0; }));
  EXPECT_EQ(Evictions("answer"), 1);
  EXPECT_LE(server_->stats().peak_inflight_bytes, kBudget + kLane);
}

// Slowloris: far more connections than slots, each with half a header. New
// connections evict the oldest of them; keep-alive connections from another
// source are untouched (the attacker's source is capped at 8 of 16 slots).
TEST_F(HttpAttackTest, SlowlorisDoesNotShutOutNewConnections) {
  Client keep(port_, "127.0.0.3");
  EXPECT_EQ(keep.Get("/healthz").status, 200);
  std::vector<std::unique_ptr<Client>> attackers;
  for (int i = 0; i < 100; ++i) {  // past the 16 slots and 64 refusal slots
    attackers.push_back(std::make_unique<Client>(port_));
    attackers.back()->SendRaw("POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nX-Slow: ");
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& a : attackers) a->SendRaw("a");                 // still dribbling
    EXPECT_EQ(WellBehavedFilter(), 200) << "round " << round;  // same source as the attack
  }
  EXPECT_EQ(keep.Get("/healthz").status, 200);
  EXPECT_GE(Evictions("header") + Evictions("fresh"), 80);
  const ConnStats st = server_->stats();
  EXPECT_LE(st.open, 16);
  EXPECT_EQ(st.refused, 0);
}

}  // namespace
}  // namespace gpusched::http
