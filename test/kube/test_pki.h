// Test PKI: a throw-away CA with a server certificate for 127.0.0.1 /
// localhost and a client certificate, generated in memory with the OpenSSL
// C API (P-256 keys, valid for one day). For loopback TLS tests only.
// Thread-safe (pure).
#ifndef GPUSCHED_TEST_KUBE_TEST_PKI_H_
#define GPUSCHED_TEST_KUBE_TEST_PKI_H_

#include <string>

namespace gpusched::testing {

struct TestPki {
  std::string ca_pem;
  std::string server_cert_pem, server_key_pem;
  std::string client_cert_pem, client_key_pem;
  // A second, unrelated CA (for "wrong CA" tests).
  std::string other_ca_pem;
};

TestPki MakeTestPki();

// Writes `text` to a new file under the test's temp folder; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& text);

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_KUBE_TEST_PKI_H_
