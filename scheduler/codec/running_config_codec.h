// The /debug/config page: which config file the running process applied,
// the server settings in effect (flags over the file) and the file's fields
// that changed but only take effect after a restart. Encodes only; the
// values are gathered by `gpusched serve`. Thread-safe (pure function).
#ifndef GPUSCHED_CODEC_RUNNING_CONFIG_CODEC_H_
#define GPUSCHED_CODEC_RUNNING_CONFIG_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpusched::codec {

struct RunningConfig {
  std::string file;
  // The config file's text as last applied (live fields run from it).
  std::string applied_json;
  int64_t reloads = 0;     // reloads applied since start
  std::string last_error;  // why the last reload was rejected; "" if none
  // Server settings in effect (they never change without a restart).
  std::string listen;
  std::string health_listen;  // "" = none
  int threads = 0;
  int64_t max_body_bytes = 0;
  int max_connections = 0;
  int64_t max_inflight_body_bytes = 0;
  int read_timeout_seconds = 0;
  int idle_timeout_seconds = 0;
  bool tls = false;
  bool client_certificates = false;
  // JSON paths of fields in the applied file that differ from what runs
  // ("server.threads", "topologyTemplates").
  std::vector<std::string> restart_pending;
};

// {"file":..,"reloads":..,"lastError":..,"server":{..},"restartPending":[..],
//  "applied":<the applied file's JSON, or null if it no longer parses>}
std::string EncodeRunningConfig(const RunningConfig& c);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_RUNNING_CONFIG_CODEC_H_
