// The small Kubernetes API bodies gpusched reads outside list/watch: Status,
// a Pod's nodeName, Leases. Members of an unexpected type are ignored, never
// thrown on (a libFuzzer find: "kind" as an object used to abort).
#include "scheduler/codec/kube_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace gpusched::codec {
namespace {

TEST(KubeCodecTest, StatusBodies) {
  struct Case {
    std::string body;
    int code;
    std::string reason;
  };
  const Case cases[] = {
      {R"({"kind":"Status","code":410,"reason":"Expired","message":"too old"})", 410, "Expired"},
      {R"({"kind":"Status","code":409,"reason":"AlreadyExists"})", 409, "AlreadyExists"},
      {R"({"kind":{"resourceVersion":"20"},"code":410})", 0, ""},
      {R"({"kind":"Status","code":"410","reason":7})", 0, ""},
      {R"({"kind":"Status","code":99999999999,"reason":"Huge"})", 0, "Huge"},
      {R"({"kind":"Pod","code":410})", 0, ""},
      {R"(["Status"])", 0, ""},
      {"not json", 0, ""},
  };
  for (const Case& c : cases) {
    KubeStatus s = DecodeStatus(c.body);
    EXPECT_EQ(s.code, c.code) << c.body;
    EXPECT_EQ(s.reason, c.reason) << c.body;
  }
}

TEST(KubeCodecTest, PodNodeNameAndLeaseIgnoreMistypedMembers) {
  EXPECT_EQ(*DecodePodNodeName(R"({"spec":{"nodeName":"gpu-1"}})"), "gpu-1");
  EXPECT_EQ(*DecodePodNodeName(R"({"spec":{"nodeName":["gpu-1"]}})"), "");
  EXPECT_EQ(*DecodePodNodeName(R"({"spec":"gpu-1"})"), "");
  EXPECT_FALSE(DecodePodNodeName("[1]").ok());

  auto lease = DecodeLease(
      R"({"metadata":{"resourceVersion":"7"},"spec":{"holderIdentity":"a",
          "leaseDurationSeconds":15,"leaseTransitions":2}})");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->holder, "a");
  EXPECT_EQ(lease->duration_seconds, 15);
  EXPECT_EQ(lease->transitions, 2);
  EXPECT_EQ(lease->resource_version, "7");
  auto odd = DecodeLease(
      R"({"metadata":{"resourceVersion":7},"spec":{"holderIdentity":{"x":1},
          "leaseDurationSeconds":"15"}})");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->holder, "");
  EXPECT_EQ(odd->duration_seconds, 0);
  EXPECT_EQ(odd->resource_version, "");
  EXPECT_FALSE(DecodeLease("{").ok());
}

// A list page: the metadata callback sees the resourceVersion and continue
// token before any item is decoded, and only for a well-formed page; bad
// items are listed, not fatal.
TEST(KubeCodecTest, ListPageMetadataComesFirst) {
  const std::string pod =
      R"({"metadata":{"name":"p","namespace":"a","uid":"u1","annotations":{)"
      R"("gpusched.io/gpu-ids":"0,1"}},"spec":{"nodeName":"n1","containers":[{"name":"c",)"
      R"("resources":{"limits":{"nvidia.com/gpu":"2"}}}]},"status":{"phase":"Running"}})";
  struct Case {
    std::string body;
    bool ok;
    bool called;  // the callback ran
    size_t pods, bad;
  };
  const Case cases[] = {
      {R"({"metadata":{"resourceVersion":"7","continue":"c1"},"items":[)" + pod + R"(,)" +
           R"({"metadata":{"name":"q","namespace":"a","uid":"u2"},"spec":"x"}]})",
       true, true, 1, 1},
      {R"({"metadata":{"resourceVersion":"7","continue":"c1"},"items":{}})", false, false, 0, 0},
      {R"({"metadata":{"resourceVersion":"7")", false, false, 0, 0},
      {R"({"metadata":{"resourceVersion":"7","continue":"c1"}})", true, true, 0, 0},
  };
  for (const Case& c : cases) {
    KubeDecoder dec;
    std::string body = c.body;
    bool called = false;
    auto page = dec.DecodeListPage(body, ObjectKind::kPod, [&](const ListPage& meta) {
      called = true;
      EXPECT_EQ(meta.resource_version, "7");
      EXPECT_EQ(meta.continue_token, "c1");
      EXPECT_TRUE(meta.pods.empty());
    });
    EXPECT_EQ(page.ok(), c.ok) << c.body;
    EXPECT_EQ(called, c.called) << c.body;
    if (!page.ok()) continue;
    EXPECT_EQ(page->pods.size(), c.pods) << c.body;
    EXPECT_EQ(page->bad_items.size(), c.bad) << c.body;
    if (c.pods > 0) {
      EXPECT_EQ(page->pods[0].pod.uid, "u1");
      EXPECT_EQ(page->pods[0].raw_gpu_ids, "0,1");
    }
  }
}

}  // namespace
}  // namespace gpusched::codec
