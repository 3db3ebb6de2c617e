#include "scheduler/codec/running_config_codec.h"

#include <nlohmann/json.hpp>

namespace gpusched::codec {

std::string EncodeRunningConfig(const RunningConfig& c) {
  using json = nlohmann::json;
  json server = {{"listen", c.listen},
                 {"healthListen", c.health_listen},
                 {"threads", c.threads},
                 {"maxBodyBytes", c.max_body_bytes},
                 {"maxConnections", c.max_connections},
                 {"maxInflightBodyBytes", c.max_inflight_body_bytes},
                 {"readTimeoutSeconds", c.read_timeout_seconds},
                 {"idleTimeoutSeconds", c.idle_timeout_seconds},
                 {"tls", c.tls},
                 {"clientCertificates", c.client_certificates}};
  json out = {{"file", c.file},
              {"reloads", c.reloads},
              {"lastError", c.last_error},
              {"server", std::move(server)},
              {"restartPending", c.restart_pending}};
  // The file was decoded when applied; a parse failure here means it was
  // not JSON-clean text (never expected), reported as null, never thrown.
  out["applied"] = json::parse(c.applied_json, nullptr, /*allow_exceptions=*/false);
  if (out["applied"].is_discarded()) out["applied"] = nullptr;
  // Invalid UTF-8 in a string is replaced, not thrown.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpusched::codec
