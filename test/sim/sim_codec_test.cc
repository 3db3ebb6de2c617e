// The simulator's jobs file: every field typed and named on error; the
// result files keep their shape.
#include "scheduler/codec/sim_codec.h"

#include <string>

#include "gtest/gtest.h"

namespace gpusched::codec {
namespace {

TEST(DecodeJobs, ReadsEveryFieldAndDefaults) {
  auto jobs = DecodeJobs(R"([
    {"name":"a","namespace":"ns","priorityClass":"high","priority":7,"gpusPerPod":2,
     "pods":3,"duration":10.5,"submit":4,"gang":false},
    {}])");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  const sim::Job& a = (*jobs)[0];
  EXPECT_EQ(a.id, "a");
  EXPECT_EQ(a.ns, "ns");
  EXPECT_EQ(a.priority_class, "high");
  EXPECT_EQ(a.priority, 7);
  EXPECT_EQ(a.gpus_per_pod, 2);
  EXPECT_EQ(a.pods, 3);
  EXPECT_DOUBLE_EQ(a.duration, 10.5);
  EXPECT_DOUBLE_EQ(a.submit, 4);
  EXPECT_FALSE(a.gang);
  const sim::Job& b = (*jobs)[1];
  EXPECT_EQ(b.id, "job-1");
  EXPECT_EQ(b.ns, "default");
  EXPECT_EQ(b.priority_class, "");
  EXPECT_EQ(b.priority, 0);
  EXPECT_EQ(b.gpus_per_pod, 1);
  EXPECT_EQ(b.pods, 1);
  EXPECT_DOUBLE_EQ(b.duration, 0);
  EXPECT_DOUBLE_EQ(b.submit, 0);
  EXPECT_TRUE(b.gang);
}

TEST(DecodeJobs, BadInputNamesEntryAndField) {
  const struct {
    const char* json;
    const char* error;
  } kCases[] = {
      // The two inputs that used to abort the process (nlohmann type_error.302).
      {R"([{"name":"a","namespace":"ns","pods":"two","gpusPerPod":1,"duration":10,"submit":0}])",
       "jobs[0].pods: expected integer"},
      {R"([{"name":"a","gang":"yes"}])", "jobs[0].gang: expected boolean"},
      {R"([{},{"name":7}])", "jobs[1].name: expected string"},
      {R"([{"namespace":["a"]}])", "jobs[0].namespace: expected string"},
      {R"([{"priorityClass":1}])", "jobs[0].priorityClass: expected string"},
      {R"([{"priority":1.5}])", "jobs[0].priority: expected integer"},
      {R"([{"gpusPerPod":true}])", "jobs[0].gpusPerPod: expected integer"},
      {R"([{"gpusPerPod":-1}])", "jobs[0].gpusPerPod: must be in [0, 2147483647], got -1"},
      {R"([{"pods":0}])", "jobs[0].pods: must be in [1, 2147483647], got 0"},
      {R"([{"pods":4294967296}])", "jobs[0].pods: must be in [1, 2147483647], got 4294967296"},
      {R"([{"duration":"10"}])", "jobs[0].duration: expected number"},
      {R"([{"duration":-1}])", "jobs[0].duration: must be >= 0"},
      {R"([{"submit":{}}])", "jobs[0].submit: expected number"},
      {R"([{"submit":-0.5}])", "jobs[0].submit: must be >= 0"},
      {R"([{"gpusPerpod":2}])", "jobs[0].gpusPerpod: unknown field"},
      {R"([{},3])", "jobs[1]: expected object"},
      {R"({"jobs":[]})", "jobs: expected an array of objects"},
      {R"([{"name":"a",])", "jobs: not valid JSON"},
      {"", "jobs: not valid JSON"},
  };
  for (const auto& c : kCases) {
    auto jobs = DecodeJobs(c.json);
    ASSERT_FALSE(jobs.ok()) << c.json;
    EXPECT_EQ(jobs.status().message(), c.error) << c.json;
  }
}

TEST(EncodeResults, KeepTheirKeysAndOrder) {
  sim::FgdResult f;
  f.policy = "fgd";
  f.seed = 42;
  f.trace = "t";
  f.decision_hash = 18446744073709551615ull;
  f.curve.push_back({100, 90.5, 3, 2});
  EXPECT_EQ(EncodeFgdResult(f),
            "{\n \"policy\": \"fgd\",\n \"seed\": 42,\n \"trace\": \"t\",\n"
            " \"unallocated_gpu_pct_at_100\": 0.0,\n \"allocated_gpu_pct_at_130\": 0.0,\n"
            " \"frag_total_pct_at_90\": 0.0,\n \"frag_idle_pct_at_90\": 0.0,\n \"pods\": 0,\n"
            " \"failed_pods\": 0,\n \"decision_hash\": \"18446744073709551615\",\n"
            " \"seconds\": 0.0,\n \"curve\": [\n  {\n   \"arrived_pct\": 100,\n"
            "   \"allocated_pct\": 90.5,\n   \"frag_total_pct\": 3.0,\n"
            "   \"frag_idle_pct\": 2.0\n  }\n ]\n}");
  sim::ReplayResult r;
  r.policy = "fifo";
  r.jobs = 2;
  r.per_ns["a"].jobs = 2;
  const std::string replay = EncodeReplayResult(r);
  EXPECT_EQ(replay.find("{\n \"policy\": \"fifo\",\n \"load\": 1.0,\n \"jobs\": 2,"), 0u) << replay;
  EXPECT_NE(replay.find("\"namespaces\": {\n  \"a\": {\n   \"jobs\": 2,\n   \"quota_gpus\": 0,"),
            std::string::npos)
      << replay;
}

}  // namespace
}  // namespace gpusched::codec
