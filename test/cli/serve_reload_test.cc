// Config hot reload in the real binary: `gpusched serve --cluster` reads its
// config through a ConfigMap-style symlink chain
// (scheduler-policy.json -> ..data/scheduler-policy.json, ..data -> ..vN);
// swapping ..data applies a valid config without a restart, an invalid one is
// rejected naming the field and the old one keeps answering, and an in-place
// edit that keeps inode, size and mtime is applied by content.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// The state letter of process `pid` in /proc ('T': stopped), or 0.
char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t paren = line.rfind(')');  // the command name may hold spaces
  return paren == std::string::npos || paren + 2 >= line.size() ? 0 : line[paren + 2];
}

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
    if (child_ != nullptr) child_->Signal(SIGCONT);  // if a test stopped it and failed
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
  // Runs `gpusched serve` on the published config with `extra` flags, under
  // an open-files limit of `max_fds` if not 0, and waits until it is ready.
  void Start(const std::vector<std::string>& extra = {}, int max_fds = 0) {
    port_ = FreePort();
    std::vector<std::string> args = {"serve",
                                     "--config",
                                     (dir_ / "scheduler-policy.json").string(),
                                     "--cluster",
                                     (dir_ / "cluster.json").string(),
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(port_)};
    args.insert(args.end(), extra.begin(), extra.end());
    if (max_fds == 0) {
      child_ = std::make_unique<Child>(GPUSCHED_BINARY, args, log_);
    } else {
      std::string command = "ulimit -n " + std::to_string(max_fds) + " && exec " GPUSCHED_BINARY;
      for (const auto& a : args) command += " '" + a + "'";
      child_ = std::make_unique<Child>("/bin/sh", std::vector<std::string>{"-c", command}, log_);
    }
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
  EXPECT_NE(Http(port_, "POST", "/scheduler/filter", kFilter).body.find("at its limit"),
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

  // A valid config written in place with the same inode, size and mtime
  // (an edit within the same second as the last one): the watcher compares
  // content, so it applies it without a signal. The server is stopped
  // while the file is written and its mtime put back, so its watcher cannot
  // poll between the two and see the write's own mtime.
  child_->Signal(SIGSTOP);
  ASSERT_TRUE(
      WaitFor([&] { return ProcessState(child_->pid()) == 'T'; }, std::chrono::milliseconds(5000)));
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
  struct stat after {};
  ASSERT_EQ(stat(target.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  child_->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return !Passes(); }, std::chrono::milliseconds(15000)))
      << ReadAll(log_);
  EXPECT_EQ(Count(ReadAll(log_), "(file change): reloaded"), 2u) << ReadAll(log_);

  // SIGHUP on an unchanged file applies nothing.
  child_->Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return Count(ReadAll(log_), "unchanged, nothing to apply") == 1; },
                      std::chrono::milliseconds(15000)))
      << ReadAll(log_);
  EXPECT_EQ(Count(ReadAll(log_), "reloaded"), 2u);
  EXPECT_FALSE(Passes());
  EXPECT_TRUE(child_->Alive());
}

// A reload applies what can change live (here the quota) and names, in its
// one log line and on /debug/config, what needs a restart. SIGHUP right
// after the file changed is one reload, not two (signal and watcher).
TEST_F(ServeReloadTest, ReloadAppliesLiveFieldsAndNamesTheRestartFieldsOnce) {
  Publish(Config(4, 4));
  Start();
  EXPECT_FALSE(Passes());
  Json next = Json::parse(Config(8, 8));
  next["server"]["threads"] = 3;
  next["topologyTemplates"][0]["uniform"] = "NV12";
  Publish(next.dump(2));
  child_->Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return Passes(); }, std::chrono::milliseconds(15000))) << ReadAll(log_);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // > one watcher period
  const std::string log = ReadAll(log_);
  EXPECT_EQ(Count(log, "reloaded"), 1u) << log;
  EXPECT_NE(log.find("needs a restart: server.threads, topologyTemplates"), std::string::npos)
      << log;

  HttpResult page = Http(port_, "GET", "/debug/config");
  ASSERT_EQ(page.status, 200) << page.body;
  Json running = Json::parse(page.body);
  EXPECT_EQ(running["restartPending"], Json({"server.threads", "topologyTemplates"}));
  EXPECT_EQ(running["server"]["threads"], 2);  // what runs, not what the file says
  EXPECT_EQ(running["reloads"], 1);
  EXPECT_EQ(running["applied"]["quotas"]["namespaces"]["team-a"]["limit"], 8);
  EXPECT_EQ(running["lastError"], "");
}

