// queueingStrategy Backfill: a later pod passes earlier ones only when its
// runtime estimate ends before all their estimated starts; an overrun is
// counted, never evicted. Times: the harness starts at 1000 s.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using gpusched::testing::Hgx8H100;
using gpusched::testing::PodBuilder;
using ::testing::ElementsAre;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;

PodRequest Pod(const std::string& name, int gpus, int64_t created, const std::string& runtime) {
  PodRequest p = PodBuilder(name, "team-a").Gpus(gpus).Created(created).Build();
  p.expected_runtime = runtime;
  return p;
}

// h0: 4 of 8 GPUs busy until 1000 + 3600 s. Queue: big (8 GPUs) first: its
// estimated start is 4600 s.
std::unique_ptr<Harness> Scenario(QueueingStrategy strategy) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(100, 100)}});
  o.quotas.namespaces["team-a"].queueing = strategy;
  PodRequest run = PodBuilder("run", "team-a").Gpus(4).OnNode("h0", 0x0f).Build();
  run.start_unix = 1000;
  run.expected_runtime = "1h";
  return std::make_unique<Harness>(std::vector<NodeSpec>{Hgx8H100("h0")},
                                   std::vector<PodRequest>{run}, o);
}

TEST(Backfill, ALaterPodThatEndsBeforeTheHeadsStartPassesIt) {
  auto owner = Scenario(QueueingStrategy::kBackfill);
  Harness& h = *owner;
  PodRequest big = Pod("big", 8, 1, "1h");
  PodRequest fits = Pod("fits", 2, 2, "30m");    // ends by 1000+1800+180 = 2980 < 4600
  PodRequest tight = Pod("tight", 2, 3, "55m");  // 1000+3300+330 = 4630 > 4600
  PodRequest unknown = Pod("unknown", 2, 4, "");
  for (const PodRequest& p : {big, fits, tight, unknown}) h.Submit(p);
  std::string reason;
  EXPECT_THAT(h.Filter(big), IsEmpty());
  // Before any estimate: StrictFIFO's answer.
  EXPECT_THAT(h.Filter(fits, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("waiting behind big"));
  h.queue->RefreshEstimates();
  EXPECT_EQ(h.queue->EstimateOf(big.uid)->start.start_s, 4600);
  EXPECT_THAT(h.Filter(fits, &reason), ElementsAre("h0")) << reason;
  auto page = h.queue->ExplainPod("team-a", "fits");  // the debug page agrees
  ASSERT_TRUE(page.has_value());
  EXPECT_THAT(page->reason, HasSubstr("admissible now")) << page->reason;
  EXPECT_THAT(h.Filter(tight, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("waiting behind big"));
  EXPECT_THAT(h.Filter(unknown, &reason), IsEmpty());
  // An estimate older than backfill_max_age_s is not trusted.
  h.now_ms += (h.options.backfill_max_age_s + 1) * 1000;
  EXPECT_THAT(h.Filter(fits), IsEmpty());
}

// The scenario with big (8 GPUs) queued before fits (2 GPUs, 30 min), big
// asked about and the estimates refreshed once: fits ends before big's
// estimated start, so only Backfill may let it pass.
struct BigThenFits {
  explicit BigThenFits(QueueingStrategy strategy)
      : owner(Scenario(strategy)), big(Pod("big", 8, 1, "1h")), fits(Pod("fits", 2, 2, "30m")) {
    owner->Submit(big);
    owner->Submit(fits);
    owner->Filter(big);
    owner->queue->RefreshEstimates();
  }
  std::unique_ptr<Harness> owner;
  PodRequest big;
  PodRequest fits;
};

TEST(Backfill, StrictFifoNeverLetsItPass) {
  BigThenFits s(QueueingStrategy::kStrictFifo);
  EXPECT_THAT(s.owner->Filter(s.fits), IsEmpty());
}

TEST(Backfill, AnOverrunIsCountedOnceAndNeverEvicted) {
  BigThenFits s(QueueingStrategy::kBackfill);
  Harness& h = *s.owner;
  const PodRequest& big = s.big;
  const PodRequest& fits = s.fits;
  ASSERT_THAT(h.Filter(fits), ElementsAre("h0"));
  ASSERT_EQ(h.Bind(fits, "h0"), "");
  h.queue->RefreshEstimates();
  EXPECT_EQ(h.queue->backfill_overruns(), 0);
  // Past its promised end (2980 s) and still running.
  h.now_ms = 3'000'000;
  h.queue->RefreshEstimates();
  h.queue->RefreshEstimates();
  EXPECT_EQ(h.queue->backfill_overruns(), 1);
  EXPECT_TRUE(h.writer.evicted.empty());
  EXPECT_TRUE(h.state().FindPod(fits.uid)->HoldsGpus());
  // The head's estimate follows the overrun (never earlier than run's end).
  EXPECT_GE(h.queue->EstimateOf(big.uid)->start.start_s, 4600);
}

}  // namespace
}  // namespace gpusched::queue
