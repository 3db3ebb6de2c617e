// FakeApiServer: an in-process Kubernetes API server for tests, over TLS on
// loopback with bearer-token auth. It keeps Nodes, Pods and Leases in memory
// with one resourceVersion counter and follows the API conventions gpusched
// relies on:
//
//  - list with limit/continue (consistent snapshot per list) and the List's
//    resourceVersion; watch from a resourceVersion with bookmarks and
//    timeoutSeconds (without one, every event since the start is replayed,
//    superseded versions included: stricter than the real server, which
//    sends the current objects); a version older than the last compaction gets a watch
//    ERROR event with code 410 (as the real server does);
//  - merge-patch on nodes and pods; pods/binding (409 if already assigned,
//    or on a UID mismatch); policy/v1 eviction (429 when a disruption budget
//    forbids it); events; Leases and ConfigMaps with resourceVersion
//    preconditions (409) on update.
//
// Faults (set by tests at any time): fail the next N requests under a path
// prefix with a status (5xx/429); delay every response; drop open watches;
// apply a binding but lose its response (connection closed).
//
// Thread-safe: one thread per connection; tests call any method at any time.
#ifndef GPUSCHED_TEST_KUBE_FAKE_APISERVER_H_
#define GPUSCHED_TEST_KUBE_FAKE_APISERVER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "test/kube/test_pki.h"

namespace gpusched::testing {

using Json = nlohmann::json;

class FakeApiServer {
 public:
  FakeApiServer(const TestPki& pki, std::string token);
  ~FakeApiServer();

  void Start();
  void Stop();
  uint16_t port() const;

  // Store.
  // "nodes" | "pods" | "leases" | "configmaps" (key "ns/name"); ADDED or
  // MODIFIED. Resources of API groups:
  // "<group>/<plural>" (e.g. "scheduling.x-k8s.io/podgroups", "batch/jobs"),
  // readable with GET once their group/version is served (batch/v1 always
  // is, as on a real API server).
  void Put(const std::string& kind, Json obj);
  // Serves discovery (GET /apis/<group>/<version>), GET of namespaced
  // objects of that group/version, list and watch of all of a plural
  // (/apis/<group>/<version>/<plural>) and merge-patch of their status
  // subresource; unserved ones answer 404, as an API server without the CRD
  // does. Custom objects get a uid, a creationTimestamp and a generation
  // that grows when their spec changes.
  void ServeApiGroup(const std::string& group_version);
  // The CRD is removed: discovery and reads of that group answer 404 again
  // (open watches are not ended; DropWatches does that).
  void StopServingApiGroup(const std::string& group_version);
  void Delete(const std::string& kind, const std::string& key);
  std::optional<Json> Get(const std::string& kind, const std::string& key) const;
  std::vector<Json> List(const std::string& kind) const;
  int64_t resource_version() const;
  // Forget all events, so every resourceVersion handed out so far gets 410 on
  // watch (and continue tokens expire), and drop open watches, under one
  // lock: no open watch can send a bookmark carrying the post-compaction
  // version in between (a client that got one would resume without the 410
  // and miss the forgotten events).
  void CompactAndDropWatches();

  // Faults.
  void FailNext(int n, int status, std::string path_prefix = "");
  // Every request under `path_prefix` answers 403 Forbidden from now on, as
  // when RBAC does not grant it.
  void Forbid(const std::string& path_prefix);
  void SetDelayMs(int ms) { delay_ms_ = ms; }
  // The next `n` list requests of `kind` ("pods") with a continue token
  // answer 410 Expired (as after an etcd compaction): the lister must start
  // the list over.
  void ExpireNextContinues(int n, const std::string& kind);
  void DropWatches();
  void LoseNextBindResponse() { lose_bind_ = true; }
  void EvictionBlocked(int n) { evict_429_ = n; }
  void SetBookmarkIntervalMs(int ms) { bookmark_ms_ = ms; }
  // Extra accepted bearer tokens (one per simulated client), and revocation.
  void AllowToken(const std::string& token);
  void RevokeToken(const std::string& token);

  // Counters.
  int requests(const std::string& prefix) const;
  // The resourceVersion of each watch request on `path` ("/api/v1/pods"),
  // in arrival order ("" when the request named none).
  std::vector<std::string> watch_versions(const std::string& path) const;
  int open_watches() const { return open_watches_.load(); }
  int events_created() const;
  // The events created so far, as posted.
  std::vector<Json> Events() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<int> delay_ms_{0};
  std::atomic<bool> lose_bind_{false};
  std::atomic<int> evict_429_{0};
  std::atomic<int> bookmark_ms_{1000};
  std::atomic<int> open_watches_{0};
};

// A kubeconfig (block YAML, as kubectl writes it) for https://127.0.0.1:port
// with the CA as certificate-authority-data and a bearer token.
std::string KubeconfigYaml(uint16_t port, const std::string& ca_pem, const std::string& token);

// A v1.Node with GPU Feature Discovery labels: `gpus` x `product`.
Json NodeJson(const std::string& name, int gpus,
              const std::string& product = "NVIDIA-A100-SXM4-80GB");
// A v1.Pod asking for `gpus` GPUs, optionally bound with gpu-ids.
Json PodJson(const std::string& ns, const std::string& name, int gpus, const std::string& node = "",
             const std::string& gpu_ids = "", const std::string& phase = "Pending");
// A production-shaped cluster in `api`: `nodes` nodes "n-<i>" of 8 GPUs, each
// running `running_per_node` 1-GPU pods with their gpu-ids, and `pending`
// 1-GPU pods "wait-<i>", over 500 namespaces "team-<i>".
void PutProductionCluster(FakeApiServer& api, int nodes, int running_per_node, int pending);

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_KUBE_FAKE_APISERVER_H_
