// The first run: with the shipped config, a first GPU Job in a namespace the
// config does not list (`default`) runs on an idle cluster, and a namespace
// that cannot borrow is told so without contradicting itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

QueueOptions ShippedOptions() {
  auto config = codec::DecodeConfig(ReadSourceFile("config/scheduler-policy.json"));
  EXPECT_TRUE(config.ok()) << config.status();
  QueueOptions o;
  if (!config.ok()) return o;
  EXPECT_TRUE(config->quotas.enabled);
  o.quotas = config->quotas;
  o.reclaim = config->reclaim;
  o.gang = config->gang;
  return o;
}

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

TEST(FirstRunTest, NoCohortSaysNothingCanBeBorrowed) {
  QueueOptions o;
  o.quotas = Quotas({}, Quota(0, 4));
  Harness h(DemoNodes(), {}, o);
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("p", "default").Gpus(1).Build(), &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("no cohort to borrow from"));
}

}  // namespace
}  // namespace gpusched::queue
