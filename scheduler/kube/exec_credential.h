// Kubeconfig credential plugins (users[].user.exec): RunExecPlugin runs one
// and decodes the ExecCredential it prints; ExecCredentialSource caches the
// token until its expirationTimestamp (less a margin) or until the API
// server refuses it, and runs the plugin again then.
//
// The plugin gets gpusched's environment plus its configured env and
// KUBERNETES_EXEC_INFO, stdin from /dev/null, and its stderr is passed
// through to gpusched's (plugins report problems there). It is killed when
// it runs longer than the timeout.
//
// Callers: TokenSource (scheduler/kube). ExecCredentialSource is
// thread-safe; one plugin run holds its lock, so concurrent callers wait for
// the same run instead of starting their own.
#ifndef GPUSCHED_KUBE_EXEC_CREDENTIAL_H_
#define GPUSCHED_KUBE_EXEC_CREDENTIAL_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/codec/kube_codec.h"
#include "scheduler/kube/kube_config.h"

namespace gpusched::kube {

// Runs `plugin` once with KUBERNETES_EXEC_INFO=`exec_info`. Errors: the
// command not found (with the plugin's install hint), a non-zero exit, a
// timeout (DeadlineExceeded), or output that is not a token ExecCredential.
absl::StatusOr<codec::ExecCredentialStatus> RunExecPlugin(const ExecPlugin& plugin,
                                                          const std::string& exec_info,
                                                          std::chrono::milliseconds timeout);

class ExecCredentialSource {
 public:
  ExecCredentialSource(ExecPlugin plugin, std::string exec_info,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // The cached token, or a fresh one from the plugin when there is none, it
  // expires within the margin, or it was invalidated. The plugin runs at
  // most once a second (until then the last token is returned). If it fails,
  // the error is logged and the last token (possibly "") is returned.
  std::string Get() ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the cached token (the API server answered 401).
  void Invalidate() ABSL_LOCKS_EXCLUDED(mu_);
  // How many times the plugin ran (tests and logs).
  int64_t runs() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const ExecPlugin plugin_;
  const std::string exec_info_;
  const std::chrono::milliseconds timeout_;
  mutable absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  int64_t expiration_unix_ ABSL_GUARDED_BY(mu_) = 0;  // 0 = none
  bool stale_ ABSL_GUARDED_BY(mu_) = true;
  std::chrono::steady_clock::time_point last_run_ ABSL_GUARDED_BY(mu_);
  int64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_EXEC_CREDENTIAL_H_
