// The first run: with the shipped config, a first GPU Job in a namespace the
// config does not list (`default`) runs on an idle cluster, and a namespace
// that cannot borrow is told so without contradicting itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpusched/util/strings.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/extender_codec.h"
#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::PodBuilder;
using ::gpusched::testing::ReadSourceFile;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::Quota;
using testing::Quotas;

// The demo cluster's nodes without its pods: an idle cluster.
std::vector<NodeSpec> DemoNodes() {
  codec::RequestDecoder decoder(256);
  std::string body = ReadSourceFile("config/demo-cluster.json");
  auto objs = decoder.DecodeClusterList(body);
  EXPECT_TRUE(objs.ok()) << objs.status();
  return objs.ok() ? objs->nodes : std::vector<NodeSpec>{};
}

// The queue options of a policy file of the repository.
QueueOptions OptionsOf(const std::string& path) {
  auto config = codec::DecodeConfig(ReadSourceFile(path));
  EXPECT_TRUE(config.ok()) << path << ": " << config.status();
  QueueOptions o;
  if (!config.ok()) return o;
  EXPECT_TRUE(config->quotas.enabled) << path;
  o.quotas = config->quotas;
  o.reclaim = config->reclaim;
  o.gang = config->gang;
  return o;
}

QueueOptions ShippedOptions() { return OptionsOf("config/scheduler-policy.json"); }
QueueOptions DeployOptions() { return OptionsOf("deploy/scheduler-policy.json"); }

TEST(FirstRunTest, OneGpuPodInDefaultRunsOnIdleDemoClusterWithShippedConfig) {
  Harness h(DemoNodes(), {}, ShippedOptions());
  ASSERT_FALSE(h.nodes.empty());
  PodRequest pod = PodBuilder("first-job-abcde", "default").Gpus(1).Build();
  std::string reason;
  std::vector<std::string> passed = h.Filter(pod, &reason);
  ASSERT_THAT(passed, Not(IsEmpty())) << reason;
  EXPECT_EQ(h.Bind(pod, passed.front()), "");
  // A second namespace nobody listed gets its first GPU too.
  PodRequest other = PodBuilder("train-0", "ml-sandbox").Gpus(1).Build();
  EXPECT_THAT(h.Filter(other, &reason), Not(IsEmpty())) << reason;
}

// A fresh install (the deployed policy, no quota written yet): an 8-GPU
// Job in `default` runs on an idle cluster, and so does a 1-GPU one of a
// namespace nobody listed.
TEST(FirstRunTest, EightGpuJobInDefaultRunsWithTheDeployedConfig) {
  for (QueueOptions o : {DeployOptions(), ShippedOptions()}) {
    Harness h(DemoNodes(), {}, o);
    PodRequest pod = PodBuilder("first-job-abcde", "default").Gpus(8).Build();
    std::string reason;
    std::vector<std::string> passed = h.Filter(pod, &reason);
    ASSERT_THAT(passed, Not(IsEmpty())) << reason;
    EXPECT_EQ(h.Bind(pod, passed.front()), "");
    PodRequest other = PodBuilder("train-0", "ml-sandbox").Gpus(1).Build();
    EXPECT_THAT(h.Filter(other, &reason), Not(IsEmpty())) << reason;
  }
}

std::vector<NodeSpec> A100s(int n) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back(gpusched::testing::DgxA100(StrCat("a", i)));
  return nodes;
}

// Four 8 x A100 nodes, team-a (guaranteed 8, limit 32, cohort c) holding 8,
// the default quota limit 4 in cohort c: 24 GPUs no guarantee covers are
// idle. team-a's next 8-GPU pod and an unlisted namespace's 1-GPU pod both
// run; a pod over the default limit is refused by the limit, which the
// message names.
TEST(FirstRunTest, GpusNoGuaranteeCoversAreLentToEveryNamespace) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 32, "c")}}, Quota(0, 4, "c"));
  Harness h(A100s(4), {PodBuilder("a0", "team-a").Gpus(8).OnNode("a0", 0xff).Build()}, o);
  std::string reason;
  PodRequest big = PodBuilder("big", "team-a").Gpus(8).Build();
  ASSERT_THAT(h.Filter(big, &reason), Not(IsEmpty())) << reason;
  ASSERT_EQ(h.Bind(big, "a1"), "");
  PodRequest one = PodBuilder("one", "unlisted").Gpus(1).Build();
  EXPECT_THAT(h.Filter(one, &reason), Not(IsEmpty())) << reason;
  PodRequest over = PodBuilder("over", "unlisted").Gpus(8).Build();
  EXPECT_THAT(h.Filter(over, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("at its limit: holds 0 of limit 4 GPUs"));
  EXPECT_THAT(reason, Not(HasSubstr("idle")));
}

// Without a cohort, a namespace borrows idle GPUs all the same.
TEST(FirstRunTest, NoCohortStillBorrowsIdleGpus) {
  QueueOptions o;
  o.quotas = Quotas({}, Quota(0, 4));
  Harness h(DemoNodes(), {}, o);
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("p", "default").Gpus(1).Build(), &reason), Not(IsEmpty()))
      << reason;
}

}  // namespace
}  // namespace gpusched::queue
