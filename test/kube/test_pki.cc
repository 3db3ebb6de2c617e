#include "test/kube/test_pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace gpusched::testing {
namespace {

struct Key {
  EVP_PKEY* k = nullptr;
  Key() : k(EVP_EC_gen("P-256")) {
    if (k == nullptr) throw std::runtime_error("EVP_EC_gen failed");
  }
  ~Key() { EVP_PKEY_free(k); }
};

std::string KeyPem(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, n);
  BIO_free(b);
  return out;
}

std::string CertPem(X509* c) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, c);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, n);
  BIO_free(b);
  return out;
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) throw std::runtime_error("bad extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// Returns a certificate for `key` named `cn`, signed by (issuer, issuer_key)
// or self-signed when issuer is null. Caller frees.
X509* MakeCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key, bool ca,
               const char* san, const char* eku) {
  static long serial = 1000;
  X509* c = X509_new();
  X509_set_version(c, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(c), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c), 86400);
  X509_set_pubkey(c, key);
  X509_NAME* name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509_set_issuer_name(c, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509* signer = issuer != nullptr ? issuer : c;
  AddExt(c, signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  AddExt(c, signer, NID_key_usage,
         ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyEncipherment");
  AddExt(c, signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) AddExt(c, signer, NID_authority_key_identifier, "keyid:always");
  if (san != nullptr) AddExt(c, signer, NID_subject_alt_name, san);
  if (eku != nullptr) AddExt(c, signer, NID_ext_key_usage, eku);
  X509_sign(c, issuer_key != nullptr ? issuer_key : key, EVP_sha256());
  return c;
}

}  // namespace

TestPki MakeTestPki() {
  TestPki pki;
  Key ca_key, server_key, client_key, other_key;
  X509* ca = MakeCert(ca_key.k, "gpusched-test-ca", nullptr, nullptr, true, nullptr, nullptr);
  X509* server = MakeCert(server_key.k, "localhost", ca, ca_key.k, false,
                          "IP:127.0.0.1,DNS:localhost", "serverAuth");
  X509* client =
      MakeCert(client_key.k, "kube-scheduler", ca, ca_key.k, false, nullptr, "clientAuth");
  X509* other = MakeCert(other_key.k, "unrelated-ca", nullptr, nullptr, true, nullptr, nullptr);
  pki.ca_pem = CertPem(ca);
  pki.server_cert_pem = CertPem(server);
  pki.server_key_pem = KeyPem(server_key.k);
  pki.client_cert_pem = CertPem(client);
  pki.client_key_pem = KeyPem(client_key.k);
  pki.other_ca_pem = CertPem(other);
  for (X509* c : {ca, server, client, other}) X509_free(c);
  return pki;
}

std::string WriteTempFile(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = tmp != nullptr ? tmp : "/tmp";
  std::string path = dir + "/gpusched_kube_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace gpusched::testing
