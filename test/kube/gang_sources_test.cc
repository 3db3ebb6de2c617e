// Gangs whose size an object declares (PodGroups, JobSets, training jobs),
// read through the fake API server: GangSizes alone (size, elastic
// minMember, object created late, size changes, CRD not installed), then
// KubeClusterSource + GangSizes + QueueManager: a gang of PodGroup pods is
// admitted all-or-nothing once its PodGroup is read.
#include <gtest/gtest.h>

#include <atomic>

#include "scheduler/kube/gang_objects.h"
#include "test/kube/api_harness.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

constexpr char kPodGroups[] = "scheduling.x-k8s.io/podgroups";
constexpr char kPodGroupApi[] = "scheduling.x-k8s.io/v1alpha1";

Json PodGroup(const std::string& ns, const std::string& name, int min_member) {
  return {{"apiVersion", kPodGroupApi},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"minMember", min_member}, {"scheduleTimeoutSeconds", 60}}}};
}

// A pod as mpi-operator / Trainer create it under coscheduling.
Json PodGroupPod(const std::string& ns, const std::string& name, int gpus,
                 const std::string& group) {
  Json p = PodJson(ns, name, gpus);
  p["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", group},
                             {"training.kubeflow.org/job-name", group}};
  return p;
}

PodRequest OwnedPod(const std::string& ns, GangOwnerKind kind, const std::string& name) {
  PodRequest p;
  p.ns = ns;
  p.name = "m";
  p.gang_owner = {kind, name};
  return p;
}

class GangSourcesTest : public FakeApiTest {
 protected:
  std::unique_ptr<kube::GangSizes> NewSizes(std::function<void()> on_change = nullptr) {
    kube::GangSizesOptions o;
    o.retry = std::chrono::milliseconds(30);
    o.refresh = std::chrono::milliseconds(100);
    o.discovery_retry = std::chrono::milliseconds(100);
    auto s = std::make_unique<kube::GangSizes>(client_.get(), o, &metrics_);
    s->Start([this, on_change] {
      ++changes_;
      if (on_change) on_change();
    });
    return s;
  }
  // Fill's answer for `pod` once it is no longer unknown (or after 10 s).
  PodRequest FillSettled(kube::GangSizes& sizes, PodRequest pod) {
    PodRequest out;
    WaitFor([&] {
      out = pod;
      sizes.Fill(out);
      return out.gang_size != kGangSizeUnknown;
    });
    return out;
  }

  // The source with gang sizes read from objects, synced, and a queue.
  void StartAll() {
    src_ = NewSource(client_.get(), &metrics_);
    sizes_ = NewSizes([src = src_.get()] { src->RefillGangs(); });
    src_->set_gang_sizes(sizes_.get());
    ASSERT_TRUE(StartSynced(*src_, state_));
    framework_ = DefaultFramework();
    queue_ = NewQueue(&state_, framework_);
    queue_->Resync();
  }
  void TearDown() override {
    if (sizes_) sizes_->Stop();
    if (src_) src_->Stop();
  }
  std::string Admit(const std::string& ns, const std::string& name) {
    return AdmitReason(*queue_, state_, *framework_, ns, name);
  }

  std::atomic<int> changes_{0};
  ClusterState state_{ShippedTemplates()};
  std::unique_ptr<kube::KubeClusterSource> src_;
  std::unique_ptr<kube::GangSizes> sizes_;
  std::shared_ptr<const policy::Framework> framework_;
  std::unique_ptr<queue::QueueManager> queue_;
};

