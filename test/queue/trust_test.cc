// The trust boundary of the queue: a filter, bind or preempt request names a
// pod, but only the cluster source (API watch or --cluster file) says what
// pods exist. Regression tests for forged requests holding real pods back,
// taking over a real pod's name, and binding pods the source never showed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test/queue/harness.h"

namespace gpusched::queue {
namespace {

using ::gpusched::testing::Hgx8H100;
using ::gpusched::testing::PodBuilder;
using testing::Harness;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Quota;
using testing::Quotas;
using ::testing::SizeIs;

QueueOptions TwoTeams() {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 16, "r")}, {"team-b", Quota(8, 16, "r")}});
  return o;
}

TEST(TrustTest, ForgedHighPriorityPodNeverHoldsARealPodBack) {
  Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, {}, TwoTeams());
  PodRequest real = PodBuilder("train", "team-b").Gpus(8).Priority(100).Build();
  h.Submit(real);
  PodRequest forged = PodBuilder("forged", "team-b").Gpus(8).Priority(2'000'000'000).Build();
  forged.uid = "attacker-uid";
  // The forged pod is answered for placement (it would fit)...
  EXPECT_THAT(h.FilterOnly(forged), SizeIs(2));
  // ...but never enters the state or the queue, so the real pod is first.
  EXPECT_FALSE(h.state().FindPod("attacker-uid").has_value());
  std::string reason;
  EXPECT_THAT(h.Filter(real, &reason), SizeIs(2)) << reason;
  QueueReport r = h.queue->Report({"team-b", 10});
  ASSERT_THAT(r.namespaces, SizeIs(1));
  ASSERT_THAT(r.namespaces[0].queue, SizeIs(1));
  EXPECT_EQ(r.namespaces[0].queue[0].uid, real.uid);
  EXPECT_EQ(r.namespaces[0].queue[0].position, 1);
}

TEST(TrustTest, ForgedRequestCannotChangeWhatTheQueueKnowsOfARealPod) {
  Harness h({Hgx8H100("h0")}, {}, TwoTeams());
  PodRequest first = PodBuilder("first", "team-a").Gpus(8).Priority(10).Build();
  PodRequest second = PodBuilder("second", "team-a").Gpus(8).Priority(5).Build();
  h.Submit(first);
  h.Submit(second);
  ASSERT_THAT(h.Filter(first), SizeIs(1));
  // A request naming the second pod's uid with a higher priority does not
  // move it ahead: the queue reads the source's pod.
  PodRequest lying = second;
  lying.priority = 1'000'000;
  std::string reason;
  EXPECT_THAT(h.FilterOnly(lying, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("position 2 in queue"));  // still behind `first`
}

TEST(TrustTest, ForgedFilterCannotTakeOverARealPodsName) {
  Harness h({Hgx8H100("h0")}, {}, TwoTeams());
  PodRequest real = PodBuilder("example", "team-a").Gpus(2).Build();
  h.Submit(real);
  ASSERT_THAT(h.Filter(real), SizeIs(1));
  PodRequest forged = real;
  forged.uid = "attacker-uid";
  h.FilterOnly(forged);
  EXPECT_EQ(h.Bind(real, "h0"), "");
  EXPECT_EQ(h.state().FindPod(real.uid)->node_name, "h0");
}

TEST(TrustTest, BindOfAPodTheSourceNeverShowedTakesNoGpus) {
  Harness h({Hgx8H100("h0")}, {}, TwoTeams());
  PodRequest fake = PodBuilder("fake", "team-a").Gpus(8).Build();
  EXPECT_THAT(h.FilterOnly(fake), SizeIs(1));
  EXPECT_THAT(h.Bind(fake, "h0"), HasSubstr("not in the cluster view"));
  EXPECT_FALSE(h.state().FindPod(fake.uid).has_value());
  EXPECT_EQ(h.state().Snapshot()->Find("h0")->free_count(), 8);
}

TEST(TrustTest, ForgedGangMemberGetsNoReservation) {
  Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, {}, TwoTeams());
  PodRequest m = PodBuilder("m0", "team-a").Gpus(8).Gang("g", 2).Build();
  std::string reason;
  EXPECT_THAT(h.FilterOnly(m, &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("not in the cluster view yet"));
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  EXPECT_EQ(h.state().Snapshot()->Find("h0")->free_count(), 8);
}

// A reservation holder is a kind of pod only the queue manager makes: a
// pod of the cluster whose uid looks like a holder's is an ordinary pod,
// queued, counted in quota and preemptible like any other.
TEST(TrustTest, PodNamedLikeAReservationHolderIsAnOrdinaryPod) {
  QueueOptions o;
  o.quotas = Quotas({{"team-a", Quota(8, 8)}});
  PodRequest mimic = PodBuilder("mimic", "team-a").Gpus(8).OnNode("h0", 0xff).Build();
  mimic.uid = std::string(kReservationUidPrefix) + "team-a/g/1-0";
  Harness h({Hgx8H100("h0"), Hgx8H100("h1")}, {mimic}, o);
  EXPECT_THAT(::gpusched::testing::ReservationHolders(h.state()), IsEmpty());
  std::string reason;
  EXPECT_THAT(h.Filter(PodBuilder("next", "team-a").Gpus(8).Build(), &reason), IsEmpty());
  EXPECT_THAT(reason, HasSubstr("namespace team-a at its limit: holds 8 of limit 8"));
  PreemptionArgs a;
  a.pod = PodBuilder("urgent", "team-a").Gpus(8).Priority(100).Build();
  h.Submit(a.pod);
  a.candidates.push_back({"h0", {mimic.uid}, 0});
  EXPECT_THAT(h.service->Preempt(a).nodes, SizeIs(1));
}

}  // namespace
}  // namespace gpusched::queue
