// LeaderElector: leader election on a coordination.k8s.io/v1 Lease, with
// client-go's rules:
//
//  - a candidate takes the lease when it is free (no holder) or when its
//    record has not changed for leaseDurationSeconds as observed on the
//    candidate's own clock (no clock-skew assumptions);
//  - every write is a PUT carrying the resourceVersion read before it
//    (optimistic concurrency): a 409 means someone else wrote first, so the
//    candidate re-reads on the next round;
//  - the leader renews every retry period and steps down when it has not
//    renewed for renew_deadline (< lease duration), so it stops binding
//    before any other replica can take over: no double allocation;
//  - Stop() releases a held lease (empty holder) so a successor takes over
//    at once on a clean shutdown.
//
// Thread-safe; one background thread between Start and Stop.
#ifndef GPUSCHED_KUBE_LEADER_ELECTOR_H_
#define GPUSCHED_KUBE_LEADER_ELECTOR_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gpusched/util/metrics.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/http_client.h"

namespace gpusched::kube {

struct LeaderOptions {
  std::string lease_namespace = "gpusched-system";
  std::string lease_name = "gpusched";
  std::string identity;  // unique per replica (the pod name)
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  LeaderElector(KubeHttpClient* client, LeaderOptions options, Metrics* metrics,
                std::function<void(bool)> on_change);
  ~LeaderElector();

  void Start();
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // True while this replica holds a lease it renewed within renew_deadline.
  bool IsLeader() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();
  // One acquire-or-renew round; true if we hold the lease after it.
  bool TryAcquireOrRenew() ABSL_LOCKS_EXCLUDED(mu_);
  void Release();
  std::string LeasePath(bool item) const;

  KubeHttpClient* client_;
  const LeaderOptions options_;
  Metrics* metrics_;
  std::function<void(bool)> on_change_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point renewed_ ABSL_GUARDED_BY(mu_);
  codec::LeaseRecord observed_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point observed_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_LEADER_ELECTOR_H_
