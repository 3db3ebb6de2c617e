// WeightedFairShares: entitlements, water-filling by weight, limits as caps.
#include "scheduler/queue/fair_share.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpusched::queue {
namespace {

struct Case {
  const char* name;
  std::vector<FairShareClaim> claims;
  int64_t capacity;
  std::map<std::string, int64_t> want;
};

TEST(FairShareTest, Table) {
  const std::vector<Case> cases = {
      // Both entitled to their guarantee of 8; the 16 left split evenly,
      // b wants only 8 more, a takes the rest.
      {"equal weights",
       {{"a", 8000, 32000, 8000, 16000, 1}, {"b", 8000, 32000, 0, 16000, 1}},
       32000,
       {{"a", 16000}, {"b", 16000}}},
      {"weights 3:1",
       {{"a", 0, 40000, 0, 40000, 3}, {"b", 0, 40000, 0, 40000, 1}},
       40000,
       {{"a", 30000}, {"b", 10000}}},
      // a's limit caps it at 5: b gets the rest.
      {"limit caps a share",
       {{"a", 0, 5000, 0, 40000, 3}, {"b", 0, 40000, 0, 40000, 1}},
       40000,
       {{"a", 5000}, {"b", 35000}}},
      // c wants less than its guarantee: entitled to what it wants; the
      // idle rest of its guarantee is surplus for the others.
      {"idle guarantee is surplus",
       {{"a", 0, 40000, 0, 40000, 1}, {"c", 16000, 16000, 2000, 0, 1}},
       24000,
       {{"a", 22000}, {"c", 2000}}},
      // Guarantees over-promise: nothing is left to split.
      {"over-promised",
       {{"a", 20000, 40000, 20000, 8000, 1}, {"b", 20000, 20000, 20000, 0, 1}},
       32000,
       {{"a", 20000}, {"b", 20000}}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(WeightedFairShares(c.claims, c.capacity), c.want) << c.name;
  }
}

}  // namespace
}  // namespace gpusched::queue
