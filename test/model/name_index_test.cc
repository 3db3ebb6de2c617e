#include "gpusched/model/name_index.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace gpusched {
namespace {

// Names of every length around the 8-byte word boundaries, and near misses
// that differ only in their last byte, their first byte or their length.
std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (int len = 1; len <= 40; ++len) {
    std::string n;
    for (int i = 0; i < len; ++i) n.push_back(static_cast<char>('a' + (i * 7 + len) % 26));
    names.push_back(n);
  }
  names.push_back("gpu-node-100000");
  names.push_back("ip-10-0-17-201.eu-west-1.compute.internal");
  return names;
}

TEST(NameIndexTest, FindsEveryNameAndNoNearMiss) {
  const std::vector<std::string> names = Names();
  const NameIndex index(names);
  ASSERT_EQ(index.size(), names.size());
  auto expected = [&](const std::string& n) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == n) return static_cast<int32_t>(i);
    }
    return int32_t{-1};
  };
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(index.Find(names[i]), static_cast<int32_t>(i)) << names[i];
    std::string last = names[i];
    last.back() ^= 1;
    std::string first = names[i];
    first.front() ^= 1;
    for (const std::string& miss : {last, first, names[i] + "x", names[i].substr(1),
                                    names[i].substr(0, names[i].size() - 1)}) {
      EXPECT_EQ(index.Find(miss), expected(miss)) << miss;
    }
  }
  EXPECT_EQ(index.Find(""), -1);
}

TEST(NameIndexTest, EmptyIndexFindsNothing) {
  const NameIndex index(std::vector<std::string>{});
  EXPECT_EQ(index.Find("a"), -1);
  std::vector<std::string_view> q = {"a", "b"};
  std::vector<int32_t> out(2, 7);
  index.FindAll(q.data(), q.size(), out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1}));
}

// FindAll answers exactly what Find answers, for batches of every length
// (shorter and longer than its prefetch pipeline) of known and unknown names.
TEST(NameIndexTest, FindAllAgreesWithFind) {
  std::mt19937 rng(7);
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i)
    names.push_back("node-" + std::to_string(rng() % 100000) + "-" + std::to_string(i));
  const NameIndex index(names);
  std::vector<std::string> pool = names;
  for (int i = 0; i < 500; ++i) pool.push_back("unknown-" + std::to_string(i));
  for (size_t n : {0u, 1u, 7u, 8u, 16u, 17u, 33u, 1000u, 5000u}) {
    std::vector<std::string_view> batch;
    for (size_t k = 0; k < n; ++k) batch.push_back(pool[rng() % pool.size()]);
    std::vector<int32_t> got(n, -7);
    index.FindAll(batch.data(), n, got.data());
    for (size_t k = 0; k < n; ++k) ASSERT_EQ(got[k], index.Find(batch[k])) << batch[k];
  }
}

}  // namespace
}  // namespace gpusched
