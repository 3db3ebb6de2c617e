// `gpusched simulate` with a mistyped jobs file: the binary exits with an
// error naming the entry and the field (it used to abort on an uncaught
// nlohmann type_error, exit 134); the topology protocol's slowdown flags.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// --protocol topology runs every placement under each slowdown model named
// (one CSV row each, the model in column slowdown_model); a model or level
// factor it does not know exits 2 naming the flag.
TEST(SimulateCli, TopologySlowdownModelsOneRowEachAndBadOnesNamed) {
  const fs::path dir = fs::path(::testing::TempDir()) / "simulate_cli_topology";
  fs::create_directories(dir);
  const std::string trace = std::string(GPUSCHED_SOURCE_DIR) +
                            "/config/traces/philly/philly_jobs_pollux_2017-10-01_2d.csv";
  const std::vector<std::string> base = {"simulate",    "--protocol", "topology",  "--topology",
                                         "racks:2x2x2", "--jobs-csv", trace,       "--jobs",
                                         "40",          "--policies", "kueue-tas", "--quiet"};
  const struct {
    std::vector<std::string> extra;
    const char* message;
  } kBad[] = {{{"--slowdown-model", "tree"}, "--slowdown-model: 'tree'"},
              {{"--level-slowdown", "racks=0.5"}, "--level-slowdown 'racks=0.5'"},
              {{"--level-slowdown", "spine=2"}, "--level-slowdown 'spine=2'"}};
  for (const auto& c : kBad) {
    const std::string log = (dir / "bad.log").string();
    fs::remove(log);
    std::vector<std::string> args = base;
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    Child child(GPUSCHED_BINARY, args, log);
    ASSERT_TRUE(child.started()) << c.message;
    EXPECT_EQ(child.Wait(), 2) << c.message;
    EXPECT_NE(ReadAll(log).find(c.message), std::string::npos) << ReadAll(log);
  }
  const std::string out = (dir / "rows.csv").string();
  std::vector<std::string> args = base;
  for (const char* a : {"--slowdown-model", "levels,span", "--out", out.c_str()}) {
    args.emplace_back(a);
  }
  Child child(GPUSCHED_BINARY, args, (dir / "good.log").string());
  ASSERT_TRUE(child.started());
  ASSERT_EQ(child.Wait(), 0) << ReadAll((dir / "good.log").string());
  const std::string csv = ReadAll(out);
  EXPECT_NE(csv.find(",slowdown_model,level_factors,top_spread_share\n"), std::string::npos);
  EXPECT_NE(csv.find(",levels,1.026:1.026:1.856:1.000:5.250,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",span,1.026:1.026:1.856:1.000:5.250,"), std::string::npos) << csv;
}

// The replay runs on a virtual clock: the same binary on the same input
// gives the same output, byte for byte, in two processes. The Backfill
// replay did not (absl's hash is seeded per process, and the order in which
// pods that ended together entered the runtime history changed the
// estimates Backfill decides by). Two days of Philly on 20 nodes, each VC a
// namespace, every namespace Backfill; in a sanitizer build (several times
// slower) the first 600 jobs of them.
TEST(SimulateCli, BackfillReplayRepeatsExactlyInTwoProcesses) {
  const fs::path dir = fs::path(::testing::TempDir()) / "simulate_cli_repeat";
  fs::create_directories(dir);
  const std::string src = GPUSCHED_SOURCE_DIR;
  std::string jobs = src + "/config/traces/philly/philly_jobs_pollux_2017-10-01_2d.csv";
  int want_jobs = 1624;
  if (std::getenv("GPUSCHED_SANITIZER_BUILD") != nullptr) {
    want_jobs = 600;
    std::ifstream in(jobs);
    jobs = (dir / "jobs.csv").string();
    std::ofstream cut(jobs);
    std::string line;
    for (int i = 0; i <= want_jobs && std::getline(in, line); ++i) cut << line << "\n";
  }
  const std::string vc = (dir / "vc.csv").string();
  std::ofstream(vc) << "vc,node num\n6214e9,4\n7f04ca,2\n11cb48,1\nb436b2,4\nee9e8c,3\n"
                       "e13805,1\n6c71a0,2\n2869ce,1\ned69ec,0\n103959,0\n0e4a51,2\n";
  std::string outputs[2];
  for (int run = 0; run < 2; ++run) {
    const std::string out = (dir / ("run" + std::to_string(run) + ".json")).string();
    const std::string log = (dir / ("run" + std::to_string(run) + ".log")).string();
    fs::remove(out);
    Child child(GPUSCHED_BINARY,
                {"simulate", "--protocol", "replay", "--jobs-csv", jobs, "--vc-nodes", vc,
                 "--policies", "gpusched", "--config", src + "/bench/sim/variants/backfill.json",
                 "--load", "1", "--out", out, "--quiet"},
                log);
    ASSERT_TRUE(child.started());
    ASSERT_EQ(child.Wait(), 0) << ReadAll(log);
    outputs[run] = ReadAll(out);
  }
  // A run that replayed jobs, with Backfill passing heads and estimates
  // sampled (what the divergence showed in first).
  EXPECT_NE(outputs[0].find("\"jobs\": " + std::to_string(want_jobs)), std::string::npos)
      << outputs[0].substr(0, 400);
  EXPECT_NE(outputs[0].find("\"median_abs_error_s\""), std::string::npos);
  EXPECT_NE(outputs[0].find("\"backfill_heads_passed\": "), std::string::npos);
  EXPECT_EQ(outputs[0].find("\"backfill_heads_passed\": 0,"), std::string::npos);
  EXPECT_EQ(outputs[0], outputs[1]);
}

}  // namespace
}  // namespace gpusched::testing
