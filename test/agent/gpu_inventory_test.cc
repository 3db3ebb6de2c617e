// nvidia-smi --query-gpu parser and the device table: canned outputs of a
// DGX-1 V100, one with a device lost and one with ECC errors, and malformed
// inputs that must give an error naming the line and column.
#include "scheduler/agent/gpu_inventory.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gpusched::agent {
namespace {

std::string Testdata(const std::string& name) {
  std::ifstream in(absl::StrCat(GPUSCHED_AGENT_TESTDATA, "/", name));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(NvidiaSmiQueryTest, ReadsEveryDeviceOfADgx1) {
  auto r = ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->devices.size(), 8u);
  EXPECT_TRUE(r->lost_bus_ids.empty());
  EXPECT_EQ(r->devices[5].index, 5);
  EXPECT_EQ(r->devices[5].uuid, "GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d40005");
  EXPECT_EQ(r->devices[5].memory_mib, 32768);
  EXPECT_EQ(r->devices[5].bus_id, "0000:86:00.0");
  for (const GpuDevice& d : r->devices) EXPECT_TRUE(d.healthy) << d.index;
}

TEST(NvidiaSmiQueryTest, LostDeviceAndEccErrorsAreUnhealthy) {
  DeviceTable table;
  table.Update(*ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv")));
  auto r = ParseNvidiaSmiQuery(Testdata("dgx1_v100_query_lost.csv"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->devices.size(), 7u);
  ASSERT_EQ(r->lost_bus_ids.size(), 1u);
  EXPECT_EQ(r->lost_bus_ids[0], "0000:0b:00.0");
  EXPECT_TRUE(table.Update(*r));
  ASSERT_EQ(table.devices().size(), 8u);  // the lost device stays, unhealthy
  EXPECT_FALSE(table.devices()[3].healthy);
  EXPECT_TRUE(absl::StrContains(table.devices()[3].health_reason, "lost"));
  EXPECT_FALSE(table.devices()[6].healthy);
  EXPECT_TRUE(absl::StrContains(table.devices()[6].health_reason, "ECC"));
  for (int i : {0, 1, 2, 4, 5, 7}) EXPECT_TRUE(table.devices()[i].healthy) << i;
  EXPECT_FALSE(table.Update(*r));  // nothing new
  EXPECT_TRUE(table.Update(*ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv"))));
  EXPECT_TRUE(table.devices()[3].healthy);
}

TEST(NvidiaSmiQueryTest, DeviceErrorInItsFieldsIsUnhealthy) {
  auto r = ParseNvidiaSmiQuery(Testdata("pcie_4x_t4_query_gpu_lost.csv"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->devices.size(), 4u);
  EXPECT_FALSE(r->devices[2].healthy);
  EXPECT_TRUE(absl::StrContains(r->devices[2].health_reason, "GPU is lost"));
  EXPECT_TRUE(r->devices[0].healthy);  // [N/A] ECC is no error
}

TEST(NvidiaSmiQueryTest, ResolvesUuidsIndicesAndReplicas) {
  DeviceTable table;
  table.Update(*ParseNvidiaSmiQuery(Testdata("dgx1_v100_query.csv")));
  EXPECT_EQ(table.ResolveDeviceId("GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d40004"), 4);
  EXPECT_EQ(table.ResolveDeviceId("GPU-3f1c2a7e-5b0d-4e8a-9c41-a1b2c3d40004::3"), 4);
  EXPECT_EQ(table.ResolveDeviceId("6"), 6);
  EXPECT_EQ(table.ResolveDeviceId("8"), std::nullopt);
  EXPECT_EQ(table.ResolveDeviceId("GPU-unknown"), std::nullopt);
}

struct BadCase {
  std::string name, text, expected;
};

TEST(NvidiaSmiQueryTest, MalformedOutputIsAnErrorNamingTheField) {
  const std::string header = "index, uuid, memory.total [MiB]\n";
  const BadCase cases[] = {
      {"empty", "", "no header"},
      {"no uuid column", "index, memory.total\n0, 100\n", "no column 'uuid'"},
      {"short row", header + "0, GPU-a\n", "line 2: 2 fields, header has 3"},
      {"bad index", header + "x, GPU-a, 10\n", "line 2, column index: 'x'"},
      {"negative index", header + "-1, GPU-a, 10\n", "column index"},
      {"bad uuid", header + "0, abc, 10\n", "column uuid: 'abc'"},
      {"bad memory", header + "0, GPU-a, lots\n", "column memory.total: 'lots'"},
      {"repeated index", header + "0, GPU-a, 10\n0, GPU-b, 10\n", "index 0 repeated"},
      {"repeated uuid", header + "0, GPU-a, 10\n1, GPU-a, 10\n", "uuid GPU-a repeated"},
      {"binary", std::string("\0\xff,\n\x01", 5), "no column"},
  };
  for (const BadCase& c : cases) {
    auto r = ParseNvidiaSmiQuery(c.text);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.expected))
        << c.name << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace gpusched::agent
