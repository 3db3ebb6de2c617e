#include "test/agent/fake_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"

namespace gpusched::testing {
namespace {

constexpr auto kCallTimeout = std::chrono::seconds(5);

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + kCallTimeout;
}

struct Plugin {
  std::string endpoint;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
  bool preferred = false;
  std::unique_ptr<grpc::ClientContext> watch_ctx;
  std::thread watch;
};

struct PodAlloc {
  std::string ns, name;
  std::vector<std::pair<std::string, std::map<std::string, std::vector<std::string>>>> containers;
};

}  // namespace

struct FakeKubelet::Impl final : public v1beta1::Registration::Service,
                                 public v1::PodResourcesLister::Service {
  std::string plugin_dir, pr_dir;
  mutable absl::Mutex mu;
  std::map<std::string, std::unique_ptr<Plugin>> plugins ABSL_GUARDED_BY(mu);
  std::map<std::string, std::map<std::string, bool>> devices ABSL_GUARDED_BY(mu);
  std::map<std::string, std::vector<std::string>> order ABSL_GUARDED_BY(mu);  // listing order
  std::set<std::string> builtin ABSL_GUARDED_BY(mu);
  std::map<std::string, int> registrations ABSL_GUARDED_BY(mu);
  std::vector<PodAlloc> pods ABSL_GUARDED_BY(mu);
  int preferred_calls ABSL_GUARDED_BY(mu) = 0;
  absl::Mutex admit_mu;  // one admission at a time, as the kubelet does
  std::unique_ptr<grpc::Server> registration_server, pr_server;

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    if (req->version() != "v1beta1") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unsupported version");
    }
    auto p = std::make_unique<Plugin>();
    p->endpoint = req->endpoint();
    auto channel = grpc::CreateChannel(absl::StrCat("unix:", plugin_dir, "/", p->endpoint),
                                       grpc::InsecureChannelCredentials());
    p->stub = v1beta1::DevicePlugin::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1beta1::Empty empty;
    v1beta1::DevicePluginOptions opts;
    grpc::Status s = p->stub->GetDevicePluginOptions(&ctx, empty, &opts);
    if (!s.ok()) return s;
    p->preferred = opts.get_preferred_allocation_available();
    const std::string resource = req->resource_name();
    p->watch_ctx = std::make_unique<grpc::ClientContext>();
    Plugin* raw = p.get();
    std::unique_ptr<Plugin> old;
    {
      absl::MutexLock lock(&mu);
      old = std::move(plugins[resource]);
      plugins[resource] = std::move(p);
      ++registrations[resource];
    }
    StopPlugin(old.get());
    raw->watch = std::thread([this, raw, resource] { Watch(raw, resource); });
    return grpc::Status::OK;
  }

  void Watch(Plugin* p, const std::string& resource) {
    v1beta1::Empty empty;
    auto reader = p->stub->ListAndWatch(p->watch_ctx.get(), empty);
    v1beta1::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      absl::MutexLock lock(&mu);
      auto& d = devices[resource];
      d.clear();
      order[resource].clear();
      for (const auto& dev : resp.devices()) {
        d[dev.id()] = dev.health() == "Healthy";
        order[resource].push_back(dev.id());
      }
    }
    reader->Finish().IgnoreError();
  }

  static void StopPlugin(Plugin* p) {
    if (p == nullptr) return;
    p->watch_ctx->TryCancel();
    if (p->watch.joinable()) p->watch.join();
  }

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* resp) override {
    absl::MutexLock lock(&mu);
    for (const PodAlloc& a : pods) {
      auto* pr = resp->add_pod_resources();
      pr->set_name(a.name);
      pr->set_namespace_(a.ns);
      for (const auto& [cname, res] : a.containers) {
        auto* c = pr->add_containers();
        c->set_name(cname);
        for (const auto& [r, ids] : res) {
          auto* d = c->add_devices();
          d->set_resource_name(r);
          for (const auto& id : ids) d->add_device_ids(id);
        }
      }
    }
    return grpc::Status::OK;
  }

  std::vector<std::string> Free(const std::string& resource) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::set<std::string> used;
    for (const PodAlloc& a : pods) {
      for (const auto& [cname, res] : a.containers) {
        auto it = res.find(resource);
        if (it != res.end()) used.insert(it->second.begin(), it->second.end());
      }
    }
    std::vector<std::string> out;
    for (const std::string& id : order[resource]) {
      if (devices[resource][id] && !used.contains(id)) out.push_back(id);
    }
    return out;
  }

  absl::StatusOr<std::vector<std::string>> Choose(Plugin* p, const std::vector<std::string>& free,
                                                  int count) {
    std::vector<std::string> chosen;
    if (p != nullptr && p->preferred) {
      v1beta1::PreferredAllocationRequest req;
      auto* c = req.add_container_requests();
      for (const auto& id : free) c->add_available_deviceids(id);
      c->set_allocation_size(count);
      v1beta1::PreferredAllocationResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      grpc::Status s = p->stub->GetPreferredAllocation(&ctx, req, &resp);
      {
        absl::MutexLock lock(&mu);
        ++preferred_calls;
      }
      if (!s.ok()) return absl::UnavailableError(s.error_message());
      if (resp.container_responses_size() == 1) {
        for (const auto& id : resp.container_responses(0).deviceids()) {
          if (std::find(free.begin(), free.end(), id) != free.end() &&
              std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
            chosen.push_back(id);
          }
        }
      }
      if (static_cast<int>(chosen.size()) > count) chosen.resize(count);
    }
    for (const auto& id : free) {
      if (static_cast<int>(chosen.size()) == count) break;
      if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
    }
    return chosen;
  }

  absl::Status AllocateContainer(const std::string& resource, int count,
                                 const std::vector<std::string>& builtin_choice,
                                 ContainerGrant* grant,
                                 std::map<std::string, std::vector<std::string>>* held) {
    Plugin* p = nullptr;
    std::vector<std::string> free;
    {
      absl::MutexLock lock(&mu);
      if (!builtin.contains(resource)) {
        auto it = plugins.find(resource);
        if (it == plugins.end()) return absl::UnavailableError("no plugin for " + resource);
        p = it->second.get();
      }
      free = Free(resource);
      for (const auto& [r, ids] : *held) {
        for (const auto& id : ids) std::erase(free, id);
      }
    }
    if (static_cast<int>(free.size()) < count) {
      return absl::ResourceExhaustedError(
          absl::StrCat("insufficient ", resource, ": ", free.size(), " free, ", count, " asked"));
    }
    absl::StatusOr<std::vector<std::string>> chosen = builtin_choice;
    if (p != nullptr || builtin_choice.empty()) chosen = Choose(p, free, count);
    if (!chosen.ok()) return chosen.status();
    for (const auto& id : *chosen) {
      if (std::find(free.begin(), free.end(), id) == free.end()) {
        return absl::InvalidArgumentError(absl::StrCat("device ", id, " is not free"));
      }
    }
    grant->devices[resource] = *chosen;
    (*held)[resource] = *chosen;
    if (p == nullptr) return absl::OkStatus();
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : *chosen) c->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    grpc::Status s = p->stub->Allocate(&ctx, req, &resp);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    if (resp.container_responses_size() != 1) return absl::InternalError("no container answer");
    for (const auto& [k, v] : resp.container_responses(0).envs()) grant->envs[k] = v;
    for (const auto& d : resp.container_responses(0).cdi_devices()) {
      grant->cdi_devices.push_back(d.name());
    }
    return absl::OkStatus();
  }

  void StartServers() {
    std::filesystem::create_directories(plugin_dir);
    std::filesystem::create_directories(pr_dir);
    unlink((plugin_dir + "/kubelet.sock").c_str());
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + plugin_dir + "/kubelet.sock", grpc::InsecureServerCredentials());
    b.RegisterService(static_cast<v1beta1::Registration::Service*>(this));
    registration_server = b.BuildAndStart();
    if (pr_server == nullptr) {
      unlink((pr_dir + "/kubelet.sock").c_str());
      grpc::ServerBuilder pb;
      pb.AddListeningPort("unix:" + pr_dir + "/kubelet.sock", grpc::InsecureServerCredentials());
      pb.RegisterService(static_cast<v1::PodResourcesLister::Service*>(this));
      pr_server = pb.BuildAndStart();
    }
  }

  void StopRegistration() {
    std::map<std::string, std::unique_ptr<Plugin>> old;
    {
      absl::MutexLock lock(&mu);
      old.swap(plugins);
      for (auto& [r, d] : devices) {
        if (!builtin.contains(r)) d.clear();
      }
    }
    for (auto& [r, p] : old) StopPlugin(p.get());
    if (registration_server != nullptr) {
      registration_server->Shutdown(Deadline());
      registration_server->Wait();
      registration_server.reset();
    }
  }
};

