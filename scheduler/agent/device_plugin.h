// The kubelet device plugin API v1beta1 served over a unix socket: one
// DevicePluginServer per resource (nvidia.com/gpu, gpusched.io/gpu-shares),
// each answering from the shared DeviceState. GetPreferredAllocation is
// offered; PreStartContainer is not required (the devices are known at
// Allocate and nothing needs resetting before a container starts).
//
// Thread-safe: gRPC calls the service from its own threads; Start and Stop
// are called by one owner (the Registrar).
#ifndef GPUSCHED_SCHEDULER_AGENT_DEVICE_PLUGIN_H_
#define GPUSCHED_SCHEDULER_AGENT_DEVICE_PLUGIN_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "scheduler/agent/device_state.h"

namespace grpc {
class Server;
}

namespace gpusched::agent {

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(DeviceState* state, ResourceKind kind);
  // Ends open ListAndWatch streams (before the server shuts down).
  void Stop() { stopping_ = true; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                                      v1beta1::DevicePluginOptions* resp) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* ctx,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* resp) override;
  grpc::Status Allocate(grpc::ServerContext* ctx, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* resp) override;
  grpc::Status PreStartContainer(grpc::ServerContext* ctx,
                                 const v1beta1::PreStartContainerRequest* req,
                                 v1beta1::PreStartContainerResponse* resp) override;

 private:
  DeviceState* state_;
  const ResourceKind kind_;
  std::atomic<bool> stopping_{false};
};

// One resource's plugin: its service on `socket_path`.
class DevicePluginServer {
 public:
  DevicePluginServer(DeviceState* state, ResourceKind kind, std::string socket_path);
  ~DevicePluginServer();
  DevicePluginServer(const DevicePluginServer&) = delete;
  DevicePluginServer& operator=(const DevicePluginServer&) = delete;

  // Removes a stale socket file and listens. Error when it cannot listen.
  absl::Status Start();
  void Stop();
  bool running() const { return server_ != nullptr; }
  const std::string& socket_path() const { return socket_path_; }
  ResourceKind kind() const { return kind_; }

 private:
  DeviceState* state_;
  const ResourceKind kind_;
  const std::string socket_path_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
};

// The resource name the kubelet knows for `kind`.
const char* ResourceName(ResourceKind kind);

}  // namespace gpusched::agent

#endif  // GPUSCHED_SCHEDULER_AGENT_DEVICE_PLUGIN_H_
