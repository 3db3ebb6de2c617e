// Gangs from the declarations frameworks already put on pods: each pod is
// shaped the way its framework creates it (labels, annotations, owner
// references), and each owner object the way its CRD defines it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "scheduler/codec/extender_codec.h"
#include "scheduler/codec/gang_codec.h"

namespace gpusched {
namespace {

using Json = nlohmann::json;

Json Pod(Json labels, Json annotations = Json::object(), Json owners = Json::array()) {
  Json meta = {{"name", "p-0"}, {"namespace", "train"}, {"uid", "u-0"}};
  if (!labels.empty()) meta["labels"] = std::move(labels);
  if (!annotations.empty()) meta["annotations"] = std::move(annotations);
  if (!owners.empty()) meta["ownerReferences"] = std::move(owners);
  return {{"metadata", meta},
          {"spec",
           {{"containers",
             {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}}};
}

Json Owner(const std::string& api, const std::string& kind, const std::string& name,
           bool controller = true) {
  return Json::array({{{"apiVersion", api},
                       {"kind", kind},
                       {"name", name},
                       {"uid", "owner-uid"},
                       {"controller", controller},
                       {"blockOwnerDeletion", true}}});
}

TEST(GangDecodeTest, PodsAsFrameworksCreateThem) {
  struct Case {
    const char* name;
    Json pod;
    std::string gang;
    int32_t size;
    GangOwnerKind owner = GangOwnerKind::kNone;
    std::string owner_name = "";
  } cases[] = {
      {"no declaration", Pod(Json::object()), "", 0},
      {"scheduler-plugins PodGroup label (mpi-operator worker, also owned by its MPIJob)",
       Pod({{"scheduling.x-k8s.io/pod-group", "pi"},
            {"training.kubeflow.org/job-name", "pi"},
            {"training.kubeflow.org/job-role", "worker"},
            {"training.kubeflow.org/operator-name", "mpi-operator"},
            {"training.kubeflow.org/replica-index", "0"}},
           Json::object(), Owner("kubeflow.org/v2beta1", "MPIJob", "pi")),
       "pg/pi", kGangSizeUnknown, GangOwnerKind::kPodGroup, "pi"},
      {"Volcano job pod: group-name annotation",
       Pod({{"volcano.sh/job-name", "tf"}, {"volcano.sh/task-spec", "worker"}},
           {{"scheduling.k8s.io/group-name", "tf-3f9c"},
            {"volcano.sh/job-name", "tf"},
            {"volcano.sh/task-spec", "worker"}},
           Owner("batch.volcano.sh/v1alpha1", "Job", "tf")),
       "volcano/tf-3f9c", kGangSizeUnknown, GangOwnerKind::kVolcanoPodGroup, "tf-3f9c"},
      {"Volcano: scheduling.volcano.sh/group-name",
       Pod(Json::object(), {{"scheduling.volcano.sh/group-name", "pg-1"}}), "volcano/pg-1",
       kGangSizeUnknown, GangOwnerKind::kVolcanoPodGroup, "pg-1"},
      {"Kueue plain-pod group: size on the pod",
       Pod({{"kueue.x-k8s.io/queue-name", "user-queue"}, {"kueue.x-k8s.io/pod-group-name", "grp"}},
           {{"kueue.x-k8s.io/pod-group-total-count", "4"}}),
       "kueue/grp", 4},
      {"Kueue group without a total count waits (Kueue rejects such pods)",
       Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}}), "kueue/grp", kGangSizeUnknown},
      {"Kueue group with a zero count waits",
       Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}},
           {{"kueue.x-k8s.io/pod-group-total-count", "0"}}),
       "kueue/grp", kGangSizeUnknown},
      {"Kueue group with a non-numeric count waits",
       Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}},
           {{"kueue.x-k8s.io/pod-group-total-count", "four"}}),
       "kueue/grp", kGangSizeUnknown},
      {"LeaderWorkerSet worker: group key and size",
       Pod({{"leaderworkerset.sigs.k8s.io/name", "vllm"},
            {"leaderworkerset.sigs.k8s.io/group-index", "1"},
            {"leaderworkerset.sigs.k8s.io/worker-index", "2"},
            {"leaderworkerset.sigs.k8s.io/group-key", "ab78cb5390af86053cda5b5fbad00c73773216e3"}},
           {{"leaderworkerset.sigs.k8s.io/size", "4"},
            {"leaderworkerset.sigs.k8s.io/leader-name", "vllm-1"}}),
       "lws/ab78cb5390af86053cda5b5fbad00c73773216e3", 4},
      {"JobSet (a TrainJob's) pod: size from the JobSet",
       Pod({{"jobset.sigs.k8s.io/jobset-name", "llama"},
            {"jobset.sigs.k8s.io/replicatedjob-name", "node"},
            {"jobset.sigs.k8s.io/replicatedjob-replicas", "1"},
            {"jobset.sigs.k8s.io/job-index", "0"},
            {"batch.kubernetes.io/job-name", "llama-node-0"},
            {"job-name", "llama-node-0"}},
           Json::object(), Owner("batch/v1", "Job", "llama-node-0")),
       "jobset/llama", kGangSizeUnknown, GangOwnerKind::kJobSet, "llama"},
      {"PyTorchJob pod: controller owner",
       Pod({{"training.kubeflow.org/job-name", "bert"},
            {"training.kubeflow.org/replica-type", "worker"},
            {"training.kubeflow.org/replica-index", "1"},
            {"training.kubeflow.org/operator-name", "pytorchjob-controller"}},
           Json::object(), Owner("kubeflow.org/v1", "PyTorchJob", "bert")),
       "pytorchjob/bert", kGangSizeUnknown, GangOwnerKind::kPyTorchJob, "bert"},
      {"MPIJob (mpi-operator v2beta1) launcher",
       Pod({{"training.kubeflow.org/job-name", "pi"},
            {"training.kubeflow.org/job-role", "launcher"}},
           Json::object(), Owner("kubeflow.org/v2beta1", "MPIJob", "pi")),
       "mpijob/pi", kGangSizeUnknown, GangOwnerKind::kMpiJob, "pi"},
      {"PyTorchJob owner that is not the controller",
       Pod(Json::object(), Json::object(), Owner("kubeflow.org/v1", "PyTorchJob", "x", false)), "",
       0},
      {"MPIJob of an unserved version",
       Pod(Json::object(), Json::object(), Owner("kubeflow.org/v1", "MPIJob", "x")), "", 0},
      {"gpusched.io/gang wins over a PodGroup label",
       Pod({{"scheduling.x-k8s.io/pod-group", "pg"}},
           {{"gpusched.io/gang", "mine"}, {"gpusched.io/gang-size", "2"}}),
       "mine", 2},
      {"gpusched.io/gang-size alone wins too (no Job: runs alone, as documented)",
       Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}},
           {{"gpusched.io/gang-size", "2"}, {"kueue.x-k8s.io/pod-group-total-count", "4"}}),
       "", 2},
      {"PodGroup label wins over JobSet labels (TrainJob with coscheduling)",
       Pod({{"scheduling.x-k8s.io/pod-group", "llama"},
            {"jobset.sigs.k8s.io/jobset-name", "llama"}}),
       "pg/llama", kGangSizeUnknown, GangOwnerKind::kPodGroup, "llama"},
      {"labels of the wrong type are no declaration",
       [] {
         Json p = Pod(Json::object());
         p["metadata"]["labels"] = "scheduling.x-k8s.io/pod-group";
         return p;
       }(),
       "", 0},
      {"empty label value is no declaration", Pod({{"scheduling.x-k8s.io/pod-group", ""}}), "", 0},
  };
  codec::RequestDecoder d;
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string body = c.pod.dump();
    auto pod = d.DecodePodObject(body);
    ASSERT_TRUE(pod.ok()) << pod.status();
    EXPECT_EQ(pod->gang, c.gang);
    EXPECT_EQ(pod->gang_size, c.size);
    EXPECT_EQ(pod->gang_owner.kind, c.owner);
    EXPECT_EQ(pod->gang_owner.name, c.owner_name);
    EXPECT_EQ(pod->gpu.count, 8);
  }
}

