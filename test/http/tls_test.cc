// Extender TLS and mTLS over loopback: a real HttpServer with a throw-away
// PKI (test/kube/test_pki.h), spoken to with a Beast ssl_stream client.
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "gpusched/core/extender_service.h"
#include "scheduler/http/extender_routes.h"
#include "scheduler/http/server.h"
#include "test/kube/test_pki.h"
#include "test/testing/builders.h"

namespace gpusched::http {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using json = nlohmann::json;

struct ClientResult {
  bool handshake_ok = false;
  bool request_ok = false;
  int status = 0;
  std::string body;
};

// One TLS connection: handshake, then one request. `trust_ca` empty = trust
// nothing; client cert/key empty = no client certificate.
ClientResult TlsRequest(uint16_t port, const std::string& trust_ca, const std::string& cert,
                        const std::string& key, bhttp::verb verb, const std::string& target,
                        const std::string& body = "") {
  ClientResult out;
  asio::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_verify_mode(ssl::verify_peer);
  if (!trust_ca.empty()) ctx.add_certificate_authority(asio::buffer(trust_ca));
  if (!cert.empty()) {
    ctx.use_certificate_chain(asio::buffer(cert));
    ctx.use_private_key(asio::buffer(key), ssl::context::pem);
  }
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  beast::error_code ec;
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
  beast::get_lowest_layer(stream).connect(
      asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return out;
  stream.handshake(ssl::stream_base::client, ec);
  if (ec) return out;
  out.handshake_ok = true;
  bhttp::request<bhttp::string_body> req(verb, target, 11);
  req.set(bhttp::field::host, "127.0.0.1");
  if (!body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  bhttp::write(stream, req, ec);
  if (ec) return out;
  beast::flat_buffer buf;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(stream, buf, res, ec);
  if (ec) return out;
  out.request_ok = true;
  out.status = static_cast<int>(res.result_int());
  out.body = res.body();
  stream.shutdown(ec);  // the peer may just close; either is fine
  return out;
}

// One plain-HTTP request.
ClientResult PlainRequest(uint16_t port, bhttp::verb verb, const std::string& target,
                          const std::string& body = "") {
  ClientResult out;
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(5));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return out;
  bhttp::request<bhttp::string_body> req(verb, target, 11);
  req.set(bhttp::field::host, "127.0.0.1");
  req.body() = body;
  req.prepare_payload();
  bhttp::write(stream, req, ec);
  if (ec) return out;
  beast::flat_buffer buf;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(stream, buf, res, ec);
  if (ec) return out;
  out.request_ok = true;
  out.status = static_cast<int>(res.result_int());
  out.body = res.body();
  return out;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new gpusched::testing::TestPki(testing::MakeTestPki()); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  void StartServer(bool mtls) {
    state_ = testing::DemoClusterState();
    ASSERT_NE(state_, nullptr);
    service_ = std::make_unique<ExtenderService>(state_.get(),
                                                 *policy::Framework::Create(ScoringConfig{}));
    service_->SetReady(true);
    ServerOptions opt;
    opt.port = 0;
    opt.threads = 2;
    opt.read_timeout = std::chrono::seconds(3);
    opt.idle_timeout = std::chrono::seconds(3);
    opt.tls_cert = testing::WriteTempFile("tls_server.crt", pki_->server_cert_pem);
    opt.tls_key = testing::WriteTempFile("tls_server.key", pki_->server_key_pem);
    if (mtls) opt.tls_client_ca = testing::WriteTempFile("tls_client_ca.crt", pki_->ca_pem);
    opt.health_listen = "127.0.0.1:0";
    RouteDeps deps;
    deps.service = service_.get();
    deps.metrics = &metrics_;
    AddExtenderRoutes(router_, deps);
    AddProbeRoutes(health_router_, deps);
    server_ = std::make_unique<HttpServer>(opt, &router_, &metrics_, &health_router_);
    absl::Status st = server_->Listen();
    ASSERT_TRUE(st.ok()) << st;
    port_ = server_->port();
    thread_ = std::thread([this] { server_->Run(); });
  }
  void TearDown() override {
    if (server_ != nullptr && thread_.joinable()) {
      server_->Shutdown();
      thread_.join();
    }
  }

  static gpusched::testing::TestPki* pki_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
  Metrics metrics_;
  Router router_;
  Router health_router_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

gpusched::testing::TestPki* TlsTest::pki_ = nullptr;

TEST_F(TlsTest, TrustedCaServesHealthzAndFilter) {
  StartServer(/*mtls=*/false);
  auto h = TlsRequest(port_, pki_->ca_pem, "", "", bhttp::verb::get, "/healthz");
  ASSERT_TRUE(h.handshake_ok);
  ASSERT_TRUE(h.request_ok);
  EXPECT_EQ(h.status, 200);
  auto f = TlsRequest(port_, pki_->ca_pem, "", "", bhttp::verb::post, "/scheduler/filter",
                      testing::ReadSourceFile("config/examples/filter-request.json"));
  ASSERT_TRUE(f.request_ok);
  ASSERT_EQ(f.status, 200);
  json fr = json::parse(f.body);
  EXPECT_EQ(fr["Error"], "");
  EXPECT_EQ(fr["NodeNames"], json({"dgx-a100-01", "dgx-a100-02", "hgx-h100-01", "hgx-h100-02"}));
}

TEST_F(TlsTest, ClientThatDoesNotTrustTheCaFailsHandshake) {
  StartServer(/*mtls=*/false);
  auto wrong = TlsRequest(port_, pki_->other_ca_pem, "", "", bhttp::verb::get, "/healthz");
  EXPECT_FALSE(wrong.handshake_ok);
  EXPECT_FALSE(wrong.request_ok);
  auto none = TlsRequest(port_, "", "", "", bhttp::verb::get, "/healthz");
  EXPECT_FALSE(none.handshake_ok);
  // The server keeps serving trusted clients afterwards.
  auto ok = TlsRequest(port_, pki_->ca_pem, "", "", bhttp::verb::get, "/healthz");
  ASSERT_TRUE(ok.request_ok);
  EXPECT_EQ(ok.status, 200);
}

TEST_F(TlsTest, MutualTlsRejectsClientWithoutCertificateAndAcceptsClientCert) {
  StartServer(/*mtls=*/true);
  // With TLS 1.3 the client may finish its side of the handshake before the
  // server rejects it, so the rejection shows at the latest on the request.
  auto anon = TlsRequest(port_, pki_->ca_pem, "", "", bhttp::verb::get, "/healthz");
  EXPECT_FALSE(anon.request_ok);
  EXPECT_EQ(anon.status, 0);
  auto with_cert = TlsRequest(port_, pki_->ca_pem, pki_->client_cert_pem, pki_->client_key_pem,
                              bhttp::verb::post, "/scheduler/filter",
                              testing::ReadSourceFile("config/examples/filter-request.json"));
  ASSERT_TRUE(with_cert.handshake_ok);
  ASSERT_TRUE(with_cert.request_ok);
  ASSERT_EQ(with_cert.status, 200);
  EXPECT_EQ(json::parse(with_cert.body)["Error"], "");
  auto h = TlsRequest(port_, pki_->ca_pem, pki_->client_cert_pem, pki_->client_key_pem,
                      bhttp::verb::get, "/healthz");
  ASSERT_TRUE(h.request_ok);
  EXPECT_EQ(h.status, 200);
}

// With client certificates required on the extender port, the kubelet's
// probes (no certificate, plain HTTP) reach the health port; /metrics, the
// debug pages and the extender verbs stay behind mTLS.
TEST_F(TlsTest, MutualTlsHealthPortAnswersProbesInPlainHttpOnly) {
  StartServer(/*mtls=*/true);
  const uint16_t health = server_->health_port();
  ASSERT_NE(health, 0);
  EXPECT_EQ(PlainRequest(health, bhttp::verb::get, "/healthz").status, 200);
  EXPECT_EQ(PlainRequest(health, bhttp::verb::get, "/readyz").status, 200);
  for (const char* path : {"/metrics", "/debug/queues", "/debug/config"}) {
    auto r = PlainRequest(health, bhttp::verb::get, path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(json::parse(r.body).contains("Error")) << path;
  }
  auto f = PlainRequest(health, bhttp::verb::post, "/scheduler/filter",
                        testing::ReadSourceFile("config/examples/filter-request.json"));
  EXPECT_EQ(f.status, 404);
  // Never TLS: a TLS client gets no handshake there.
  EXPECT_FALSE(TlsRequest(health, pki_->ca_pem, pki_->client_cert_pem, pki_->client_key_pem,
                          bhttp::verb::get, "/healthz")
                   .handshake_ok);
  // /metrics is served on the mTLS port to a client with a certificate only.
  EXPECT_FALSE(TlsRequest(port_, pki_->ca_pem, "", "", bhttp::verb::get, "/metrics").request_ok);
  auto m = TlsRequest(port_, pki_->ca_pem, pki_->client_cert_pem, pki_->client_key_pem,
                      bhttp::verb::get, "/metrics");
  ASSERT_TRUE(m.request_ok);
  EXPECT_EQ(m.status, 200);
}

}  // namespace
}  // namespace gpusched::http
