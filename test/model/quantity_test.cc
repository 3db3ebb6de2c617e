#include "gpusched/util/quantity.h"

#include <gtest/gtest.h>

namespace gpusched {
namespace {

TEST(QuantityTest, MilliTable) {
  struct Case {
    const char* text;
    int64_t milli;
  } cases[] = {{"4", 4000},     {"500m", 500},    {"0.1", 100},     {"1.5", 1500},
               {"2k", 2000000}, {"1Ki", 1024000}, {"1e3", 1000000}, {"0", 0},
               {"+3", 3000},    {"1.0001", 1001},  // rounds up like MilliValue()
               {"100u", 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto v = ParseQuantityMilli(c.text);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, c.milli);
  }
}

TEST(QuantityTest, MiBTable) {
  struct Case {
    const char* text;
    int64_t mib;
  } cases[] = {{"40Gi", 40960}, {"16Gi", 16384}, {"2113455344Ki", 2063922},
               {"1Mi", 1},      {"1M", 1},       {"1699693474489", 1620955},
               {"512", 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto v = ParseQuantityMiB(c.text);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, c.mib);
  }
}

TEST(QuantityTest, IntegerRejectsFractions) {
  EXPECT_EQ(*ParseQuantityInteger("4"), 4);
  EXPECT_EQ(*ParseQuantityInteger("4000m"), 4);
  EXPECT_FALSE(ParseQuantityInteger("0.5").ok());
  EXPECT_FALSE(ParseQuantityInteger("1500m").ok());
}

TEST(QuantityTest, RejectsGarbage) {
  for (const char* bad : {"", "abc", "4x", "--1", "1e", "1e9999", "-1", "1..2", "Gi",
                          "99999999999999999999999999999999999999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseQuantityMilli(bad).ok());
  }
}

}  // namespace
}  // namespace gpusched