FakeKubelet::FakeKubelet(std::string plugin_dir, std::string pod_resources_dir)
    : impl_(std::make_unique<Impl>()) {
  impl_->plugin_dir = std::move(plugin_dir);
  impl_->pr_dir = std::move(pod_resources_dir);
}

FakeKubelet::~FakeKubelet() { Stop(); }

void FakeKubelet::Start() { impl_->StartServers(); }

void FakeKubelet::Stop() {
  impl_->StopRegistration();
  if (impl_->pr_server != nullptr) {
    impl_->pr_server->Shutdown(Deadline());
    impl_->pr_server->Wait();
    impl_->pr_server.reset();
  }
}

void FakeKubelet::Restart() {
  impl_->StopRegistration();
  for (const auto& e : std::filesystem::directory_iterator(impl_->plugin_dir)) {
    std::filesystem::remove(e.path());
  }
  impl_->StartServers();
}

absl::StatusOr<std::vector<ContainerGrant>> FakeKubelet::Admit(
    const std::string& ns, const std::string& name, const std::vector<ContainerAsk>& containers) {
  absl::MutexLock admit(&impl_->admit_mu);
  PodAlloc alloc{ns, name, {}};
  std::vector<ContainerGrant> grants;
  std::map<std::string, std::vector<std::string>> held_by_pod;
  for (const ContainerAsk& c : containers) {
    ContainerGrant grant;
    std::map<std::string, std::vector<std::string>> held;
    for (const auto& [resource, count] : c.resources) {
      if (count == 0) continue;
      std::map<std::string, std::vector<std::string>> all = held_by_pod;
      for (auto& [r, ids] : held) all[r].insert(all[r].end(), ids.begin(), ids.end());
      auto choice = c.builtin_choice.find(resource);
      absl::Status s = impl_->AllocateContainer(
          resource, count,
          choice == c.builtin_choice.end() ? std::vector<std::string>{} : choice->second, &grant,
          &all);
      if (!s.ok()) return s;
      held[resource] = all[resource];
      for (const auto& id : grant.devices[resource]) held_by_pod[resource].push_back(id);
    }
    alloc.containers.push_back({c.name, grant.devices});
    grants.push_back(std::move(grant));
  }
  absl::MutexLock lock(&impl_->mu);
  impl_->pods.push_back(std::move(alloc));
  return grants;
}

void FakeKubelet::RemovePod(const std::string& ns, const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  std::erase_if(impl_->pods, [&](const PodAlloc& a) { return a.ns == ns && a.name == name; });
}

void FakeKubelet::SetBuiltinDevices(const std::string& resource, std::vector<std::string> ids) {
  absl::MutexLock lock(&impl_->mu);
  impl_->builtin.insert(resource);
  impl_->order[resource] = ids;
  auto& d = impl_->devices[resource];
  d.clear();
  for (const auto& id : ids) d[id] = true;
}

int FakeKubelet::registrations(const std::string& resource) const {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->registrations.find(resource);
  return it == impl_->registrations.end() ? 0 : it->second;
}

std::map<std::string, bool> FakeKubelet::Devices(const std::string& resource) const {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->devices.find(resource);
  return it == impl_->devices.end() ? std::map<std::string, bool>{} : it->second;
}

bool FakeKubelet::WaitForDevices(
    const std::string& resource,
    const std::function<bool(const std::map<std::string, bool>&)>& pred,
    std::chrono::milliseconds timeout) const {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred(Devices(resource))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred(Devices(resource));
}

int FakeKubelet::preferred_calls() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->preferred_calls;
}

}  // namespace gpusched::testing
