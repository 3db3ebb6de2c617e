// QuotaLedger::ForEachBorrower against its definition: every namespace the
// ledger knows whose usage is above its guarantee, each once, on random
// usage tables, quota configs (namespaces configured without usage, usage
// without a configured quota) and a copy's own changes shadowing the shared
// table (Add raising and lowering usage, and adding namespaces).
#include "scheduler/queue/quota_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace gpusched::queue {
namespace {

TEST(QuotaLedgerTest, ForEachBorrowerNamesExactlyTheNamespacesAboveTheirGuarantee) {
  std::mt19937 rng(29);
  for (int round = 0; round < 200; ++round) {
    QuotaConfig config;
    config.enabled = true;
    config.default_quota.gpus.guaranteed = static_cast<int>(rng() % 3);
    std::vector<UsageTable::Row> rows;
    for (int i = 0; i < 12; ++i) {
      const std::string ns = "ns" + std::to_string(i);  // sorted: single digits, then 10, 11
      if (rng() % 3 != 0) {
        config.namespaces[ns].gpus = {.guaranteed = static_cast<int>(rng() % 5), .limit = 8};
      }
      if (rng() % 4 != 0) {
        auto use = std::make_shared<NamespaceUse>();
        use->ns = ns;
        use->total = static_cast<int64_t>(rng() % 7) * 1000;
        use->pods = 1;
        use->by_product["A100"] = use->total;
        rows.push_back(std::move(use));
      }
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a->ns < b->ns; });
    QuotaLedger ledger(config, std::make_shared<const UsageTable>(rows, GpuCapacity{}));
    for (int i = 0, changes = static_cast<int>(rng() % 5); i < changes; ++i) {
      const std::string ns = "ns" + std::to_string(rng() % 14);  // ns12, ns13: new ones
      const int64_t milli = (static_cast<int64_t>(rng() % 7) - 3) * 1000;
      if (ledger.Usage(ns) + milli >= 0) ledger.Add(ns, "A100", milli);
    }
    std::multiset<std::string> got;
    ledger.ForEachBorrower([&got](const std::string& ns) { got.insert(ns); });
    std::multiset<std::string> want;
    for (const std::string& ns : ledger.Namespaces()) {
      if (ledger.Usage(ns) > ledger.Guaranteed(ns)) want.insert(ns);
    }
    ASSERT_EQ(got, want) << "round " << round;
  }
}

// The sums a ledger fills on first use (usage of all, each cohort's idle
// guarantee) are made by one merged walk on a ledger as made from a table,
// and by lookups on a copy with changes of its own: both must give the
// same answers, on random configs, tables and claims (a no-op change puts
// the copy on the lookup path).
TEST(QuotaLedgerTest, SumsOfALedgerAsMadeEqualTheSumsByLookup) {
  std::mt19937 rng(31);
  for (int round = 0; round < 300; ++round) {
    QuotaConfig config;
    config.enabled = true;
    config.default_quota.gpus = {.guaranteed = static_cast<int>(rng() % 3), .limit = 64};
    config.default_quota.cohort = rng() % 2 == 0 ? "" : "c0";
    std::vector<UsageTable::Row> rows;
    std::map<std::string, int64_t> claims;
    for (int i = 0; i < 14; ++i) {
      const std::string ns = "ns" + std::to_string(i);
      if (rng() % 3 != 0) {
        NamespaceQuota& q = config.namespaces[ns];
        q.gpus = {.guaranteed = static_cast<int>(rng() % 5), .limit = 16};
        const uint32_t c = rng() % 3;
        q.cohort = c == 0 ? "" : "c" + std::to_string(c);
      }
      if (rng() % 4 != 0) {
        auto use = std::make_shared<NamespaceUse>();
        use->ns = ns;
        use->total = static_cast<int64_t>(rng() % 9) * 500;
        use->pods = 1;
        use->by_product["A100"] = use->total;
        rows.push_back(std::move(use));
      }
      if (rng() % 5 == 0) claims[ns] = static_cast<int64_t>(rng() % 4) * 1000;
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a->ns < b->ns; });
    GpuCapacity capacity;
    capacity.total = 64'000;
    QuotaLedger made(config, std::make_shared<const UsageTable>(rows, capacity));
    made.SetClaims(claims);
    // A no-op change of a namespace it lists (a new one would join the
    // walk with the default quota).
    const std::vector<std::string> listed = made.Namespaces();
    if (listed.empty()) continue;
    QuotaLedger changed = made;
    changed.Add(listed[rng() % listed.size()], "A100", 0);
    ASSERT_EQ(made.Idle(), changed.Idle()) << "round " << round;
    for (const std::string& ns : made.Namespaces()) {
      ASSERT_EQ(made.Lendable(ns), changed.Lendable(ns)) << "round " << round << " " << ns;
      ASSERT_EQ(made.CohortLendable(ns), changed.CohortLendable(ns))
          << "round " << round << " " << ns;
    }
  }
}

}  // namespace
}  // namespace gpusched::queue
