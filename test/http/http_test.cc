// HTTP tests over loopback: a real HttpServer on an ephemeral port, spoken to
// with plain POSIX sockets so the client shares no code with the server.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

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
  explicit Client(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
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

// Memory caps: 100 KiB of bodies in flight (and 2 connections in
// HttpConnectionCapTest).
class HttpCapsTest : public HttpTest {
 protected:
  void Tune(ServerOptions& opt) override {
    opt.max_connections = max_connections_;
    opt.max_body_bytes = 64 * 1024;
    opt.max_inflight_body_bytes = 100 * 1024;
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
};

class HttpConnectionCapTest : public HttpCapsTest {
 protected:
  HttpConnectionCapTest() { max_connections_ = 2; }
};

TEST_F(HttpCapsTest, BodiesInFlightPastTheCapGet503ThenServingGoesOn) {
  const size_t size = 60 * 1024;  // two of them exceed 100 KiB
  Client first(port_);
  first.SendRaw(PostHeader(size, true));
  ASSERT_EQ(first.ReadHead().status, 100);  // its 60 KiB are charged now
  {
    Client second(port_);  // announced: refused before a byte is read
    second.SendRaw(PostHeader(size, false));
    auto r = second.Read();
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
  first.SendRaw(PaddedFilter(size));
  EXPECT_EQ(first.Read().status, 200);
  // Released: a body of the same size is served again.
  Client after(port_);
  EXPECT_EQ(after.Post("/scheduler/filter", PaddedFilter(size)).status, 200);
  EXPECT_GE(metrics_.CounterValue("gpusched_http_rejected_total", {{"code", "503"}}), 3);
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
}

TEST_F(HttpConnectionCapTest, ConnectionsPastTheCapGet503) {
  auto a = std::make_unique<Client>(port_);
  Client b(port_);
  EXPECT_EQ(a->Get("/healthz").status, 200);
  EXPECT_EQ(b.Get("/healthz").status, 200);
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
  a.reset();  // a slot frees once the server sees the close
  EXPECT_TRUE(testing::WaitFor([&] {
    Client d(port_);
    return d.Get("/healthz").status == 200;
  }));
}

}  // namespace
}  // namespace gpusched::http