// A count annotation that is missing or not a member count leaves the size
// unknown with the real reason, naming the annotation and the value.
TEST(GangDecodeTest, InvalidCountAnnotationsNameTheAnnotation) {
  const std::string kueue = "kueue.x-k8s.io/pod-group-total-count";
  const std::string lws = "leaderworkerset.sigs.k8s.io/size";
  struct Case {
    Json pod;
    std::string reason;
  } cases[] = {
      {Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}}),
       "annotation " + kueue + " is missing (it gives the group's member count)"},
      {Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}}, {{kueue, "0"}}),
       "annotation " + kueue + ": '0' is not a member count (1..100000)"},
      {Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}}, {{kueue, "-1"}}),
       "annotation " + kueue + ": '-1' is not a member count (1..100000)"},
      {Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}}, {{kueue, "abc"}}),
       "annotation " + kueue + ": 'abc' is not a member count (1..100000)"},
      {Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}}, {{kueue, "1000000000000"}}),
       "annotation " + kueue + ": '1000000000000' is not a member count (1..100000)"},
      {Pod({{"leaderworkerset.sigs.k8s.io/group-key", "k"}}, {{lws, "99999999999"}}),
       "annotation " + lws + ": '99999999999' is not a member count (1..100000)"},
  };
  codec::RequestDecoder d;
  for (auto& c : cases) {
    std::string body = c.pod.dump();
    auto pod = d.DecodePodObject(body);
    ASSERT_TRUE(pod.ok()) << pod.status();
    EXPECT_EQ(pod->gang_size, kGangSizeUnknown) << body;
    EXPECT_EQ(pod->gang_size_reason, c.reason) << body;
  }
  std::string valid = Pod({{"kueue.x-k8s.io/pod-group-name", "grp"}}, {{kueue, "4"}}).dump();
  auto pod = d.DecodePodObject(valid);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->gang_size, 4);
  EXPECT_EQ(pod->gang_size_reason, "");
}

