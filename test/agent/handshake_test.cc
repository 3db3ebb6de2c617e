// The handshake's choices (which pod an admission is for, which devices it
// gets) and the reconciliation's plan, on a DGX-1 V100 (hybrid cube-mesh).
#include "scheduler/agent/handshake.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/agent/gpu_inventory.h"
#include "scheduler/agent/nvidia_smi_topo.h"
#include "scheduler/agent/reconcile.h"

namespace gpusched::agent {
namespace {

using codec::NodePodRecord;

std::string Testdata(const std::string& name) {
  std::ifstream in(absl::StrCat(GPUSCHED_AGENT_TESTDATA, "/", name));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

DeviceMask Mask(std::initializer_list<int> ids) {
  DeviceMask m = 0;
  for (int i : ids) m |= DeviceMask{1} << i;
  return m;
}

NodePodRecord Pod(const std::string& name, int gpus, std::optional<std::string> ids,
                  const std::string& phase = "Pending") {
  NodePodRecord p;
  p.ns = "team-a";
  p.name = name;
  p.uid = "uid-" + name;
  p.node_name = "dgx1";
  p.phase = phase;
  p.containers.push_back({"main", gpus, 0});
  p.gpu_ids = std::move(ids);
  return p;
}

class HandshakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topology_ = *GpuTopology::FromCodes(*ParseNvidiaSmiTopo(Testdata("dgx1_v100.txt")));
  }
  HandshakeInput Input(int size, DeviceMask available) {
    HandshakeInput in;
    in.size = size;
    in.available = available;
    in.node = "dgx1";
    in.pods = &pods_;
    in.allocated = &alloc_;
    in.topology = topology_.get();
    in.device_count = 8;
    return in;
  }
  std::shared_ptr<const GpuTopology> topology_;
  std::vector<NodePodRecord> pods_;
  NodeAllocations alloc_;
};

TEST_F(HandshakeTest, TheUniqueCandidateGetsItsRecordedDevices) {
  pods_ = {Pod("a", 2, "4,5"), Pod("running", 2, "0,1", "Running"), Pod("other-size", 4, "")};
  auto r = ChooseDevices(Input(2, Mask({2, 3, 4, 5, 6, 7})));
  EXPECT_EQ(r.source, ChoiceSource::kRecord);
  EXPECT_EQ(r.uid, "uid-a");
  EXPECT_EQ(r.devices, Mask({4, 5}));
}

TEST_F(HandshakeTest, AnAllocatedPodIsNoLongerACandidate) {
  pods_ = {Pod("a", 2, "4,5"), Pod("b", 2, "6,7")};
  alloc_.whole["uid-a"] = Mask({4, 5});
  auto r = ChooseDevices(Input(2, Mask({0, 1, 2, 3, 6, 7})));
  EXPECT_EQ(r.source, ChoiceSource::kRecord);
  EXPECT_EQ(r.uid, "uid-b");
  EXPECT_EQ(r.devices, Mask({6, 7}));
}

TEST_F(HandshakeTest, TwoCandidatesOfOneSizeGetNeitherRecord) {
  pods_ = {Pod("a", 2, "4,5"), Pod("b", 2, "6,7")};
  auto r = ChooseDevices(Input(2, 0xff));
  EXPECT_EQ(r.source, ChoiceSource::kAmbiguous);
  EXPECT_EQ(r.uid, "");
  EXPECT_EQ(PopCount(r.devices), 2);
  EXPECT_EQ(r.devices & Mask({4, 5, 6, 7}), 0u) << FormatMask(r.devices);
  EXPECT_TRUE(topology_->AllNvlink(r.devices)) << FormatMask(r.devices);
}

TEST_F(HandshakeTest, UnavailableRecordFallsBackAvoidingOtherPendingRecords) {
  pods_ = {Pod("a", 2, "0,1"), Pod("b", 4, "4,5,6,7")};
  auto r = ChooseDevices(Input(2, Mask({1, 2, 3, 4, 5, 6, 7})));
  EXPECT_EQ(r.source, ChoiceSource::kRecordUnavailable);
  EXPECT_EQ(r.uid, "uid-a");
  // An NV2 pair among the free devices b did not record.
  EXPECT_EQ(PopCount(r.devices), 2);
  EXPECT_EQ(r.devices & ~Mask({1, 2, 3}), 0u) << FormatMask(r.devices);
  EXPECT_EQ(topology_->SetScore(r.devices), 200) << FormatMask(r.devices);
}

TEST_F(HandshakeTest, RecordNamingAMissingDeviceIsInvalid) {
  pods_ = {Pod("a", 2, "7,9")};
  auto r = ChooseDevices(Input(2, 0xff));
  EXPECT_EQ(r.source, ChoiceSource::kRecordInvalid);
  EXPECT_EQ(PopCount(r.devices), 2);
  pods_ = {Pod("a", 2, "1,x")};
  EXPECT_EQ(ChooseDevices(Input(2, 0xff)).source, ChoiceSource::kRecordInvalid);
}

TEST_F(HandshakeTest, NoCandidateGetsTheBestNvlinkSet) {
  auto r = ChooseDevices(Input(4, 0xff));
  EXPECT_EQ(r.source, ChoiceSource::kNoCandidate);
  EXPECT_TRUE(topology_->AllNvlink(r.devices)) << FormatMask(r.devices);
  EXPECT_EQ(PopCount(r.devices), 4);
}

TEST_F(HandshakeTest, MustIncludeDevicesAreKept) {
  pods_ = {Pod("a", 2, "4,5")};
  auto in = Input(2, 0xff);
  in.must_include = Mask({0});
  auto r = ChooseDevices(in);
  EXPECT_EQ(r.source, ChoiceSource::kRecordUnavailable);
  EXPECT_EQ(r.devices & Mask({0}), Mask({0}));
  EXPECT_EQ(PopCount(r.devices), 2);
}

TEST_F(HandshakeTest, AllocationIsTiedToThePreferredPodOrTheMatchingRecord) {
  pods_ = {Pod("a", 2, "4,5"), Pod("b", 2, "6,7")};
  DeviceChoiceResult pref{ChoiceSource::kRecord, "uid-a", "team-a/a", Mask({4, 5}), ""};
  EXPECT_EQ(IdentifyAllocation(Input(2, 0xff), Mask({4, 5}), &pref).uid, "uid-a");
  // No preference: the record that equals the grant tells the pod.
  auto r = IdentifyAllocation(Input(2, 0xff), Mask({6, 7}), nullptr);
  EXPECT_EQ(r.uid, "uid-b");
  EXPECT_EQ(r.source, ChoiceSource::kRecord);
  // Neither record: two candidates, nobody can be told.
  EXPECT_EQ(IdentifyAllocation(Input(2, 0xff), Mask({0, 1}), nullptr).uid, "");
  // One candidate left: it is the one, not as recorded.
  alloc_.whole["uid-b"] = Mask({6, 7});
  r = IdentifyAllocation(Input(2, 0xff), Mask({0, 1}), nullptr);
  EXPECT_EQ(r.uid, "uid-a");
  EXPECT_EQ(r.source, ChoiceSource::kRecordUnavailable);
}

TEST_F(HandshakeTest, SharedPodGetsItsRecordedDevice) {
  NodePodRecord s = Pod("half", 0, "3");
  s.containers[0].shares = 1;
  s.gpu_milli = "500";
  pods_ = {s, Pod("whole", 1, "2")};
  auto in = Input(1, 0xff);
  in.kind = ResourceKind::kGpuShare;
  auto r = ChooseDevices(in);
  EXPECT_EQ(r.source, ChoiceSource::kRecord);
  EXPECT_EQ(r.uid, "uid-half");
  EXPECT_EQ(r.devices, Mask({3}));
}

TEST_F(HandshakeTest, ReconcileCorrectsDriftAndConfirmsTheRest) {
  DeviceTable table;
  table.Update(*ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv")));
  const std::string u = "GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d4000";
  pods_ = {Pod("drifted", 2, "4,5", "Running"), Pod("fine", 2, "2,3", "Running"),
           Pod("done", 1, "6", "Running"), Pod("unrecorded", 1, std::nullopt, "Running")};
  pods_[2].gpu_ids_confirmed = "6";
  std::vector<KubeletPod> kubelet = {
      {"team-a", "drifted", {u + "0", u + "1"}, {}},
      {"team-a", "fine", {"2", "3"}, {}},  // NVIDIA's index strategy
      {"team-a", "done", {u + "6"}, {}},
      {"team-a", "unrecorded", {u + "7", "GPU-nope"}, {}},
      {"team-a", "gone", {u + "0"}, {}},  // not in the API list
  };
  auto assigned = ResolveKubeletPods(kubelet, table, pods_);
  ASSERT_EQ(assigned.size(), 5u);
  EXPECT_EQ(assigned[3].unknown_ids, std::vector<std::string>{"GPU-nope"});
  auto fixes = PlanRecordFixes(assigned, pods_);
  ASSERT_EQ(fixes.size(), 3u);
  EXPECT_EQ(fixes[0].name, "drifted");
  EXPECT_TRUE(fixes[0].correction);
  EXPECT_EQ(fixes[0].recorded, "4,5");
  EXPECT_EQ(fixes[0].actual, "0,1");
  EXPECT_EQ(fixes[1].name, "fine");
  EXPECT_FALSE(fixes[1].correction);
  EXPECT_EQ(fixes[2].name, "unrecorded");
  EXPECT_TRUE(fixes[2].correction);
  EXPECT_EQ(fixes[2].actual, "7");
  NodeAllocations alloc = AllocationsFrom(assigned);
  EXPECT_EQ(alloc.whole.at("uid-drifted"), Mask({0, 1}));
  EXPECT_EQ(alloc.whole.at("team-a/gone"), Mask({0}));
}

}  // namespace
}  // namespace gpusched::agent
