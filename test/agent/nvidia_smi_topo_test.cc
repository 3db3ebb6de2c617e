#include "scheduler/agent/nvidia_smi_topo.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/codec/kube_codec.h"

namespace gpusched::agent {
namespace {

using Matrix = std::vector<std::vector<std::string>>;

std::string ReadTestdata(const std::string& name) {
  std::ifstream in(absl::StrCat(GPUSCHED_AGENT_TESTDATA, "/", name));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct FileCase {
  std::string file;
  Matrix expected;
};

const std::vector<FileCase>& FileCases() {
  static const auto* cases = new std::vector<FileCase>{
      {"dgx1_v100.txt",
       {{"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"},
        {"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
        {"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"},
        {"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
        {"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"},
        {"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
        {"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"},
        {"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"}}},
      {"dgx_a100.txt",
       {{"X", "NV12", "NV12", "NV12", "NV12", "NV12", "NV12", "NV12"},
        {"NV12", "X", "NV12", "NV12", "NV12", "NV12", "NV12", "NV12"},
        {"NV12", "NV12", "X", "NV12", "NV12", "NV12", "NV12", "NV12"},
        {"NV12", "NV12", "NV12", "X", "NV12", "NV12", "NV12", "NV12"},
        {"NV12", "NV12", "NV12", "NV12", "X", "NV12", "NV12", "NV12"},
        {"NV12", "NV12", "NV12", "NV12", "NV12", "X", "NV12", "NV12"},
        {"NV12", "NV12", "NV12", "NV12", "NV12", "NV12", "X", "NV12"},
        {"NV12", "NV12", "NV12", "NV12", "NV12", "NV12", "NV12", "X"}}},
      {"hgx_h100.txt",
       {{"X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"},
        {"NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"},
        {"NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18"},
        {"NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18"},
        {"NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18"},
        {"NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18"},
        {"NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18"},
        {"NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X"}}},
      {"pcie_4x_t4.txt",
       {{"X", "PIX", "SYS", "SYS"},
        {"PIX", "X", "SYS", "SYS"},
        {"SYS", "SYS", "X", "PIX"},
        {"SYS", "SYS", "PIX", "X"}}},
      {"dgx1_p100_soc.txt",
       {{"X", "NV1", "NV1", "NV1", "NV1", "SYS", "SYS", "SYS"},
        {"NV1", "X", "NV1", "NV1", "SYS", "NV1", "SYS", "SYS"},
        {"NV1", "NV1", "X", "NV1", "SYS", "SYS", "NV1", "SYS"},
        {"NV1", "NV1", "NV1", "X", "SYS", "SYS", "SYS", "NV1"},
        {"NV1", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV1"},
        {"SYS", "NV1", "SYS", "SYS", "NV1", "X", "NV1", "NV1"},
        {"SYS", "SYS", "NV1", "SYS", "NV1", "NV1", "X", "NV1"},
        {"SYS", "SYS", "SYS", "NV1", "NV1", "NV1", "NV1", "X"}}},
  };
  return *cases;
}

TEST(ParseNvidiaSmiTopoTest, TestdataFilesParseToExpectedMatrix) {
  for (const FileCase& c : FileCases()) {
    SCOPED_TRACE(c.file);
    const std::string text = ReadTestdata(c.file);
    ASSERT_FALSE(text.empty()) << "cannot read testdata file " << c.file;
    const auto m = ParseNvidiaSmiTopo(text);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(*m, c.expected);
  }
}

TEST(ParseNvidiaSmiTopoTest, IgnoresNicColumnsRowsAndAffinity) {
  const std::string text =
      "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
      "GPU0\t X \tNV4\tPIX\tSYS\t0-15\t0\t\tN/A\n"
      "GPU1\tNV4\t X \tSYS\tPIX\t16-31\t1\t\tN/A\n"
      "NIC0\tPIX\tSYS\t X \tSYS\n"
      "NIC1\tSYS\tPIX\tSYS\t X \n"
      "\n"
      "Legend:\n\n"
      "  X    = Self\n"
      "  NV#  = Connection traversing a bonded set of # NVLinks\n"
      "\n"
      "NIC Legend:\n\n"
      "  NIC0: mlx5_0\n"
      "  NIC1: mlx5_1\n";
  const auto m = ParseNvidiaSmiTopo(text);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, (Matrix{{"X", "NV4"}, {"NV4", "X"}}));
}

TEST(ParseNvidiaSmiTopoTest, AcceptsSpacesAnsiEscapesAndCrLf) {
  const std::string text =
      "\x1b[4m        GPU0    GPU1    GPU2    CPU Affinity\x1b[0m\r\n"
      "GPU0     X      NODE    SYS     0-7\r\n"
      "GPU1    NODE     X      SYS     0-7\r\n"
      "GPU2    SYS     SYS      X      8-15\r\n";
  const auto m = ParseNvidiaSmiTopo(text);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, (Matrix{{"X", "NODE", "SYS"}, {"NODE", "X", "SYS"}, {"SYS", "SYS", "X"}}));
}

TEST(ParseNvidiaSmiTopoTest, MapsLegacySocToSys) {
  const std::string text =
      "\tGPU0\tGPU1\tCPU Affinity\n"
      "GPU0\t X \tSOC\t0-9\n"
      "GPU1\tSOC\t X \t10-19\n";
  const auto m = ParseNvidiaSmiTopo(text);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, (Matrix{{"X", "SYS"}, {"SYS", "X"}}));
}

TEST(ParseNvidiaSmiTopoTest, SingleGpu) {
  const auto m = ParseNvidiaSmiTopo("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-3\t0\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, (Matrix{{"X"}}));
}

struct BadCase {
  std::string name;
  std::string text;
  std::vector<std::string> message_parts;
};

TEST(ParseNvidiaSmiTopoTest, BadInputsAreInvalidArgument) {
  const std::vector<BadCase> cases = {
      {"empty", "", {"no GPU header"}},
      {"legend only", "Legend:\n\n  X    = Self\n", {"no GPU header"}},
      {"truncated row",
       "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
       "GPU0\t X \tNV2\tPIX\t0-7\n"
       "GPU1\tNV2\n",
       {"GPU1", "truncated"}},
      {"missing row",
       "\tGPU0\tGPU1\tGPU2\n"
       "GPU0\t X \tNV1\tNV1\n"
       "GPU1\tNV1\t X \tNV1\n",
       {"not square", "GPU2"}},
      {"extra row",
       "\tGPU0\tGPU1\n"
       "GPU0\t X \tNV1\n"
       "GPU1\tNV1\t X \n"
       "GPU2\tNV1\tNV1\t X \n",
       {"not square", "GPU2"}},
      {"unknown code NV",
       "\tGPU0\tGPU1\tGPU2\n"
       "GPU0\t X \tNV1\tSYS\n"
       "GPU1\tNV1\t X \tNV\n"
       "GPU2\tSYS\tNV\t X \n",
       {"unknown link code \"NV\"", "row GPU1", "column GPU2"}},
      {"unknown code word",
       "\tGPU0\tGPU1\n"
       "GPU0\t X \tQPI\n"
       "GPU1\tQPI\t X \n",
       {"unknown link code \"QPI\"", "row GPU0", "column GPU1"}},
      {"asymmetric",
       "\tGPU0\tGPU1\tGPU2\n"
       "GPU0\t X \tNV1\tNV2\n"
       "GPU1\tNV1\t X \tSYS\n"
       "GPU2\tNV1\tSYS\t X \n",
       {"asymmetric", "row GPU0, column GPU2", "row GPU2, column GPU0"}},
      {"missing X",
       "\tGPU0\tGPU1\n"
       "GPU0\t X \tNV1\n"
       "GPU1\tNV1\tNV1\n",
       {"diagonal", "row GPU1", "column GPU1"}},
      {"X off diagonal",
       "\tGPU0\tGPU1\n"
       "GPU0\t X \t X \n"
       "GPU1\t X \t X \n",
       {"off the diagonal", "row GPU0", "column GPU1"}},
      {"rows out of order",
       "\tGPU0\tGPU1\n"
       "GPU1\tNV1\t X \n"
       "GPU0\t X \tNV1\n",
       {"GPU1", "out of order"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto m = ParseNvidiaSmiTopo(c.text);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.message_parts) {
      EXPECT_TRUE(absl::StrContains(m.status().message(), part))
          << "message \"" << m.status().message() << "\" lacks \"" << part << "\"";
    }
  }
}

TEST(TopologyAnnotationTest, ValueIsCompactJson) {
  EXPECT_EQ(codec::EncodeTopologyAnnotation({{"X", "NV12"}, {"NV12", "X"}}),
            R"([["X","NV12"],["NV12","X"]])");
  EXPECT_EQ(codec::EncodeTopologyAnnotation({{"X"}}), R"([["X"]])");
  EXPECT_EQ(codec::EncodeTopologyAnnotation({}), "[]");
}

TEST(TopologyAnnotationTest, PatchBodyEscapesValue) {
  EXPECT_EQ(
      codec::EncodeAnnotationPatch(kTopologyAnnotationKey,
                                   codec::EncodeTopologyAnnotation({{"X", "NV12"}, {"NV12", "X"}})),
      R"({"metadata":{"annotations":{"gpusched.io/gpu-topology":"[[\"X\",\"NV12\"],[\"NV12\",\"X\"]]"}}})");
}

TEST(TopologyAnnotationTest, ValueFromParsedT4File) {
  const auto m = ParseNvidiaSmiTopo(ReadTestdata("pcie_4x_t4.txt"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(codec::EncodeTopologyAnnotation(*m),
            R"([["X","PIX","SYS","SYS"],["PIX","X","SYS","SYS"],)"
            R"(["SYS","SYS","X","PIX"],["SYS","SYS","PIX","X"]])");
}

TEST(TopologyAnnotationTest, EscapesQuotesBackslashesAndControlBytes) {
  EXPECT_EQ(codec::EncodeTopologyAnnotation({{"a\"b\\c\n\x01"}}), R"([["a\"b\\c\n\u0001"]])");
}

}  // namespace
}  // namespace gpusched::agent
