// Config hot reload in the real binary: `gpusched serve --cluster` reads its
// config through a ConfigMap-style symlink chain
// (scheduler-policy.json -> ..data/scheduler-policy.json, ..data -> ..vN);
// swapping ..data applies a valid config without a restart, an invalid one is
// rejected naming the field and the old one keeps answering, and SIGHUP
// reloads a change the file watcher cannot see.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test/testing/child_process.h"

namespace gpusched::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kCluster[] = R"({"apiVersion":"v1","kind":"List","items":[
  {"apiVersion":"v1","kind":"Node","metadata":{"name":"h0","labels":{
     "nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","nvidia.com/gpu.memory":"81559",
     "nvidia.com/gpu.count":"8"}},
   "status":{"allocatable":{"nvidia.com/gpu":"8","cpu":"96","memory":"1Ti","pods":"110"}}}]})";

// An 8-GPU pod of team-a, filtered against h0.
constexpr char kFilter[] = R"({"Pod":{"metadata":{"name":"p1","namespace":"team-a","uid":"u1",
  "creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"containers":[{"name":"c",
  "resources":{"limits":{"nvidia.com/gpu":"8"}}}]},"status":{"phase":"Pending"}},
  "NodeNames":["h0"]})";

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ServeReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st {};
    if (stat(GPUSCHED_BINARY, &st) != 0) GTEST_SKIP() << "gpusched binary not built";
    std::string tmpl = (fs::temp_directory_path() / "gpusched-reload-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    base_ = Json::parse(
        std::ifstream(std::string(GPUSCHED_SOURCE_DIR) + "/config/scheduler-policy.json"));
    Write(dir_ / "cluster.json", kCluster);
    log_ = (dir_ / "gpusched.log").string();
  }
  void TearDown() override {
    child_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The shipped config with team-a's quota set to `guaranteed`/`limit`.
  std::string Config(int guaranteed, int limit) const {
    Json c = base_;
    c["quotas"] = {{"default", {{"guaranteed", 0}, {"limit", 0}}},
                   {"namespaces", {{"team-a", {{"guaranteed", guaranteed}, {"limit", limit}}}}}};
    return c.dump(2);
  }
  static void Write(const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::trunc) << text;
  }
  // Publishes `text` as the kubelet does a ConfigMap update: a new ..vN
  // directory, then an atomic rename of a fresh symlink over ..data.
  void Publish(const std::string& text) {
    const std::string version = "..v" + std::to_string(++versions_);
    fs::create_directory(dir_ / version);
    Write(dir_ / version / "scheduler-policy.json", text);
    fs::create_directory_symlink(version, dir_ / "..data_tmp");
    fs::rename(dir_ / "..data_tmp", dir_ / "..data");
    if (!fs::is_symlink(dir_ / "scheduler-policy.json")) {
      fs::create_symlink("..data/scheduler-policy.json", dir_ / "scheduler-policy.json");
    }
  }
  void Start() {
    port_ = FreePort();
    child_ = std::make_unique<Child>(
        GPUSCHED_BINARY,
        std::vector<std::string>{"serve", "--config", (dir_ / "scheduler-policy.json").string(),
                                 "--cluster", (dir_ / "cluster.json").string(), "--listen",
                                 "127.0.0.1:" + std::to_string(port_)},
        log_);
    ASSERT_TRUE(child_->started());
    ASSERT_TRUE(WaitFor([&] { return Http(port_, "GET", "/readyz").status == 200; },
                        std::chrono::milliseconds(15000)))
        << ReadAll(log_);
  }
  // True when the 8-GPU pod passes h0, false when it fails it.
  bool Passes() {
    HttpResult r = Http(port_, "POST", "/scheduler/filter", kFilter);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body.find(R"("NodeNames":["h0"])") != std::string::npos;
  }

  fs::path dir_;
  Json base_;
  std::string log_;
  int versions_ = 0;
  uint16_t port_ = 0;
  std::unique_ptr<Child> child_;
};

TEST_F(ServeReloadTest, SymlinkSwapAndSighupReloadInvalidConfigKeepsTheOld) {
  Publish(Config(4, 4));
  Start();
  EXPECT_FALSE(Passes());  // team-a may hold 4 GPUs, the pod needs 8
  EXPECT_NE(Http(port_, "POST", "/scheduler/filter", kFilter).body.find("at quota"),
            std::string::npos);

  // A ConfigMap update raising the limit: applied without a restart.
  Publish(Config(8, 8));
  ASSERT_TRUE(WaitFor([&] { return Passes(); }, std::chrono::milliseconds(15000))) << ReadAll(log_);
  EXPECT_EQ(Count(ReadAll(log_), "reloaded"), 1u);

  // An invalid update: rejected, naming the field; the old config answers.
  Publish(Config(8, 4));
  ASSERT_TRUE(WaitFor([&] { return Count(ReadAll(log_), "reload rejected") == 1; },
                      std::chrono::milliseconds(15000)))
      << ReadAll(log_);
  EXPECT_NE(ReadAll(log_).find("quotas.namespaces.team-a.limit"), std::string::npos)
      << ReadAll(log_);
  EXPECT_TRUE(Passes());
  EXPECT_TRUE(child_->Alive());

  // A valid config written in place with the same inode, size and mtime:
  // the watcher cannot see it, SIGHUP applies it.
  const fs::path target = fs::canonical(dir_ / "scheduler-policy.json");
  struct stat before {};
  ASSERT_EQ(stat(target.c_str(), &before), 0);
  std::string lowered = Config(4, 4);
  const std::string invalid = Config(8, 4);
  ASSERT_LE(lowered.size(), invalid.size());
  lowered.append(invalid.size() - lowered.size(), ' ');
  {
    std::fstream f(target, std::ios::in | std::ios::out);  // same inode
    f << lowered;
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, target.c_str(), times, 0), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // > one watcher period
  EXPECT_TRUE(Passes()) << "the watcher reloaded a change it cannot see";
  child_->Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return !Passes(); }, std::chrono::milliseconds(15000)))
      << ReadAll(log_);
  EXPECT_EQ(Count(ReadAll(log_), "reloaded"), 2u);
  EXPECT_TRUE(child_->Alive());
}

}  // namespace
}  // namespace gpusched::testing
