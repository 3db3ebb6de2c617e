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

#include "gpusched/core/extender_service.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/http/server.h"
#include "test/testing/builders.h"

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
    server_ = std::make_unique<HttpServer>(opt, &router_, &metrics_);
    RouteDeps deps;
    deps.service = service_.get();
    deps.metrics = &metrics_;
    AddExtenderRoutes(router_, deps);
    ASSERT_TRUE(server_->Listen().ok());
    port_ = server_->port();
    thread_ = std::thread([this] { server_->Run(); });
  }
  void TearDown() override {
    server_->Shutdown();
    thread_.join();
  }

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

}  // namespace
}  // namespace gpusched::http
