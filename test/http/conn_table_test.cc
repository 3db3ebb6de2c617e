// ConnTable without sockets: which connection a full listener evicts, the
// per-source cap, and the memory budget's charges and evictions.
#include "scheduler/http/conn_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace gpusched::http {
namespace {

using std::chrono::milliseconds;

class ConnTableTest : public ::testing::Test {
 protected:
  ConnTableTest()
      : table_({ListenerLimits{4, 3, 2}, ListenerLimits{2, 2, 0}},
               BudgetLimits{1000, 0, 0, milliseconds(100), 1000}) {}

  // Opens a served connection on the main listener at t0 + `at`.
  std::shared_ptr<ConnEntry> Serve(const std::string& source, milliseconds at) {
    auto o = table_.Open(0, source, t0_ + at);
    EXPECT_EQ(o.admission, ConnTable::Admission::kServe);
    EXPECT_TRUE(o.evicted.empty());
    return o.entry;
  }
  ConnClock::time_point At(milliseconds ms) const { return t0_ + ms; }

  ConnClock::time_point t0_ = ConnClock::now();
  ConnTable table_;
};

TEST_F(ConnTableTest, FullListenerEvictsHeaderPendingThenFreshThenIdle) {
  auto idle = Serve("10.0.0.1", milliseconds(0));
  table_.RequestDone(*idle);  // answered one request, now idle keep-alive
  auto fresh = Serve("10.0.0.2", milliseconds(1));
  auto header_old = Serve("10.0.0.3", milliseconds(2));
  auto header_new = Serve("10.0.0.4", milliseconds(3));
  table_.SetPhase(*header_old, ConnPhase::kHeader, At(milliseconds(5)));
  table_.SetPhase(*header_new, ConnPhase::kHeader, At(milliseconds(6)));

  std::vector<std::shared_ptr<ConnEntry>> order;
  for (int i = 0; i < 4; ++i) {
    auto o = table_.Open(0, "10.0.1." + std::to_string(i), At(milliseconds(10 + i)));
    ASSERT_EQ(o.admission, ConnTable::Admission::kServe);
    ASSERT_EQ(o.evicted.size(), 1u);
    // The newcomers stay busy (being answered), so they are never victims.
    table_.SetPhase(*o.entry, ConnPhase::kHandling, At(milliseconds(10 + i)));
    order.push_back(o.entry);
  }
  EXPECT_TRUE(header_old->evicted);
  EXPECT_TRUE(header_new->evicted);
  EXPECT_TRUE(fresh->evicted);
  EXPECT_TRUE(idle->evicted);
  const ConnStats st = table_.Stats(0);
  EXPECT_EQ(st.evictions.at("header"), 2);
  EXPECT_EQ(st.evictions.at("fresh"), 1);
  EXPECT_EQ(st.evictions.at("idle"), 1);
  EXPECT_EQ(st.open, 4);
}

TEST_F(ConnTableTest, OrderWithinAKindIsOldestFirst) {
  auto a = Serve("10.0.0.1", milliseconds(0));
  auto b = Serve("10.0.0.2", milliseconds(0));
  auto c = Serve("10.0.0.3", milliseconds(0));
  auto d = Serve("10.0.0.4", milliseconds(0));
  table_.SetPhase(*b, ConnPhase::kHeader, At(milliseconds(1)));  // oldest header
  table_.SetPhase(*a, ConnPhase::kHeader, At(milliseconds(2)));
  table_.SetPhase(*c, ConnPhase::kBody, At(milliseconds(1)));
  table_.Progress(*c, 10, At(milliseconds(1)));  // a body begun, not slow
  table_.SetPhase(*d, ConnPhase::kAnswer, At(milliseconds(1)));
  auto o = table_.Open(0, "10.0.0.5", At(milliseconds(3)));
  EXPECT_EQ(o.admission, ConnTable::Admission::kServe);
  EXPECT_TRUE(b->evicted);
  EXPECT_FALSE(a->evicted);
  EXPECT_EQ(o.evicted.at(0).reason, EvictReason::kHeader);
  EXPECT_EQ(o.evicted.at(0).source, "10.0.0.2");
}

// A body not begun holds nothing and waits on its client like a header; a
// slow body or answer comes next; a transfer making progress is never taken.
TEST_F(ConnTableTest, BodiesNotBegunAndSlowTransfersGiveUpTheirSlots) {
  auto moving = Serve("10.0.0.1", milliseconds(0));
  auto slow = Serve("10.0.0.2", milliseconds(0));
  auto not_begun = Serve("10.0.0.3", milliseconds(0));
  auto idle = Serve("10.0.0.4", milliseconds(0));
  for (auto& e : {moving, slow}) {
    table_.SetPhase(*e, ConnPhase::kBody, At(milliseconds(0)));
    table_.Progress(*e, 100, At(milliseconds(0)));
  }
  table_.Progress(*moving, 1000, At(milliseconds(290)));  // 1.1 KB in 0.3 s: fast enough
  table_.SetPhase(*not_begun, ConnPhase::kBody, At(milliseconds(250)));
  auto first = table_.Open(0, "10.0.1.1", At(milliseconds(300)));
  ASSERT_EQ(first.evicted.size(), 1u);
  EXPECT_TRUE(not_begun->evicted);
  table_.SetPhase(*first.entry, ConnPhase::kHandling, At(milliseconds(300)));
  auto second = table_.Open(0, "10.0.1.2", At(milliseconds(300)));
  ASSERT_EQ(second.evicted.size(), 1u);
  EXPECT_TRUE(slow->evicted);  // stalled 300 ms, before the idle connection
  EXPECT_EQ(second.evicted[0].reason, EvictReason::kBody);
  table_.SetPhase(*second.entry, ConnPhase::kHandling, At(milliseconds(300)));
  table_.Open(0, "10.0.1.3", At(milliseconds(300)));
  EXPECT_TRUE(idle->evicted);
  EXPECT_FALSE(moving->evicted);
}

TEST_F(ConnTableTest, NothingEvictableMeansRefusalSlotsThenDrop) {
  for (int i = 0; i < 4; ++i) {
    auto e = Serve("10.0.0." + std::to_string(i), milliseconds(0));
    table_.SetPhase(*e, ConnPhase::kHandling, At(milliseconds(1)));
  }
  EXPECT_EQ(table_.Open(0, "10.0.1.1", At(milliseconds(2))).admission,
            ConnTable::Admission::kRefuse);
  auto refused = table_.Open(0, "10.0.1.2", At(milliseconds(2)));
  EXPECT_EQ(refused.admission, ConnTable::Admission::kRefuse);
  EXPECT_EQ(table_.Open(0, "10.0.1.3", At(milliseconds(2))).admission, ConnTable::Admission::kDrop);
  EXPECT_EQ(table_.Stats(0).refused, 2);
  table_.Close(*refused.entry);
  EXPECT_EQ(table_.Stats(0).refused, 1);
}

// A source at its cap evicts its own waiting connection, never another
// source's, even when that one has waited longer.
TEST_F(ConnTableTest, SourceAtItsCapEvictsItsOwnConnection) {
  auto other = Serve("10.0.0.1", milliseconds(0));  // idle since t0
  std::vector<std::shared_ptr<ConnEntry>> mine;
  for (int i = 0; i < 3; ++i) mine.push_back(Serve("10.0.0.2", milliseconds(1 + i)));
  table_.SetPhase(*mine[1], ConnPhase::kHeader, At(milliseconds(5)));
  auto o = table_.Open(0, "10.0.0.2", At(milliseconds(6)));
  EXPECT_EQ(o.admission, ConnTable::Admission::kServe);
  EXPECT_TRUE(mine[1]->evicted);
  EXPECT_FALSE(other->evicted);
  // Busy connections of the source: the newcomer gets a refusal slot, even
  // though the listener could evict another source's idle connection.
  for (auto& e : {mine[0], mine[2], o.entry}) {
    table_.SetPhase(*e, ConnPhase::kHandling, At(milliseconds(7)));
  }
  EXPECT_EQ(table_.Open(0, "10.0.0.2", At(milliseconds(8))).admission,
            ConnTable::Admission::kRefuse);
  EXPECT_FALSE(other->evicted);
}

TEST_F(ConnTableTest, EvictedConnectionsCloseOnceAndSeeTheirEviction) {
  auto a = Serve("10.0.0.1", milliseconds(0));
  int cancelled = 0;
  EXPECT_TRUE(table_.SetCancel(*a, [&] { ++cancelled; }));
  for (int i = 0; i < 3; ++i) {
    auto e = Serve("10.0.0.2", milliseconds(1));
    table_.SetPhase(*e, ConnPhase::kHandling, At(milliseconds(1)));
  }
  auto o = table_.Open(0, "10.0.0.3", At(milliseconds(2)));
  ASSERT_EQ(o.evicted.size(), 1u);
  o.evicted[0].cancel();
  EXPECT_EQ(cancelled, 1);
  EXPECT_FALSE(table_.SetPhase(*a, ConnPhase::kHeader, At(milliseconds(3))));
  EXPECT_TRUE(table_.evicted(*a));
  EXPECT_EQ(table_.Stats(0).open, 4);
  table_.Close(*a);  // the slot went with the eviction
  EXPECT_EQ(table_.Stats(0).open, 4);
}

TEST_F(ConnTableTest, BudgetRefusesARiseThatDoesNotFitAndNeverExceedsTheCap) {
  auto a = Serve("10.0.0.1", milliseconds(0));
  auto b = Serve("10.0.0.2", milliseconds(0));
  table_.SetPhase(*a, ConnPhase::kBody, At(milliseconds(0)));
  table_.SetPhase(*b, ConnPhase::kBody, At(milliseconds(0)));
  std::vector<Eviction> ev;
  EXPECT_TRUE(table_.Hold(*a, 700, At(milliseconds(1)), &ev));
  table_.Progress(*a, 700, At(milliseconds(1)));
  // a is not slow (progress 9 ms ago, below slow_after): b must wait.
  EXPECT_FALSE(table_.Hold(*b, 400, At(milliseconds(10)), &ev));
  EXPECT_TRUE(ev.empty());
  EXPECT_FALSE(table_.HasRoom(*b, 400, At(milliseconds(10))));
  EXPECT_TRUE(table_.Hold(*b, 300, At(milliseconds(10)), &ev));
  EXPECT_EQ(table_.Stats(0).inflight_bytes, 1000);
  // Lowering a holding always works and frees the room.
  EXPECT_TRUE(table_.Hold(*a, 100, At(milliseconds(11)), &ev));
  EXPECT_TRUE(table_.Hold(*b, 900, At(milliseconds(11)), &ev));
  EXPECT_EQ(table_.Stats(0).peak_inflight_bytes, 1000);
  table_.Close(*a);
  table_.Close(*b);
  EXPECT_EQ(table_.Stats(0).inflight_bytes, 0);
}

TEST_F(ConnTableTest, StalledHoldersAreEvictedLargestFirstOnlyWhenThatMakesRoom) {
  auto big = Serve("10.0.0.1", milliseconds(0));
  auto small = Serve("10.0.0.1", milliseconds(0));
  auto writer = Serve("10.0.0.2", milliseconds(0));
  auto asker = Serve("10.0.0.3", milliseconds(0));
  std::vector<Eviction> ev;
  table_.SetPhase(*big, ConnPhase::kBody, At(milliseconds(0)));
  table_.SetPhase(*small, ConnPhase::kAnswer, At(milliseconds(0)));
  ASSERT_TRUE(table_.Hold(*big, 600, At(milliseconds(0)), &ev));
  ASSERT_TRUE(table_.Hold(*small, 300, At(milliseconds(0)), &ev));
  table_.SetPhase(*asker, ConnPhase::kBody, At(milliseconds(0)));
  // Both stalled for 200 ms (slow_after is 100 ms), but 1050 cannot be made.
  EXPECT_FALSE(table_.Hold(*asker, 1050, At(milliseconds(200)), &ev));
  EXPECT_TRUE(ev.empty());
  EXPECT_FALSE(big->evicted);
  // 500 needs 400 more: the larger stalled holder alone makes it.
  EXPECT_TRUE(table_.HasRoom(*asker, 500, At(milliseconds(200))));
  EXPECT_TRUE(table_.Hold(*asker, 500, At(milliseconds(200)), &ev));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].reason, EvictReason::kBody);
  EXPECT_TRUE(big->evicted);
  EXPECT_FALSE(small->evicted);
  EXPECT_EQ(table_.Stats(0).inflight_bytes, 800);
  EXPECT_EQ(table_.Stats(0).peak_inflight_bytes, 900);
  // An answer writing steadily (1 KB/s here is the minimum) is not slow.
  table_.SetPhase(*writer, ConnPhase::kAnswer, At(milliseconds(200)));
  ASSERT_TRUE(table_.Hold(*writer, 200, At(milliseconds(200)), &ev));
  table_.Progress(*writer, 150, At(milliseconds(300)));
  ev.clear();
  EXPECT_TRUE(table_.Hold(*asker, 700, At(milliseconds(310)), &ev));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].reason, EvictReason::kAnswer);  // the stalled one
  EXPECT_TRUE(small->evicted);
  EXPECT_FALSE(writer->evicted);
}

