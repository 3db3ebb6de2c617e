// FakeKubelet: the kubelet's side of the device plugin and PodResources APIs
// for tests, over unix sockets in a directory of the test's own:
//
//  - serves Registration on <plugin_dir>/kubelet.sock; on Register it dials
//    the plugin's socket, asks GetDevicePluginOptions and follows
//    ListAndWatch (the devices and their health, per resource);
//  - Admit(pod) does what the device manager does when a pod is admitted: per
//    container and resource, the free healthy device IDs, then
//    GetPreferredAllocation (when offered) and Allocate of the set it chose,
//    storing the container's answer; pods are admitted one at a time;
//  - a resource no plugin serves can be given devices directly
//    (SetBuiltinDevices): Admit then picks the lowest free IDs itself, the
//    way a plugin without preferences (NVIDIA's, in effect) leaves it;
//  - serves PodResources List on <pod_resources_dir>/kubelet.sock;
//  - Restart() removes every socket in the plugin directory (as a restarting
//    kubelet does), forgets the plugins and serves Registration again; the
//    allocations survive (the kubelet checkpoints them).
//
// Thread-safe.
#ifndef GPUSCHED_TEST_AGENT_FAKE_KUBELET_H_
#define GPUSCHED_TEST_AGENT_FAKE_KUBELET_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusched::testing {

struct ContainerAsk {
  std::string name = "main";
  std::map<std::string, int> resources;  // resource name -> count
  // For a builtin resource: the IDs its allocator takes (default: the lowest
  // free), e.g. an allocator that ignores gpusched's record.
  std::map<std::string, std::vector<std::string>> builtin_choice;
};

// What a container got: per resource the device IDs, and the plugin's answer.
struct ContainerGrant {
  std::map<std::string, std::vector<std::string>> devices;
  std::map<std::string, std::string> envs;
  std::vector<std::string> cdi_devices;
};

class FakeKubelet {
 public:
  FakeKubelet(std::string plugin_dir, std::string pod_resources_dir);
  ~FakeKubelet();

  void Start();
  void Stop();
  // A kubelet restart (see above).
  void Restart();

  // Admits one pod; an error when a resource is short or the plugin fails
  // (the pod would fail admission).
  absl::StatusOr<std::vector<ContainerGrant>> Admit(const std::string& ns, const std::string& name,
                                                    const std::vector<ContainerAsk>& containers);
  // The pod ended: its devices are free again.
  void RemovePod(const std::string& ns, const std::string& name);

  void SetBuiltinDevices(const std::string& resource, std::vector<std::string> ids);

  // Registrations received since the start, per resource.
  int registrations(const std::string& resource) const;
  // Device ID -> healthy, as the plugin last listed them.
  std::map<std::string, bool> Devices(const std::string& resource) const;
  // Waits until `pred` holds for the resource's device list.
  bool WaitForDevices(const std::string& resource,
                      const std::function<bool(const std::map<std::string, bool>&)>& pred,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // GetPreferredAllocation calls made (all resources).
  int preferred_calls() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_AGENT_FAKE_KUBELET_H_
