#include "scheduler/agent/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/util/strings.h"

namespace gpusched::agent {
namespace {

// How often an idle ListAndWatch stream checks that it should go on.
constexpr std::chrono::milliseconds kWatchPoll{500};

std::vector<std::string> Ids(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return {ids.begin(), ids.end()};
}

}  // namespace

const char* ResourceName(ResourceKind kind) {
  return kind == ResourceKind::kWholeGpu ? kResourceNameGpu : codec::kResourceGpuShares;
}

DevicePluginService::DevicePluginService(DeviceState* state, ResourceKind kind)
    : state_(state), kind_(kind) {}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext*,
                                                         const v1beta1::Empty*,
                                                         v1beta1::DevicePluginOptions* resp) {
  resp->set_pre_start_required(false);
  resp->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(
    grpc::ServerContext* ctx, const v1beta1::Empty*,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t seen = 0;
  std::vector<AdvertisedDevice> last;
  bool first = true;
  while (!stopping_ && !ctx->IsCancelled()) {
    uint64_t gen = state_->WaitForChange(seen, kWatchPoll);
    if (gen == seen) continue;
    seen = gen;
    std::vector<AdvertisedDevice> now = state_->Advertised(kind_);
    bool same = !first && now.size() == last.size();
    for (size_t i = 0; same && i < now.size(); ++i) {
      same = now[i].id == last[i].id && now[i].healthy == last[i].healthy;
    }
    if (same) continue;
    v1beta1::ListAndWatchResponse resp;
    for (const AdvertisedDevice& d : now) {
      v1beta1::Device* dev = resp.add_devices();
      dev->set_id(d.id);
      dev->set_health(d.healthy ? "Healthy" : "Unhealthy");
    }
    if (!writer->Write(resp)) break;
    last = std::move(now);
    first = false;
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::GetPreferredAllocation(
    grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* req,
    v1beta1::PreferredAllocationResponse* resp) {
  for (const auto& c : req->container_requests()) {
    if (c.allocation_size() < 0 || c.allocation_size() > c.available_deviceids_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          StrCat("allocation_size ", c.allocation_size(), " with ",
                                 c.available_deviceids_size(), " available devices"));
    }
    std::vector<std::string> ids = state_->Prefer(
        kind_, Ids(c.available_deviceids()), Ids(c.must_include_deviceids()), c.allocation_size());
    auto* out = resp->add_container_responses();
    for (std::string& id : ids) out->add_deviceids(std::move(id));
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext*,
                                           const v1beta1::AllocateRequest* req,
                                           v1beta1::AllocateResponse* resp) {
  for (const auto& c : req->container_requests()) {
    auto answer = state_->Allocate(kind_, Ids(c.devices_ids()));
    if (!answer.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          std::string(answer.status().message()));
    }
    auto* out = resp->add_container_responses();
    for (auto& [k, v] : answer->envs) (*out->mutable_envs())[k] = v;
    for (const std::string& name : answer->cdi_devices) out->add_cdi_devices()->set_name(name);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext*,
                                                    const v1beta1::PreStartContainerRequest*,
                                                    v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

DevicePluginServer::DevicePluginServer(DeviceState* state, ResourceKind kind,
                                       std::string socket_path)
    : state_(state), kind_(kind), socket_path_(std::move(socket_path)) {}

DevicePluginServer::~DevicePluginServer() { Stop(); }

absl::Status DevicePluginServer::Start() {
  Stop();
  unlink(socket_path_.c_str());
  service_ = std::make_unique<DevicePluginService>(state_, kind_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(StrCat("unix:", socket_path_), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    service_.reset();
    return absl::UnavailableError(StrCat("cannot listen on ", socket_path_));
  }
  return absl::OkStatus();
}

void DevicePluginServer::Stop() {
  if (server_ == nullptr) return;
  service_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  service_.reset();
}

}  // namespace gpusched::agent
