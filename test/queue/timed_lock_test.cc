// TimedLock: every hold lands in the per-site histograms; holds of 5 ms or
// more are also counted by whether the holder ran or waited.
#include "scheduler/queue/timed_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace gpusched::queue {
namespace {

TEST(TimedLockTest, LongHoldHolderSplitsAtHalfTheWallTime) {
  struct Case {
    int64_t wall_ns, cpu_ns;
    const char* want;
  };
  for (const Case& c : {Case{6'000'000, 0, "waited"}, Case{6'000'000, 2'999'999, "waited"},
                        Case{6'000'000, 3'000'000, "ran"}, Case{6'000'000, 6'000'000, "ran"},
                        // The thread CPU clock may run ahead of the wall clock here.
                        Case{6'000'000, 9'000'000, "ran"}}) {
    EXPECT_STREQ(LongHoldHolder(c.wall_ns, c.cpu_ns), c.want) << c.wall_ns << " " << c.cpu_ns;
  }
}

TEST(TimedLockTest, AHoldSpentAsleepIsCountedAsWaitedShortOnesAreNot) {
  absl::Mutex mu;
  LockHoldStats stats;
  Metrics metrics;
  { TimedLock l(&mu, &stats, &metrics, "short"); }
  {
    TimedLock l(&mu, &stats, &metrics, "sleeper");
    std::this_thread::sleep_for(std::chrono::milliseconds(6));  // no CPU used
  }
  EXPECT_EQ(stats.count.load(), 2);
  EXPECT_GE(stats.max_ns.load(), TimedLock::kLongHold);
  const std::string name = "gpusched_queue_lock_long_holds_total";
  EXPECT_EQ(metrics.CounterValue(name, {{"site", "sleeper"}, {"holder", "waited"}}), 1);
  EXPECT_EQ(metrics.CounterValue(name, {{"site", "sleeper"}, {"holder", "ran"}}), 0);
  EXPECT_EQ(metrics.CounterValue(name, {{"site", "short"}, {"holder", "waited"}}), 0);
  EXPECT_EQ(metrics.CounterValue(name, {{"site", "short"}, {"holder", "ran"}}), 0);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("gpusched_queue_lock_hold_seconds_count{site=\"sleeper\"} 1"),
            std::string::npos);
}

// A request that waits behind a background hold of 6 ms is counted under
// the background site as its holder; one that finds the mutex free is not
// counted at all.
TEST(TimedLockTest, ALongWaitIsCountedByTheSiteHoldingTheMutexWhenItBegan) {
  absl::Mutex mu;
  LockHoldStats stats;
  Metrics metrics;
  { TimedLock l(&mu, &stats, &metrics, "admit"); }  // free: no wait
  std::atomic<bool> held{false};
  std::thread background([&] {
    TimedLock l(&mu, &stats, &metrics, "tick-sync", LockUse::kBackgroundYield);
    held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(6));
  });
  while (!held) std::this_thread::yield();
  { TimedLock l(&mu, &stats, &metrics, "admit"); }
  background.join();
  const std::string name = "gpusched_queue_lock_long_waits_total";
  EXPECT_EQ(metrics.CounterValue(name, {{"site", "admit"}, {"holder", "tick-sync"}}), 1);
  EXPECT_EQ(metrics.CounterValue(name, {{"site", "admit"}, {"holder", "none"}}), 0);
  EXPECT_EQ(metrics.CounterValue(name, {{"site", "tick-sync"}, {"holder", "none"}}), 0);
  EXPECT_EQ(stats.holder.load(), nullptr);  // nobody holds it now
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("gpusched_queue_lock_wait_seconds_count{site=\"admit\"} 2"),
            std::string::npos);
}

}  // namespace
}  // namespace gpusched::queue
