#include "scheduler/agent/registrar.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "gpusched/util/strings.h"

namespace gpusched::agent {
namespace {

constexpr char kKubeletSocket[] = "kubelet.sock";
constexpr auto kRegisterTimeout = std::chrono::seconds(5);

// "" when the path does not exist; else what changes when it is re-created.
std::string Identity(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return StrCat(st.st_dev, ":", st.st_ino, ":", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec);
}

}  // namespace

Registrar::Registrar(DeviceState* state, std::string dir, std::vector<ResourceKind> kinds,
                     Metrics* metrics)
    : state_(state), dir_(std::move(dir)), metrics_(metrics) {
  for (ResourceKind k : kinds) {
    Plugin p;
    p.endpoint = k == ResourceKind::kWholeGpu ? "gpusched-gpu.sock" : "gpusched-gpu-shares.sock";
    p.server = std::make_unique<DevicePluginServer>(state_, k, StrCat(dir_, "/", p.endpoint));
    plugins_.push_back(std::move(p));
  }
}

absl::Status Registrar::Register(const Plugin& p) const {
  auto channel = grpc::CreateChannel(StrCat("unix:", dir_, "/", kKubeletSocket),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version("v1beta1");
  req.set_endpoint(p.endpoint);
  req.set_resource_name(ResourceName(p.server->kind()));
  req.mutable_options()->set_pre_start_required(false);
  req.mutable_options()->set_get_preferred_allocation_available(true);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kRegisterTimeout);
  v1beta1::Empty resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(StrCat("register ", ResourceName(p.server->kind()),
                                         " with the kubelet: ", s.error_message()));
  }
  return absl::OkStatus();
}

absl::Status Registrar::Tick() {
  const std::string kubelet = Identity(StrCat(dir_, "/", kKubeletSocket));
  if (kubelet.empty()) {
    return absl::UnavailableError(StrCat("no kubelet socket in ", dir_, " yet"));
  }
  const bool kubelet_restarted = kubelet != kubelet_identity_;
  absl::Status first;
  for (Plugin& p : plugins_) {
    const bool socket_gone = Identity(p.server->socket_path()).empty();
    if (p.registered && !kubelet_restarted && !socket_gone && p.server->running()) continue;
    if (p.registered) {
      p.again = kubelet_restarted ? "kubelet_restarted"
                : socket_gone     ? "socket_removed"
                                  : "server_stopped";
      std::cerr << "gpusched node-agent: " << ResourceName(p.server->kind()) << ": "
                << (kubelet_restarted ? "kubelet restarted"
                    : socket_gone     ? "plugin socket removed"
                                      : "plugin server stopped")
                << "; serving and registering again\n";
    }
    p.registered = false;
    absl::Status s = p.server->Start();
    if (s.ok()) s = Register(p);
    if (!s.ok()) {
      std::cerr << "gpusched node-agent: " << s.message() << "\n";
      if (first.ok()) first = s;
      continue;
    }
    p.registered = true;
    ++registrations_;
    if (metrics_ != nullptr) {
      metrics_->Inc("gpusched_agent_registrations_total", "Registrations with the kubelet.",
                    {{"resource", ResourceName(p.server->kind())}});
      if (!p.again.empty()) {
        metrics_->Inc("gpusched_agent_reregistrations_total",
                      "Registrations again: after a kubelet restart, a removed plugin socket or "
                      "a stopped plugin server.",
                      {{"resource", ResourceName(p.server->kind())}, {"reason", p.again}});
      }
    }
    p.again.clear();
    std::cerr << "gpusched node-agent: registered " << ResourceName(p.server->kind()) << " ("
              << p.endpoint << ")\n";
  }
  if (first.ok()) kubelet_identity_ = kubelet;
  return first;
}

void Registrar::Stop() {
  for (Plugin& p : plugins_) {
    p.server->Stop();
    p.registered = false;
  }
}

}  // namespace gpusched::agent
