// `gpusched simulate` with a mistyped jobs file: the binary exits with an
// error naming the entry and the field (it used to abort on an uncaught
// nlohmann type_error, exit 134).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test/testing/child_process.h"

namespace gpusched::testing {
namespace {

namespace fs = std::filesystem;

TEST(SimulateCli, MistypedJobsFileIsAnErrorNotACrash) {
  const struct {
    const char* name;
    const char* jobs;
    const char* message;
  } kCases[] = {
      {"pods_string",
       R"([{"name":"a","namespace":"ns","pods":"two","gpusPerPod":1,"duration":10,"submit":0}])",
       "jobs[0].pods: expected integer"},
      {"gang_string",
       R"([{"name":"a","namespace":"ns","pods":2,"gpusPerPod":1,"duration":10,"submit":0,)"
       R"("gang":"yes"}])",
       "jobs[0].gang: expected boolean"},
  };
  const fs::path dir = fs::path(::testing::TempDir()) / "simulate_cli_test";
  fs::create_directories(dir);
  const std::string vc = (dir / "vc.csv").string();
  std::ofstream(vc) << "vc,node num\nns,1\n";
  for (const auto& c : kCases) {
    const std::string jobs = (dir / (std::string(c.name) + ".json")).string();
    const std::string log = (dir / (std::string(c.name) + ".log")).string();
    std::ofstream(jobs) << c.jobs;
    fs::remove(log);
    Child child(GPUSCHED_BINARY,
                {"simulate", "--protocol", "replay", "--jobs-json", jobs, "--vc-nodes", vc}, log);
    ASSERT_TRUE(child.started()) << c.name;
    const int code = child.Wait();
    EXPECT_GT(code, 0) << c.name << " (-1: ended by a signal)";
    EXPECT_NE(ReadAll(log).find(c.message), std::string::npos) << c.name << ": " << ReadAll(log);
  }
}

}  // namespace
}  // namespace gpusched::testing