TEST_F(GangSourcesTest, SizesFromEachOwnerKind) {
  api_->ServeApiGroup(kPodGroupApi);
  api_->ServeApiGroup("scheduling.volcano.sh/v1beta1");
  api_->ServeApiGroup("jobset.x-k8s.io/v1alpha2");
  api_->ServeApiGroup("kubeflow.org/v1");
  api_->ServeApiGroup("kubeflow.org/v2beta1");
  api_->Put(kPodGroups, PodGroup("train", "llm", 4));
  api_->Put("scheduling.volcano.sh/podgroups",
            {{"metadata", {{"name", "tf-3f9c"}, {"namespace", "train"}}},
             {"spec", {{"minMember", 3}, {"queue", "default"}}}});
  api_->Put("jobset.x-k8s.io/jobsets", {{"metadata", {{"name", "llama"}, {"namespace", "train"}}},
                                        {"spec",
                                         {{"replicatedJobs",
                                           {{{"name", "node"},
                                             {"replicas", 2},
                                             {"template", {{"spec", {{"parallelism", 2}}}}}}}}}}});
  api_->Put("kubeflow.org/pytorchjobs",
            {{"metadata", {{"name", "bert"}, {"namespace", "train"}}},
             {"spec",
              {{"pytorchReplicaSpecs",
                {{"Master", {{"replicas", 1}}}, {"Worker", {{"replicas", 2}}}}}}}});
  api_->Put(
      "kubeflow.org/mpijobs",
      {{"metadata", {{"name", "pi"}, {"namespace", "train"}}},
       {"spec",
        {{"mpiReplicaSpecs", {{"Launcher", {{"replicas", 1}}}, {"Worker", {{"replicas", 5}}}}}}}});
  auto sizes = NewSizes();
  struct Case {
    GangOwnerKind kind;
    std::string name, gang;
    int32_t size;
  } cases[] = {
      {GangOwnerKind::kPodGroup, "llm", "pg/llm", 4},
      {GangOwnerKind::kVolcanoPodGroup, "tf-3f9c", "volcano/tf-3f9c", 3},
      {GangOwnerKind::kJobSet, "llama", "jobset/llama", 4},
      {GangOwnerKind::kPyTorchJob, "bert", "pytorchjob/bert", 3},
      {GangOwnerKind::kMpiJob, "pi", "mpijob/pi", 6},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gang);
    PodRequest p = FillSettled(*sizes, OwnedPod("train", c.kind, c.name));
    EXPECT_EQ(p.gang, c.gang);
    EXPECT_EQ(p.gang_size, c.size);
  }
  // The same name in another namespace is another object (not there: waits).
  PodRequest other = OwnedPod("other", GangOwnerKind::kPodGroup, "llm");
  sizes->Fill(other);
  EXPECT_EQ(other.gang, "pg/llm");
  EXPECT_EQ(other.gang_size, kGangSizeUnknown);
  EXPECT_GE(api_->requests("GET /apis/scheduling.x-k8s.io/v1alpha1/namespaces/train/podgroups/llm"),
            1);
}

TEST_F(GangSourcesTest, ElasticMinMemberObjectCreatedLateAndResized) {
  api_->ServeApiGroup(kPodGroupApi);
  auto sizes = NewSizes();
  PodRequest pod = OwnedPod("train", GangOwnerKind::kPodGroup, "elastic");
  PodRequest first = pod;
  sizes->Fill(first);
  EXPECT_EQ(first.gang_size, kGangSizeUnknown);  // not read yet: the gang waits
  ASSERT_TRUE(WaitFor([&] {
    return api_->requests("GET /apis/scheduling.x-k8s.io/v1alpha1/namespaces/train/podgroups/") >=
           2;
  }));
  PodRequest still = pod;
  sizes->Fill(still);
  EXPECT_EQ(still.gang_size, kGangSizeUnknown);  // 404: the object does not exist yet
  // minMember 2 for a job of (say) 4 pods: an elastic gang starts with 2.
  api_->Put(kPodGroups, PodGroup("train", "elastic", 2));
  EXPECT_EQ(FillSettled(*sizes, pod).gang_size, 2);
  api_->Put(kPodGroups, PodGroup("train", "elastic", 3));
  ASSERT_TRUE(WaitFor([&] {
    PodRequest p = pod;
    sizes->Fill(p);
    return p.gang_size == 3;
  }));
  EXPECT_TRUE(WaitFor([&] { return changes_.load() >= 2; }));
}

// An object that does not exist or declares no valid size leaves the size
// unknown with the real reason, naming the object and the field; once
// fixed, the size is read and the reason goes.
TEST_F(GangSourcesTest, InvalidOrMissingObjectGivesTheReason) {
  api_->ServeApiGroup(kPodGroupApi);
  auto sizes = NewSizes();
  const PodRequest pod = OwnedPod("train", GangOwnerKind::kPodGroup, "bad");
  auto reason = [&] {
    PodRequest p = pod;
    sizes->Fill(p);
    return p.gang_size_reason;
  };
  ASSERT_TRUE(WaitFor([&] { return !reason().empty(); }));
  EXPECT_EQ(reason(), "PodGroup bad does not exist (yet) in namespace train");
  api_->Put(kPodGroups, PodGroup("train", "bad", -1));
  ASSERT_TRUE(
      WaitFor([&] { return reason() != "PodGroup bad does not exist (yet) in namespace train"; }));
  PodRequest p = pod;
  sizes->Fill(p);
  EXPECT_EQ(p.gang_size, kGangSizeUnknown);
  EXPECT_EQ(p.gang_size_reason, "PodGroup bad declares no valid size: spec.minMember: negative");
  api_->Put(kPodGroups, PodGroup("train", "bad", 2));
  PodRequest fixed = FillSettled(*sizes, pod);
  EXPECT_EQ(fixed.gang_size, 2);
  EXPECT_EQ(fixed.gang_size_reason, "");
}