TEST(GangDecodeTest, OwnerObjectSizes) {
  struct Case {
    const char* name;
    GangOwnerKind kind;
    Json body;
    int32_t size;       // when error is ""
    std::string error;  // substring
  } cases[] = {
      {"PodGroup minMember",
       GangOwnerKind::kPodGroup,
       {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
        {"kind", "PodGroup"},
        {"spec", {{"minMember", 3}, {"scheduleTimeoutSeconds", 10}}}},
       3,
       ""},
      {"PodGroup without minMember", GangOwnerKind::kPodGroup, {{"spec", Json::object()}}, 1, ""},
      {"PodGroup negative minMember",
       GangOwnerKind::kPodGroup,
       {{"spec", {{"minMember", -1}}}},
       0,
       "spec.minMember: negative"},
      {"PodGroup minMember as a string",
       GangOwnerKind::kPodGroup,
       {{"spec", {{"minMember", "3"}}}},
       0,
       "spec"},
      {"PodGroup too large",
       GangOwnerKind::kPodGroup,
       {{"spec", {{"minMember", 200000}}}},
       0,
       "at most 100000"},
      {"PodGroup without spec", GangOwnerKind::kPodGroup, {{"kind", "PodGroup"}}, 0, "spec"},
      {"Volcano PodGroup",
       GangOwnerKind::kVolcanoPodGroup,
       {{"apiVersion", "scheduling.volcano.sh/v1beta1"},
        {"spec", {{"minMember", 2}, {"queue", "default"}, {"minTaskMember", {{"worker", 2}}}}}},
       2,
       ""},
      {"JobSet: replicas x parallelism over replicated jobs",
       GangOwnerKind::kJobSet,
       {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
        {"spec",
         {{"replicatedJobs",
           {{{"name", "node"},
             {"replicas", 2},
             {"template", {{"spec", {{"parallelism", 4}, {"completions", 4}}}}}},
            {{"name", "initializer"}, {"template", {{"spec", Json::object()}}}}}}}}},
       9,
       ""},
      {"JobSet without replicatedJobs",
       GangOwnerKind::kJobSet,
       {{"spec", Json::object()}},
       0,
       "spec.replicatedJobs"},
      {"JobSet negative parallelism",
       GangOwnerKind::kJobSet,
       {{"spec", {{"replicatedJobs", {{{"template", {{"spec", {{"parallelism", -2}}}}}}}}}}},
       0,
       "spec.replicatedJobs[0].template.spec.parallelism: negative"},
      {"PyTorchJob: master + workers",
       GangOwnerKind::kPyTorchJob,
       {{"apiVersion", "kubeflow.org/v1"},
        {"spec",
         {{"pytorchReplicaSpecs",
           {{"Master", {{"replicas", 1}, {"restartPolicy", "OnFailure"}}},
            {"Worker", {{"replicas", 3}}}}}}}},
       4,
       ""},
      {"PyTorchJob: schedulingPolicy.minAvailable (elastic)",
       GangOwnerKind::kPyTorchJob,
       {{"spec",
         {{"runPolicy", {{"schedulingPolicy", {{"minAvailable", 2}}}}},
          {"pytorchReplicaSpecs",
           {{"Master", {{"replicas", 1}}}, {"Worker", {{"replicas", 7}}}}}}}},
       2,
       ""},
      {"MPIJob: launcher + workers",
       GangOwnerKind::kMpiJob,
       {{"apiVersion", "kubeflow.org/v2beta1"},
        {"spec",
         {{"slotsPerWorker", 8},
          {"mpiReplicaSpecs", {{"Launcher", {{"replicas", 1}}}, {"Worker", {{"replicas", 4}}}}}}}},
       5,
       ""},
      {"MPIJob without replica specs",
       GangOwnerKind::kMpiJob,
       {{"spec", Json::object()}},
       0,
       "spec.mpiReplicaSpecs"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto size = codec::DecodeGangOwnerSize(c.kind, c.body.dump());
    if (c.error.empty()) {
      ASSERT_TRUE(size.ok()) << size.status();
      EXPECT_EQ(*size, c.size);
    } else {
      ASSERT_FALSE(size.ok()) << *size;
      EXPECT_NE(std::string(size.status().message()).find(c.error), std::string::npos)
          << size.status();
    }
  }
  EXPECT_FALSE(codec::DecodeGangOwnerSize(GangOwnerKind::kPodGroup, "{not json").ok());
  EXPECT_FALSE(codec::DecodeGangOwnerSize(GangOwnerKind::kPodGroup, "[1]").ok());
}

TEST(GangDecodeTest, KeysAreDistinctPerKind) {
  for (GangOwnerKind a :
       {GangOwnerKind::kPodGroup, GangOwnerKind::kVolcanoPodGroup, GangOwnerKind::kJobSet,
        GangOwnerKind::kPyTorchJob, GangOwnerKind::kMpiJob}) {
    for (GangOwnerKind b :
         {GangOwnerKind::kPodGroup, GangOwnerKind::kVolcanoPodGroup, GangOwnerKind::kJobSet,
          GangOwnerKind::kPyTorchJob, GangOwnerKind::kMpiJob}) {
      if (a != b) {
        EXPECT_NE(codec::GangOwnerApiOf(a).key_prefix, codec::GangOwnerApiOf(b).key_prefix);
      }
    }
  }
}

}  // namespace
}  // namespace gpusched
