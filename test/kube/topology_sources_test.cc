// Topology-aware gangs through the fake API server: node labels from the
// Node objects, and a gang declared each way users write it (gpusched's
// annotations, Kueue's podset annotations, a Volcano PodGroup's
// networkTopology) is held back while no clique holds it, although free
// nodes in two cliques would, and reserved inside one clique once one does.
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "scheduler/kube/gang_objects.h"
#include "test/kube/api_harness.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

constexpr char kClique[] = "nvidia.com/gpu.clique";
constexpr char kVolcanoApi[] = "scheduling.volcano.sh/v1beta1";

// gpu-0, gpu-1 in clique "a"; gpu-2, gpu-3 in clique "b".
Json CliqueNode(int i) {
  Json n = NodeJson("gpu-" + std::to_string(i), 8);
  n["metadata"]["labels"][kClique] = i < 2 ? "a" : "b";
  return n;
}

// A member of a 2 x 8-GPU gang as `how` declares it.
Json Member(const std::string& how, int i) {
  Json p = PodJson("train", "w-" + std::to_string(i), 8);
  Json& meta = p["metadata"];
  if (how == "gpusched") {
    meta["annotations"] = {{"gpusched.io/gang", "llm"},
                           {"gpusched.io/gang-size", "2"},
                           {"gpusched.io/topology-required", kClique}};
  } else if (how == "kueue") {
    meta["labels"] = {{"kueue.x-k8s.io/queue-name", "user-queue"},
                      {"kueue.x-k8s.io/pod-group-name", "llm"}};
    meta["annotations"] = {{"kueue.x-k8s.io/pod-group-total-count", "2"},
                           {"kueue.x-k8s.io/podset-required-topology", kClique}};
  } else {  // volcano: the PodGroup says it
    meta["annotations"] = {{"scheduling.k8s.io/group-name", "llm"}};
  }
  return p;
}

using TopologySourcesTest = FakeApiTestBase<::testing::TestWithParam<std::string>>;

TEST_P(TopologySourcesTest, GangWaitsForOneCliqueThenIsReservedInIt) {
  const std::string how = GetParam();
  for (int i = 0; i < 4; ++i) api_->Put("nodes", CliqueNode(i));
  // One node busy per clique: two free nodes, in different cliques.
  api_->Put("pods", PodJson("other", "busy-0", 8, "gpu-0", "0,1,2,3,4,5,6,7", "Running"));
  api_->Put("pods", PodJson("other", "busy-2", 8, "gpu-2", "0,1,2,3,4,5,6,7", "Running"));
  if (how == "volcano") {
    api_->ServeApiGroup(kVolcanoApi);
    api_->Put(
        "scheduling.volcano.sh/podgroups",
        {{"apiVersion", kVolcanoApi},
         {"kind", "PodGroup"},
         {"metadata", {{"name", "llm"}, {"namespace", "train"}}},
         {"spec",
          {{"minMember", 2}, {"networkTopology", {{"mode", "hard"}, {"highestTierAllowed", 1}}}}}});
  }
  for (int i = 0; i < 2; ++i) api_->Put("pods", Member(how, i));

  ClusterState state(ShippedTemplates());
  auto src = NewSource(client_.get(), &metrics_);
  kube::GangSizesOptions go;
  go.retry = std::chrono::milliseconds(30);
  go.refresh = std::chrono::milliseconds(100);
  kube::GangSizes sizes(client_.get(), go, &metrics_);
  sizes.Start([&src] { src->RefillGangs(); });
  src->set_gang_sizes(&sizes);
  ASSERT_TRUE(StartSynced(*src, state));
  ASSERT_TRUE(WaitFor([&] {
    auto p = state.FindPodByName("train", "w-1");
    return p && p->gang_size == 2;
  }));

  const auto framework = DefaultFramework();
  QueueSetup setup;
  setup.options.gang.topology_levels = {kClique, "kubernetes.io/hostname"};
  auto q = NewQueue(&state, framework, std::move(setup));
  q->Resync();
  auto admit = [&](int i) {
    return AdmitReason(*q, state, *framework, "train", "w-" + std::to_string(i));
  };
  for (int i = 0; i < 2; ++i) {
    const std::string why = admit(i);
    EXPECT_NE(why.find("needs 16 GPUs (2 x 8) in one nvidia.com/gpu.clique; the best, a, has 8 "
                       "GPUs free, room for 1 of 2 members"),
              std::string::npos)
        << how << ": " << why;
  }
  EXPECT_TRUE(ReservationHolders(state).empty());

  // Clique a frees up: the gang is reserved there, and only there.
  api_->Delete("pods", "other/busy-0");
  ASSERT_TRUE(WaitFor([&] { return state.Snapshot()->Find("gpu-0")->free_count() == 8; }));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(admit(i), "") << how << " " << i;
  std::set<std::string> nodes;
  for (const NodeInfo* n : state.Snapshot()->nodes()) {
    for (const PodOnNode& p : n->pods) {
      if (p.reservation) nodes.insert(n->name);
    }
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"gpu-0", "gpu-1"})) << how;
  sizes.Stop();
  src->Stop();
}

INSTANTIATE_TEST_SUITE_P(EachUpstreamRequest, TopologySourcesTest,
                         ::testing::Values("gpusched", "kueue", "volcano"));

}  // namespace
}  // namespace gpusched::testing
