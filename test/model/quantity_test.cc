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

// The edges of int64 and of the internal int128 arithmetic: never wraps.
TEST(QuantityTest, ExtremesNeverWrap) {
  EXPECT_EQ(*ParseQuantityValue("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(ParseQuantityValue("9223372036854775808").ok());
  EXPECT_FALSE(ParseQuantityMilli("9223372036854775807").ok());  // x1000 leaves int64
  EXPECT_EQ(*ParseQuantityInteger("4611686018427387904"), int64_t{1} << 62);
  EXPECT_EQ(*ParseQuantityMiB("8Ei"), int64_t{8} << 40);
  // Tiny positive amounts round up to one unit; the divisor (up to 10^40 *
  // 2^70) once overflowed int128.
  for (const char* tiny : {"1e-43", "5e-42", "1e-39", "123456789012345678901234567e-40"}) {
    SCOPED_TRACE(tiny);
    EXPECT_EQ(*ParseQuantityMilli(tiny), 1);
  }
  EXPECT_EQ(*ParseQuantityMiB("1e-39"), 1);
  EXPECT_EQ(*ParseQuantityMiB("1e-40"), 1);
  EXPECT_FALSE(ParseQuantityInteger("1e-40").ok());
}

}  // namespace
}  // namespace gpusched
