// Registrar: keeps the device plugin servers registered with the kubelet.
// Each Tick (every second from the node agent's loop) checks the kubelet's
// registration socket (kubelet.sock in the device plugin directory) and the
// plugins' own sockets; when the kubelet socket was re-created (a kubelet
// restart removes every plugin socket and makes a new one) or a plugin socket
// is gone, the plugin is served again on a fresh socket and registered.
//
// Not thread-safe: one owner calls Tick and Stop.
#ifndef GPUSCHED_SCHEDULER_AGENT_REGISTRAR_H_
#define GPUSCHED_SCHEDULER_AGENT_REGISTRAR_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpusched/util/metrics.h"
#include "scheduler/agent/device_plugin.h"

namespace gpusched::agent {

class Registrar {
 public:
  // `dir`: the kubelet's device plugin directory. `kinds`: the resources to
  // serve.
  Registrar(DeviceState* state, std::string dir, std::vector<ResourceKind> kinds, Metrics* metrics);

  // Returns the first error of this pass (and logs each), OK when every
  // plugin is served and registered.
  absl::Status Tick();
  void Stop();
  // Registrations accepted by the kubelet so far.
  int registrations() const { return registrations_; }

 private:
  struct Plugin {
    std::unique_ptr<DevicePluginServer> server;
    std::string endpoint;  // socket file name, relative to dir
    bool registered = false;
    // Why it is registering again ("kubelet_restarted", "socket_removed",
    // "server_stopped"), until the kubelet accepts; "" for the first time.
    std::string again;
  };
  absl::Status Register(const Plugin& p) const;

  DeviceState* state_;
  const std::string dir_;
  Metrics* metrics_;
  std::vector<Plugin> plugins_;
  std::string kubelet_identity_;  // device:inode:ctime of kubelet.sock when registered
  int registrations_ = 0;
};

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_REGISTRAR_H_
