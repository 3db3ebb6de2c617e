// Queue position a user can see: the leader's QueueStatusPublisher writes
// gpusched.io/queue-position and gpusched.io/queue-reason on pending pods
// (only when they change, positions past 100 in buckets), and `gpusched
// queue -n NS` lists a namespace's pending GPU pods in queue order from
// them, both against the fake API server.
#include "scheduler/kube/queue_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/codec/queue_codec.h"
#include "scheduler/queue/queue_manager.h"
#include "test/kube/kube_test_util.h"
#include "test/testing/builders.h"
#include "test/testing/child_process.h"

namespace gpusched::testing {
namespace {

using ::testing::HasSubstr;

const TestPki& Pki() {
  static const TestPki pki = MakeTestPki();
  return pki;
}

std::string Annotation(const FakeApiServer& api, const std::string& key, const char* name) {
  auto pod = api.Get("pods", key);
  if (!pod.has_value()) return "<no pod>";
  return (*pod)["metadata"].value("annotations", Json::object()).value(name, "");
}

class QueueStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<FakeApiServer>(Pki(), kToken);
    api_->Start();
    client_ = ClientFor(*api_, Pki());
  }
  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<kube::KubeHttpClient> client_;
};

TEST_F(QueueStatusTest, TextsAreExactUpToTheLimitThenBucketed) {
  queue::QueuedPod p;
  p.ns = "team-a";
  p.position = 3;
  p.reason = "gpusched: namespace team-a at quota";
  EXPECT_EQ(kube::QueueStatusPublisher::Texts(p, 100), std::make_pair(std::string("3"), p.reason));
  p.reason = "";
  EXPECT_THAT(kube::QueueStatusPublisher::Texts(p, 100).second, HasSubstr("admissible now"));
  p.position = 150;
  EXPECT_EQ(kube::QueueStatusPublisher::Texts(p, 100).first, "101+");
  p.position = 151;  // the same bucket: nothing to rewrite
  EXPECT_EQ(
      kube::QueueStatusPublisher::Texts(p, 100),
      kube::QueueStatusPublisher::Texts(queue::QueuedPod{.ns = "team-a", .position = 199}, 100));
}

TEST_F(QueueStatusTest, PublishesTheQueuesPositionsAndRewritesOnlyChanges) {
  // The queue manager over the same pods the API server holds.
  std::vector<PodRequest> pods;
  for (int i = 0; i < 3; ++i) {
    api_->Put("pods", PodJson("team-a", "job-" + std::to_string(i), 8));
    pods.push_back(PodBuilder("job-" + std::to_string(i), "team-a")
                       .Gpus(8)
                       .Priority(10 - i)  // job-0 first
                       .Build());
    pods.back().uid = "uid-team-a-job-" + std::to_string(i);
  }
  auto state = MakeState({Hgx8H100("h0")}, pods);
  auto fw = policy::Framework::Create(ScoringConfig{});
  ASSERT_TRUE(fw.ok());
  std::shared_ptr<const policy::Framework> framework(std::move(*fw));
  queue::QueueOptions options;
  options.quotas.enabled = true;
  options.quotas.namespaces["team-a"].gpus = {8, 8};
  options.quotas.namespaces["team-a"].queueing = QueueingStrategy::kStrictFifo;
  queue::QueueDeps deps;
  deps.state = state.get();
  deps.framework = [framework] { return framework; };
  queue::QueueManager q(deps, options);
  q.Resync();

  kube::QueueStatusPublisher::Options po;
  po.period = std::chrono::hours(1);  // rounds only when the test asks
  po.qps = 1000;
  kube::QueueStatusPublisher publisher(
      client_.get(), [&q](int32_t explained) { return q.Positions(explained); },
      [] { return true; }, po, nullptr);
  publisher.RunOnce();
  for (int i = 0; i < 3; ++i) {
    const std::string key = "team-a/job-" + std::to_string(i);
    EXPECT_EQ(Annotation(*api_, key, codec::kQueuePositionAnnotation), std::to_string(i + 1));
  }
  EXPECT_THAT(Annotation(*api_, "team-a/job-1", codec::kQueueReasonAnnotation),
              HasSubstr("1 earlier in queue need 8"));
  const int patches = api_->requests("PATCH /api/v1/namespaces/team-a/pods/");
  publisher.RunOnce();  // nothing changed: nothing written
  EXPECT_EQ(api_->requests("PATCH /api/v1/namespaces/team-a/pods/"), patches);
  // job-0 binds: the others move up and are rewritten.
  ASSERT_TRUE(state->Assume(pods[0], "h0", 0xff).ok());
  publisher.RunOnce();
  EXPECT_EQ(Annotation(*api_, "team-a/job-1", codec::kQueuePositionAnnotation), "1");
  EXPECT_EQ(Annotation(*api_, "team-a/job-2", codec::kQueuePositionAnnotation), "2");
  EXPECT_EQ(api_->requests("PATCH /api/v1/namespaces/team-a/pods/"), patches + 2);
}