// The health port answers the probes in plain HTTP and serves nothing else.
TEST_F(ServeReloadTest, HealthPortServesOnlyTheProbes) {
  Publish(Config(8, 8));
  const uint16_t health = FreePort();
  Start({"--health-listen", "127.0.0.1:" + std::to_string(health)});
  EXPECT_EQ(Http(health, "GET", "/healthz").status, 200);
  EXPECT_EQ(Http(health, "GET", "/readyz").status, 200);
  for (const char* path : {"/metrics", "/debug/config", "/debug/queues"}) {
    HttpResult r = Http(health, "GET", path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(Json::parse(r.body).contains("Error")) << path;
  }
  EXPECT_EQ(Http(health, "POST", "/scheduler/filter", kFilter).status, 404);
  EXPECT_EQ(Http(port_, "GET", "/metrics").status, 200);
  EXPECT_EQ(Http(port_, "GET", "/debug/config").status, 200);
}

// Out of file descriptors the accept loop backs off instead of spinning,
// logs it, and serves again once connections close.
TEST_F(ServeReloadTest, OutOfDescriptorsBacksOffAndRecovers) {
  // The sanitizers' runtime needs descriptors itself (UBSan's vptr check
  // probes memory through a pipe): out of them, it reports every virtual
  // call as an invalid vptr and aborts. The behaviour is tested unsanitized.
  if (std::getenv("GPUSCHED_SANITIZER_BUILD") != nullptr) GTEST_SKIP() << "sanitizer build";
  Publish(Config(8, 8));
  Start({}, 40);
  std::vector<int> fds;
  for (int i = 0; i < 100; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    fds.push_back(fd);
  }
  ASSERT_TRUE(WaitFor([&] { return ReadAll(log_).find("back-off") != std::string::npos; }))
      << ReadAll(log_);
  // A spin detector, not a timing: CPU seconds used over one wall second.
  auto cpu_ticks = [&] {
    std::string stat = ReadAll("/proc/" + std::to_string(child_->pid()) + "/stat");
    std::istringstream in(stat.substr(stat.rfind(')') + 2));
    std::string field;
    long long ticks = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
      if (i == 14 || i == 15) ticks += std::stoll(field);  // utime, stime
    }
    return ticks;
  };
  const long long before = cpu_ticks();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const long long used = cpu_ticks() - before;
  EXPECT_LT(used, sysconf(_SC_CLK_TCK) / 2) << "accept loop spins";
  EXPECT_TRUE(child_->Alive());
  for (int fd : fds) close(fd);
  EXPECT_TRUE(WaitFor([&] { return Http(port_, "GET", "/healthz").status == 200; }))
      << ReadAll(log_);
  EXPECT_NE(ReadAll(log_).find("Too many open files"), std::string::npos) << ReadAll(log_);
}

// With --cluster no PodGroup is read: a PodGroup gang's pod is refused
// saying so (not "waiting for an object not read yet"), /debug/pods gives
// that reason, and the namespace's later pod is not held back by it.
TEST_F(ServeReloadTest, ClusterFilePodGroupGangIsRefusedAndBlocksNoOne) {
  Json cluster = Json::parse(kCluster);
  auto pod = [](const std::string& name, const std::string& created) {
    Json p = Json::parse(R"({"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c",
      "resources":{"limits":{"nvidia.com/gpu":"8"}}}]},"status":{"phase":"Pending"}})");
    p["metadata"] = {{"name", name},
                     {"namespace", "team-a"},
                     {"uid", "uid-" + name},
                     {"creationTimestamp", created}};
    return p;
  };
  Json member = pod("pg-0", "2026-01-01T00:00:00Z");
  member["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "llm"}};
  const Json later = pod("later", "2026-01-01T00:05:00Z");
  cluster["items"].push_back(member);
  cluster["items"].push_back(later);
  Write(dir_ / "cluster.json", cluster.dump());
  Publish(Config(8, 8));  // team-a may hold 8 GPUs: one of the two
  Start();
  auto filter = [&](const Json& p) {
    Json body = {{"Pod", p}, {"NodeNames", Json::array({"h0"})}};
    HttpResult r = Http(port_, "POST", "/scheduler/filter", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body);
  };
  Json refused = filter(member);
  EXPECT_TRUE(refused["NodeNames"].empty()) << refused.dump();
  const std::string reason = refused["FailedNodes"].value("h0", "");
  EXPECT_NE(reason.find("gang pg/llm: its size is declared by PodGroup llm, which the --cluster "
                        "file source does not read"),
            std::string::npos)
      << reason;
  EXPECT_EQ(filter(later)["NodeNames"], Json::array({"h0"}));
  HttpResult page = Http(port_, "GET", "/debug/pods/team-a/pg-0");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_NE(page.body.find("does not read"), std::string::npos) << page.body;
  EXPECT_EQ(page.body.find("admissible"), std::string::npos) << page.body;
}

// Numeric flags are checked; the error names the flag.
TEST_F(ServeReloadTest, BadNumericFlagsAreRejectedNamingTheFlag) {
  Publish(Config(8, 8));
  struct Case {
    std::string flag, value;
  };
  for (const Case& k : {Case{"--threads", "abc"}, Case{"--threads", "0"}, Case{"--threads", "65"},
                        Case{"--max-connections", "-1"}, Case{"--max-connections", "12x"},
                        Case{"--max-inflight-body-bytes", "1"}, Case{"--max-body-bytes", "lots"},
                        Case{"--health-listen", "nowhere"}}) {
    const std::string log = (dir_ / ("flag" + k.flag + k.value + ".log")).string();
    Child child(GPUSCHED_BINARY,
                {"serve", "--config", (dir_ / "scheduler-policy.json").string(), "--cluster",
                 (dir_ / "cluster.json").string(), "--listen", "127.0.0.1:0", k.flag, k.value},
                log);
    EXPECT_EQ(child.Wait(), 2) << k.flag << " " << k.value;
    EXPECT_NE(ReadAll(log).find(k.flag), std::string::npos)
        << k.flag << " " << k.value << ": " << ReadAll(log);
  }
}

}  // namespace
}  // namespace gpusched::testing