// A body that keeps trickling is still slow once its average rate falls
// under min_rate.
TEST_F(ConnTableTest, TricklingBelowTheMinimumRateIsSlow) {
  auto trickle = Serve("10.0.0.1", milliseconds(0));
  auto asker = Serve("10.0.0.2", milliseconds(0));
  table_.SetPhase(*trickle, ConnPhase::kBody, At(milliseconds(0)));
  table_.SetPhase(*asker, ConnPhase::kBody, At(milliseconds(0)));
  std::vector<Eviction> ev;
  ASSERT_TRUE(table_.Hold(*trickle, 900, At(milliseconds(0)), &ev));
  for (int t = 10; t <= 1000; t += 10) table_.Progress(*trickle, 1, At(milliseconds(t)));
  // 100 bytes in a second: under 1000 bytes/s, though the last byte is new.
  EXPECT_TRUE(table_.Hold(*asker, 500, At(milliseconds(1000)), &ev));
  EXPECT_TRUE(trickle->evicted);
}

// Small holdings may use the lane past the budget; large ones may not.
TEST(ConnTableLaneTest, SmallHoldingsUseTheLane) {
  ConnTable table({ListenerLimits{8, 8, 0}}, BudgetLimits{1000, 300, 100, milliseconds(100), 1});
  const auto t = ConnClock::now();
  auto large = table.Open(0, "10.0.0.1", t).entry;
  auto small1 = table.Open(0, "10.0.0.2", t).entry;
  auto small2 = table.Open(0, "10.0.0.3", t).entry;
  auto small3 = table.Open(0, "10.0.0.4", t).entry;
  for (auto& e : {large, small1, small2, small3}) table.SetPhase(*e, ConnPhase::kHandling, t);
  std::vector<Eviction> ev;
  EXPECT_TRUE(table.Hold(*large, 1000, t, &ev));  // the whole budget, being handled
  EXPECT_TRUE(table.Hold(*small1, 100, t, &ev));
  EXPECT_TRUE(table.Hold(*small2, 100, t, &ev));
  EXPECT_TRUE(table.HasRoom(*small3, 100, t));
  EXPECT_FALSE(table.HasRoom(*small3, 101, t));  // not small
  EXPECT_TRUE(table.Hold(*small3, 100, t, &ev));
  EXPECT_FALSE(table.Hold(*small3, 101, t, &ev));  // growing past small: the budget only
  EXPECT_EQ(table.Stats(0).inflight_bytes, 1300);
  EXPECT_TRUE(table.Hold(*large, 0, t, &ev));
  EXPECT_FALSE(table.Hold(*large, 801, t, &ev));  // 300 held by small ones: 700 left
  EXPECT_TRUE(table.Hold(*large, 700, t, &ev));
  EXPECT_TRUE(ev.empty());
}

TEST_F(ConnTableTest, ListenersHaveTheirOwnSlots) {
  for (int i = 0; i < 2; ++i) {
    auto o = table_.Open(1, "10.0.0.1", At(milliseconds(0)));
    ASSERT_EQ(o.admission, ConnTable::Admission::kServe);
    table_.SetPhase(*o.entry, ConnPhase::kHandling, At(milliseconds(0)));
  }
  EXPECT_EQ(table_.Open(1, "10.0.0.1", At(milliseconds(1))).admission, ConnTable::Admission::kDrop);
  EXPECT_EQ(table_.Stats(1).open, 2);
  EXPECT_EQ(table_.Stats(0).open, 0);
  Serve("10.0.0.1", milliseconds(2));
}

}  // namespace
}  // namespace gpusched::http