TEST_F(QueueStatusTest, AnEstimatedStartIsRewrittenOnlyWhenItMovesByTheMargin) {
  struct Case {
    int64_t written, estimate;
    bool moved;
  };
  const int64_t now = 10'000;
  const Case cases[] = {
      {-1, -1, false},          // none either way
      {-1, 12'000, true},       // a first estimate
      {12'000, -1, true},       // no estimate any more
      {12'000, 12'300, false},  // 5 min: within max(5 min, 200 s)
      {12'000, 12'301, true},
      {100'000, 108'000, false},  // 98,000 s to wait: the margin is a tenth, 9,800 s
      {100'000, 110'001, true},   // 100,001 s to wait: 10,001 s is past its 10,000 s
      {10'500, 9'000, true},      // now past: the margin is 5 min
  };
  for (const Case& c : cases) {
    EXPECT_EQ(kube::QueueStatusPublisher::StartMoved(c.written, c.estimate, now), c.moved)
        << c.written << " -> " << c.estimate;
  }
}

TEST_F(QueueStatusTest, TheEstimatedStartAnnotationIsSetAndRemoved) {
  api_->Put("pods", PodJson("team-a", "job", 8));
  queue::QueuedPod p{.ns = "team-a", .name = "job", .uid = "u", .position = 1};
  p.estimated_start_unix = 1'800'000'000;
  std::vector<queue::QueuedPod> listed = {p};
  kube::QueueStatusPublisher::Options po;
  po.period = std::chrono::hours(1);
  po.qps = 1000;
  kube::QueueStatusPublisher publisher(
      client_.get(), [&listed](int32_t) { return listed; }, [] { return true; }, po, nullptr);
  publisher.RunOnce();
  EXPECT_EQ(Annotation(*api_, "team-a/job", kAnnotationEstimatedStart), "2027-01-15T08:00:00Z");
  listed[0].estimated_start_unix = -1;
  publisher.RunOnce();
  auto pod = api_->Get("pods", "team-a/job");
  ASSERT_TRUE(pod.has_value());
  EXPECT_FALSE((*pod)["metadata"]["annotations"].contains(kAnnotationEstimatedStart)) << *pod;
}

TEST_F(QueueStatusTest, QueueCommandListsANamespaceInQueueOrder) {
  Json second = PodJson("team-a", "second", 4);
  second["metadata"]["annotations"] = {{codec::kQueuePositionAnnotation, "2"},
                                       {codec::kQueueReasonAnnotation, "gpusched: behind first"},
                                       {kAnnotationEstimatedStart, "2027-01-15T08:00:00Z"}};
  Json first = PodJson("team-a", "first", 8);
  first["metadata"]["annotations"] = {{codec::kQueuePositionAnnotation, "1"},
                                      {codec::kQueueReasonAnnotation, "gpusched: at quota"}};
  api_->Put("pods", second);
  api_->Put("pods", first);
  api_->Put("pods", PodJson("team-b", "elsewhere", 1));
  api_->Put("pods", PodJson("team-a", "running", 2, "h0", "0,1", "Running"));
  const std::string kubeconfig =
      WriteTempFile("queue_cmd_kubeconfig", KubeconfigYaml(api_->port(), Pki().ca_pem, kToken));
  const std::string log = ::testing::TempDir() + "/queue_cmd.log";
  std::remove(log.c_str());
  Child c(GPUSCHED_BINARY, {"queue", "-n", "team-a", "--kubeconfig", kubeconfig}, log);
  ASSERT_EQ(c.Wait(), 0) << ReadAll(log);
  const std::string out = ReadAll(log);
  EXPECT_THAT(out, HasSubstr("POSITION ESTIMATED START"));
  EXPECT_THAT(out, HasSubstr("2027-01-15T08:00:00Z"));
  const size_t a = out.find("first"), b = out.find("second");
  ASSERT_NE(a, std::string::npos) << out;
  ASSERT_NE(b, std::string::npos) << out;
  EXPECT_LT(a, b) << out;  // queue order, not name or creation order
  EXPECT_THAT(out, HasSubstr("at quota"));
  EXPECT_EQ(out.find("elsewhere"), std::string::npos) << out;  // another namespace
  EXPECT_EQ(out.find("running"), std::string::npos) << out;    // not pending
}

TEST_F(QueueStatusTest, QueueCommandUsesTheContextsNamespaceWithoutDashN) {
  api_->Put("pods", PodJson("team-a", "mine", 8));
  api_->Put("pods", PodJson("default", "theirs", 8));
  // The fake's kubeconfig with `namespace: team-a` in its only context.
  std::string yaml = KubeconfigYaml(api_->port(), Pki().ca_pem, kToken);
  const std::string user = "    user: gpusched\n";
  const size_t at = yaml.find(user);
  ASSERT_NE(at, std::string::npos) << yaml;
  yaml.insert(at + user.size(), "    namespace: team-a\n");
  const std::string kubeconfig = WriteTempFile("queue_cmd_ns_kubeconfig", yaml);
  const std::string log = ::testing::TempDir() + "/queue_cmd_ns.log";
  std::remove(log.c_str());
  Child c(GPUSCHED_BINARY, {"queue", "--kubeconfig", kubeconfig}, log);
  ASSERT_EQ(c.Wait(), 0) << ReadAll(log);
  const std::string out = ReadAll(log);
  EXPECT_THAT(out, HasSubstr("mine"));
  EXPECT_EQ(out.find("theirs"), std::string::npos) << out;
  // -n still wins over the context.
  std::remove(log.c_str());
  Child d(GPUSCHED_BINARY, {"queue", "-n", "default", "--kubeconfig", kubeconfig}, log);
  ASSERT_EQ(d.Wait(), 0) << ReadAll(log);
  EXPECT_THAT(ReadAll(log), HasSubstr("theirs"));
  EXPECT_EQ(ReadAll(log).find("mine"), std::string::npos) << ReadAll(log);
}

}  // namespace
}  // namespace gpusched::testing
