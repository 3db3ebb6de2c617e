// A bound pod's device record as the extender reads it from the API:
// gpusched.io/gpu-ids (what gpusched's accounting counts, corrected by the
// node agent when the kubelet assigned other devices) and
// gpusched.io/gpu-ids-confirmed (the agent's confirmation, shown only), and
// the /debug/pods answer that shows both.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "scheduler/codec/extender_codec.h"
#include "scheduler/codec/queue_codec.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

using json = nlohmann::json;

// A 2-GPU pod bound to the DGX-1 "n1" with the given annotations.
std::string BoundPodText(const std::optional<std::string>& ids,
                         const std::optional<std::string>& confirmed) {
  json ann = json::object();
  if (ids) ann["gpusched.io/gpu-ids"] = *ids;
  if (confirmed) ann["gpusched.io/gpu-ids-confirmed"] = *confirmed;
  json pod = {
      {"metadata", {{"name", "a"}, {"namespace", "t"}, {"uid", "uid-a"}, {"annotations", ann}}},
      {"spec",
       {{"nodeName", "n1"},
        {"containers",
         {{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}}}}}},
      {"status", {{"phase", "Running"}}}};
  return pod.dump();
}

class DeviceRecordsTest : public ::testing::Test {
 protected:
  PodRequest Decode(const std::optional<std::string>& ids,
                    const std::optional<std::string>& confirmed) {
    std::string text = BoundPodText(ids, confirmed);
    auto pod = decoder_.DecodePodObject(text);
    EXPECT_TRUE(pod.ok()) << pod.status();
    return pod.ok() ? *pod : PodRequest{};
  }
  codec::RequestDecoder decoder_;
};

TEST_F(DeviceRecordsTest, ConfirmationIsReadBesideTheRecord) {
  PodRequest p = Decode("4,5", "4,5");
  EXPECT_TRUE(p.has_gpu_ids);
  EXPECT_EQ(p.gpu_ids, Devices({4, 5}));
  EXPECT_TRUE(p.has_gpu_ids_confirmed);
  EXPECT_EQ(p.gpu_ids_confirmed, Devices({4, 5}));

  p = Decode("4,5", std::nullopt);
  EXPECT_FALSE(p.has_gpu_ids_confirmed);
  // A confirmation that does not read is no confirmation, and no error.
  p = Decode("4,5", "4,x");
  EXPECT_TRUE(p.has_gpu_ids);
  EXPECT_FALSE(p.has_gpu_ids_confirmed);
  // An empty confirmation: the kubelet assigned no device.
  p = Decode("", "");
  EXPECT_TRUE(p.has_gpu_ids_confirmed);
  EXPECT_EQ(p.gpu_ids_confirmed, 0u);
}

TEST_F(DeviceRecordsTest, AnUnconfirmedRecordHoldsItsDevices) {
  auto state = MakeState({Dgx1V100("n1")}, {Decode("4,5", std::nullopt)});
  const NodeInfo* n = state->Snapshot()->Find("n1");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->whole_free, 0xffu & ~Devices({4, 5}));
  ASSERT_EQ(n->pods.size(), 1u);
  EXPECT_EQ(n->pods[0].devices, Devices({4, 5}));
  EXPECT_TRUE(n->pods[0].devices_known);
}

TEST_F(DeviceRecordsTest, ACorrectedRecordMovesTheDevices) {
  auto state = MakeState({Dgx1V100("n1")}, {Decode("4,5", std::nullopt)});
  // The agent found the kubelet assigned 0,1: record corrected and confirmed.
  state->UpsertPod(Decode("0,1", "0,1"));
  state->Commit();
  const NodeInfo* n = state->Snapshot()->Find("n1");
  EXPECT_EQ(n->whole_free, 0xffu & ~Devices({0, 1}));
  EXPECT_EQ(n->pods[0].devices, Devices({0, 1}));
  auto held = state->FindPodByName("t", "a");
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(held->has_gpu_ids_confirmed);
  EXPECT_EQ(held->gpu_ids_confirmed, Devices({0, 1}));
}

TEST(PodReportCodecTest, BoundPodShowsItsDevices) {
  queue::PodReport r;
  r.ns = "t";
  r.name = "a";
  r.uid = "uid-a";
  r.state = "bound";
  r.node = "n1";
  r.shows_devices = true;
  r.recorded_devices = Devices({4, 5});
  r.counted_devices = Devices({4, 5});
  EXPECT_EQ(json::parse(codec::EncodePodReport(r)), json::parse(R"({
    "namespace": "t", "name": "a", "uid": "uid-a", "state": "bound", "node": "n1",
    "recordedGpuIds": "4,5", "confirmedGpuIds": null, "countedGpuIds": "4,5"})"));
  r.confirmed_devices = Devices({0, 1});
  r.recorded_devices = Devices({0, 1});
  r.counted_devices = Devices({0, 1});
  auto j = json::parse(codec::EncodePodReport(r));
  EXPECT_EQ(j["recordedGpuIds"], "0,1");
  EXPECT_EQ(j["confirmedGpuIds"], "0,1");
  // No GPUs (or not bound): no device keys.
  r.shows_devices = false;
  EXPECT_FALSE(json::parse(codec::EncodePodReport(r)).contains("recordedGpuIds"));
}

}  // namespace
}  // namespace gpusched::testing