TEST_F(GangSourcesTest, MissingCrdIsNotAnErrorItDisablesTheKind) {
  // No group served: discovery answers 404, as without the CRD.
  auto sizes = NewSizes();
  PodRequest pod = OwnedPod("train", GangOwnerKind::kVolcanoPodGroup, "vc");
  pod.gang = "volcano/vc";
  pod.gang_size = kGangSizeUnknown;
  PodRequest out = pod;
  ASSERT_TRUE(WaitFor([&] {
    out = pod;
    sizes->Fill(out);
    return out.gang.empty();
  }));
  EXPECT_EQ(out.gang_size, 0);  // scheduled as a single pod
  // The reader runs on_change after it publishes the change Fill just saw.
  EXPECT_TRUE(WaitFor([&] { return changes_.load() >= 1; }));
  EXPECT_EQ(api_->requests("GET /apis/scheduling.volcano.sh/v1beta1/namespaces"), 0);
  // Installing the CRD later brings the declaration back.
  api_->ServeApiGroup("scheduling.volcano.sh/v1beta1");
  api_->Put("scheduling.volcano.sh/podgroups",
            {{"metadata", {{"name", "vc"}, {"namespace", "train"}}}, {"spec", {{"minMember", 2}}}});
  ASSERT_TRUE(WaitFor([&] {
    out = pod;
    sizes->Fill(out);
    return out.gang_size == 2;
  }));
  EXPECT_EQ(out.gang, "volcano/vc");
}

TEST_F(GangSourcesTest, PodGroupGangAdmittedAllOrNothingThroughTheSource) {
  for (int i = 0; i < 4; ++i) api_->Put("nodes", NodeJson("gpu-" + std::to_string(i), 8));
  api_->ServeApiGroup(kPodGroupApi);
  // Two nodes busy: a 3 x 8-GPU gang cannot start; one member alone could.
  api_->Put("pods", PodJson("other", "busy-0", 8, "gpu-0", "0,1,2,3,4,5,6,7", "Running"));
  api_->Put("pods", PodJson("other", "busy-1", 8, "gpu-1", "0,1,2,3,4,5,6,7", "Running"));
  for (int i = 0; i < 3; ++i) {
    api_->Put("pods", PodGroupPod("train", "llm-worker-" + std::to_string(i), 8, "llm"));
  }
  StartAll();
  auto admit = [&](int i) { return Admit("train", "llm-worker-" + std::to_string(i)); };

  // Before the PodGroup exists the members' size is unknown.
  auto m0 = state_.FindPodByName("train", "llm-worker-0");
  ASSERT_TRUE(m0.has_value());
  EXPECT_EQ(m0->gang, "pg/llm");
  EXPECT_EQ(m0->gang_size, kGangSizeUnknown);

  api_->Put(kPodGroups, PodGroup("train", "llm", 3));
  ASSERT_TRUE(WaitFor([&] {
    auto p = state_.FindPodByName("train", "llm-worker-2");
    return p && p->gang_size == 3;
  }));
  for (int i = 0; i < 3; ++i) {
    const std::string why = admit(i);
    EXPECT_NE(why.find("gang pg/llm needs 3 x"), std::string::npos) << why;
  }
  EXPECT_TRUE(ReservationHolders(state_).empty());

  // The busy pods leave: the whole gang is reserved and every member passes.
  api_->Delete("pods", "other/busy-0");
  api_->Delete("pods", "other/busy-1");
  ASSERT_TRUE(WaitFor([&] { return state_.Snapshot()->Find("gpu-1")->free_count() == 8; }));
  ASSERT_TRUE(WaitFor([&] { return state_.Snapshot()->Find("gpu-0")->free_count() == 8; }));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(admit(i), "") << i;
  EXPECT_EQ(ReservationHolders(state_).size(), 3u);
}

TEST_F(GangSourcesTest, SizeOnThePodNeedsNoApiRead) {
  for (int i = 0; i < 3; ++i) api_->Put("nodes", NodeJson("gpu-" + std::to_string(i), 8));
  api_->Put("pods", PodJson("other", "busy", 8, "gpu-0", "0,1,2,3,4,5,6,7", "Running"));
  for (int i = 0; i < 3; ++i) {
    Json p = PodJson("serve", "grp-" + std::to_string(i), 8);
    p["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "user-queue"},
                               {"kueue.x-k8s.io/pod-group-name", "grp"}};
    p["metadata"]["annotations"] = {{"kueue.x-k8s.io/pod-group-total-count", "3"}};
    api_->Put("pods", p);
  }
  StartAll();
  for (int i = 0; i < 3; ++i) {
    auto p = state_.FindPodByName("serve", "grp-" + std::to_string(i));
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->gang, "kueue/grp");
    EXPECT_EQ(p->gang_size, 3);
    // Two of three nodes free: no member starts alone.
    const std::string why = Admit("serve", "grp-" + std::to_string(i));
    EXPECT_NE(why.find("gang kueue/grp needs 3 x"), std::string::npos) << why;
  }
  EXPECT_EQ(api_->requests("GET /apis/"), 0);
}

TEST_F(GangSourcesTest, SourceWithoutCrdSchedulesDeclaredPodsAlone) {
  api_->Put("nodes", NodeJson("gpu-0", 8));
  api_->Put("pods", PodGroupPod("train", "solo", 8, "nowhere"));
  StartAll();
  ASSERT_TRUE(WaitFor([&] {
    auto p = state_.FindPodByName("train", "solo");
    return p && p->gang.empty() && p->gang_size == 0;
  }));
}

}  // namespace
}  // namespace gpusched::testing
