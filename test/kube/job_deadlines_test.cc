// Jobs' activeDeadlineSeconds in runtime estimates, through the fake API
// server: the Job codec (fields named in errors, a bad Job never failing its
// list), the controlling Job of a pod, and KubeClusterSource + JobDeadlines
// + QueueManager: a pod of a Job gets the Job's remaining time with the
// source named; the Job changed, deleted, relisted after 410; a malformed
// Job skipped; Jobs forbidden by RBAC (403) changing nothing else.
#include "scheduler/kube/job_deadlines.h"

#include <gtest/gtest.h>

#include <atomic>

#include "scheduler/codec/job_codec.h"
#include "test/kube/api_harness.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

constexpr char kJobs[] = "batch/jobs";
constexpr int64_t kJobStart = 1767225600;  // 2026-01-01T00:00:00Z
constexpr int64_t kNow = kJobStart + 1000;

Json JobJson(const std::string& ns, const std::string& name, Json deadline,
             const std::string& start = "2026-01-01T00:00:00Z") {
  Json j = {{"apiVersion", "batch/v1"},
            {"kind", "Job"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "job-uid-" + name}}},
            {"spec", {{"parallelism", 1}, {"template", Json::object()}}},
            {"status", Json::object()}};
  if (!deadline.is_null()) j["spec"]["activeDeadlineSeconds"] = deadline;
  if (!start.empty()) j["status"]["startTime"] = start;
  return j;
}

// A pending pod the Job controller made for Job `job` (uid as JobJson's
// unless `uid` says otherwise), annotated to run 30 minutes.
Json JobPod(const std::string& ns, const std::string& name, const std::string& job,
            const std::string& uid = "") {
  Json p = PodJson(ns, name, 1);
  p["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "batch/v1"},
                                                   {"kind", "Job"},
                                                   {"name", job},
                                                   {"uid", uid.empty() ? "job-uid-" + job : uid},
                                                   {"controller", true},
                                                   {"blockOwnerDeletion", true}}});
  p["metadata"]["labels"] = {{"batch.kubernetes.io/job-name", job}, {"job-name", job}};
  p["metadata"]["annotations"]["gpusched.io/expected-runtime"] = "30m";
  return p;
}

TEST(JobCodec, ReadsDeadlineAndStartAndNamesTheFieldOfABadJob) {
  struct Case {
    std::string name;
    Json deadline;
    Json start;  // status.startTime
    int64_t deadline_s, start_unix;
    std::string error;  // substring; "" for none
  };
  const Case cases[] = {
      {"both", 3600, "2026-01-01T00:00:00Z", 3600, kJobStart, ""},
      {"not started", 600, nullptr, 600, 0, ""},
      {"no deadline", nullptr, "2026-01-01T00:00:00Z", 0, kJobStart, ""},
      {"string deadline", "1h", nullptr, 0, 0, "spec.activeDeadlineSeconds: must be a positive"},
      {"zero deadline", 0, nullptr, 0, 0, "spec.activeDeadlineSeconds: must be a positive"},
      {"negative deadline", -5, nullptr, 0, 0, "got -5"},
      {"fractional deadline", 1.5, nullptr, 0, 0, "spec.activeDeadlineSeconds"},
      {"bad start", 60, "yesterday", 0, 0, "status.startTime: bad timestamp 'yesterday'"},
      {"start not a string", 60, 12, 0, 0, "status.startTime: must be an RFC 3339"},
  };
  for (const Case& c : cases) {
    Json j = JobJson("ns", "j", c.deadline, "");
    if (!c.start.is_null()) j["status"]["startTime"] = c.start;
    codec::JobDeadline d = codec::DecodeJob(j.dump());
    EXPECT_EQ(d.deadline_s, c.deadline_s) << c.name;
    EXPECT_EQ(d.start_unix, c.start_unix) << c.name;
    EXPECT_EQ(d.name, "j") << c.name;
    if (c.error.empty()) {
      EXPECT_EQ(d.error, "") << c.name;
    } else {
      EXPECT_NE(d.error.find(c.error), std::string::npos) << c.name << ": " << d.error;
    }
  }
  // Shapes that are not a Job at all.
  for (const std::string& body :
       {std::string("[]"), std::string("{\"metadata\": 3}"), std::string("{\"spec\": {}}"),
        std::string("{\"metadata\": {\"name\": \"x\"}, \"spec\": []}"), std::string("{")}) {
    EXPECT_NE(codec::DecodeJob(body).error, "") << body;
  }
}

TEST(JobCodec, ABadJobDoesNotFailItsListOrEvent) {
  Json list = {{"kind", "JobList"},
               {"metadata", {{"resourceVersion", "42"}, {"continue", "c1"}}},
               {"items", Json::array({JobJson("a", "good", 60), JobJson("a", "bad", "x"), 7})}};
  auto page = codec::DecodeJobList(list.dump());
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->resource_version, "42");
  EXPECT_EQ(page->continue_token, "c1");
  ASSERT_EQ(page->jobs.size(), 3u);
  EXPECT_EQ(page->jobs[0].deadline_s, 60);
  EXPECT_NE(page->jobs[1].error, "");
  EXPECT_EQ(page->jobs[2].error, "items[2]: must be an object");
  EXPECT_FALSE(codec::DecodeJobList("{\"items\": 3}").ok());

  auto ev =
      codec::DecodeJobEvent(Json{{"type", "MODIFIED"}, {"object", JobJson("a", "j", 90)}}.dump());
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->type, codec::WatchEvent::Type::kModified);
  EXPECT_EQ(ev->job.deadline_s, 90);
  auto gone = codec::DecodeJobEvent(
      Json{{"type", "ERROR"}, {"object", {{"kind", "Status"}, {"code", 410}}}}.dump());
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->type, codec::WatchEvent::Type::kError);
  EXPECT_EQ(gone->status.code, 410);
  EXPECT_FALSE(codec::DecodeJobEvent(Json{{"type", "SOMETHING"}, {"object", {}}}.dump()).ok());
}

TEST(JobCodec, APodsControllingJob) {
  struct Case {
    std::string name;
    Json owners;  // metadata.ownerReferences
    Json labels;
    std::string job, uid;
  };
  auto ref = [](const std::string& api, const std::string& kind, bool controller) {
    return Json{{"apiVersion", api},
                {"kind", kind},
                {"name", "j"},
                {"uid", "u"},
                {"controller", controller}};
  };
  const Json label = {{"batch.kubernetes.io/job-name", "from-label"}};
  const Case cases[] = {
      {"controller Job", Json::array({ref("batch/v1", "Job", true)}), nullptr, "j", "u"},
      {"owner, not controller", Json::array({ref("batch/v1", "Job", false)}), nullptr, "", ""},
      {"another group's Job", Json::array({ref("example.com/v1", "Job", true)}), nullptr, "", ""},
      {"a ReplicaSet", Json::array({ref("apps/v1", "ReplicaSet", true)}), nullptr, "", ""},
      {"the label alone", nullptr, label, "from-label", ""},
      {"the legacy label is not enough", nullptr, {{"job-name", "x"}}, "", ""},
      {"malformed owners, then the label", "nope", label, "from-label", ""},
  };
  for (const Case& c : cases) {
    Json p = PodJson("ns", "p", 1);
    if (!c.owners.is_null()) p["metadata"]["ownerReferences"] = c.owners;
    if (!c.labels.is_null()) p["metadata"]["labels"] = c.labels;
    Json list = {{"kind", "PodList"}, {"metadata", {{"resourceVersion", "1"}}}, {"items", {p}}};
    codec::KubeDecoder dec;
    std::string body = list.dump();
    auto page = dec.DecodeListPage(body, codec::ObjectKind::kPod);
    ASSERT_TRUE(page.ok()) << c.name << ": " << page.status();
    ASSERT_EQ(page->pods.size(), 1u) << c.name;
    EXPECT_EQ(page->pods[0].job_name, c.job) << c.name;
    EXPECT_EQ(page->pods[0].job_uid, c.uid) << c.name;
  }
}

class JobDeadlinesTest : public FakeApiTest {
 protected:
  void SetUp() override {
    FakeApiTest::SetUp();
    api_->Put("nodes", NodeJson("gpu-0", 8));
  }
  void TearDown() override {
    if (jobs_) jobs_->Stop();
    if (src_) src_->Stop();
  }
  // The source with Jobs' deadlines, and a queue whose clock says kNow.
  void StartAll() {
    src_ = NewSource(client_.get(), &metrics_);
    kube::JobDeadlinesOptions jo;
    jo.watch_timeout_seconds = 2;
    jo.backoff_initial = std::chrono::milliseconds(20);
    jo.refused_retry = std::chrono::milliseconds(50);
    jobs_ = std::make_unique<kube::JobDeadlines>(client_.get(), jo, &metrics_);
    src_->set_job_deadlines(jobs_.get());
    jobs_->Start([this](const absl::flat_hash_set<std::string>& jobs) {
      ++changes_;
      src_->RefillJobs(jobs);
    });
    ASSERT_TRUE(StartSynced(*src_, state_));
    queue_ = NewQueue(&state_, DefaultFramework(), {.now_ms = [] { return kNow * 1000; }});
  }
  // The pod's runtime estimate after a refresh.
  queue::PodReport Estimate(const std::string& ns, const std::string& name) {
    queue_->Resync();
    queue_->RefreshEstimates();
    auto r = queue_->ExplainPod(ns, name);
    EXPECT_TRUE(r.has_value()) << ns << "/" << name;
    return r.value_or(queue::PodReport{});
  }
  int64_t DecodeErrors() {
    return metrics_.CounterValue("gpusched_kube_decode_errors_total", {{"resource", "jobs"}});
  }
  // Waits until the state shows `name` with the Job deadline `deadline_s`.
  bool StateDeadline(const std::string& name, int64_t deadline_s) {
    return WaitFor([&] {
      auto p = state_.FindPodByName("train", name);
      return p && p->job_deadline_s == deadline_s;
    });
  }

  ClusterState state_{ShippedTemplates()};
  std::unique_ptr<kube::KubeClusterSource> src_;
  std::unique_ptr<kube::JobDeadlines> jobs_;
  std::unique_ptr<queue::QueueManager> queue_;
  std::atomic<int> changes_{0};
};

TEST_F(JobDeadlinesTest, APodOfAJobGetsWhatIsLeftOfItsDeadlineAndFollowsTheJob) {
  // Nothing to do while the cluster has no Job: the annotation applies.
  api_->Put("pods", JobPod("train", "llm-0", "llm"));
  StartAll();
  ASSERT_TRUE(WaitFor([&] { return jobs_->listed(); }));
  queue::PodReport r = Estimate("train", "llm-0");
  EXPECT_EQ(r.runtime_source, "annotation");
  EXPECT_EQ(r.runtime_seconds, 1800);

  // The Job appears (started at kJobStart, 1 h): 2600 s of it are left at
  // kNow, before the pod's annotation.
  api_->Put(kJobs, JobJson("train", "llm", 3600));
  ASSERT_TRUE(StateDeadline("llm-0", 3600));
  r = Estimate("train", "llm-0");
  EXPECT_EQ(r.runtime_source, "job-activeDeadlineSeconds");
  EXPECT_EQ(r.runtime_seconds, 2600);
  EXPECT_NE(r.runtime_detail.find("Job spec.activeDeadlineSeconds 3600 from its status.startTime"),
            std::string::npos)
      << r.runtime_detail;

  // The deadline raised to 2 h moves the estimate.
  api_->Put(kJobs, JobJson("train", "llm", 7200));
  ASSERT_TRUE(StateDeadline("llm-0", 7200));
  EXPECT_EQ(Estimate("train", "llm-0").runtime_seconds, 6200);

  // After a compaction (watch 410) the relist still carries the Job.
  const int lists =
      api_->requests("GET /apis/batch/v1/jobs") - api_->requests("GET /apis/batch/v1/jobs?watch");
  api_->CompactAndDropWatches();
  ASSERT_TRUE(WaitFor([&] {
    return api_->requests("GET /apis/batch/v1/jobs") -
               api_->requests("GET /apis/batch/v1/jobs?watch") >
           lists;
  }));
  api_->Put(kJobs, JobJson("train", "llm", 5400));
  ASSERT_TRUE(StateDeadline("llm-0", 5400));
  EXPECT_EQ(Estimate("train", "llm-0").runtime_seconds, 4400);

  // A Job pod created after the Job is filled as it enters.
  api_->Put("pods", JobPod("train", "llm-1", "llm"));
  ASSERT_TRUE(StateDeadline("llm-1", 5400));

  // The Job deleted: back to the annotation.
  api_->Delete(kJobs, "train/llm");
  ASSERT_TRUE(StateDeadline("llm-0", 0));
  r = Estimate("train", "llm-0");
  EXPECT_EQ(r.runtime_source, "annotation");
  EXPECT_EQ(r.runtime_seconds, 1800);
}

TEST_F(JobDeadlinesTest, OnlyTheJobThatControlsThePodCounts) {
  api_->Put(kJobs, JobJson("train", "llm", 3600));
  api_->Put(kJobs, JobJson("train", "later", 600, ""));  // not started: all 600 s
  api_->Put("pods", JobPod("train", "same-name", "llm", "uid-of-an-older-job"));
  api_->Put("pods", JobPod("train", "waiting", "later"));
  Json other_ns = JobPod("other", "p", "llm");
  api_->Put("pods", other_ns);
  StartAll();
  ASSERT_TRUE(StateDeadline("waiting", 600));
  queue::PodReport r = Estimate("train", "waiting");
  EXPECT_EQ(r.runtime_source, "job-activeDeadlineSeconds");
  EXPECT_EQ(r.runtime_seconds, 600);
  EXPECT_NE(r.runtime_detail.find("has not started"), std::string::npos) << r.runtime_detail;
  // A Job of the same name with another uid, or in another namespace, is
  // not the pod's.
  EXPECT_EQ(state_.FindPodByName("train", "same-name")->job_deadline_s, 0);
  EXPECT_EQ(state_.FindPodByName("other", "p")->job_deadline_s, 0);
  EXPECT_EQ(Estimate("train", "same-name").runtime_source, "annotation");
}

TEST_F(JobDeadlinesTest, AMalformedJobIsSkippedWithItsReasonAndBlocksNothing) {
  api_->Put(kJobs, JobJson("train", "bad", "1h"));
  api_->Put(kJobs, JobJson("train", "good", 3600));
  api_->Put("pods", JobPod("train", "b", "bad"));
  api_->Put("pods", JobPod("train", "g", "good"));
  ::testing::internal::CaptureStderr();
  StartAll();
  ASSERT_TRUE(StateDeadline("g", 3600));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("skipping Job train/bad: spec.activeDeadlineSeconds: must be a positive "
                     "integer, got \"1h\""),
            std::string::npos)
      << log;
  EXPECT_EQ(Estimate("train", "g").runtime_seconds, 2600);
  queue::PodReport r = Estimate("train", "b");
  EXPECT_EQ(r.runtime_source, "annotation");
  EXPECT_EQ(r.runtime_seconds, 1800);
  // Each undecodable version counts once, from the list and from a watch
  // event (a Job that decodes does not).
  EXPECT_EQ(DecodeErrors(), 1);
  api_->Put(kJobs, JobJson("train", "bad", -5));
  EXPECT_TRUE(WaitFor([&] { return DecodeErrors() == 2; })) << DecodeErrors();
  // Fixed, it counts.
  api_->Put(kJobs, JobJson("train", "bad", 1200));
  ASSERT_TRUE(StateDeadline("b", 1200));
  EXPECT_EQ(Estimate("train", "b").runtime_seconds, 200);
  EXPECT_EQ(DecodeErrors(), 2);
}

TEST_F(JobDeadlinesTest, JobsForbiddenByRbacChangeNothingElseAndAreLoggedOnce) {
  api_->Forbid("/apis/batch/v1/jobs");
  api_->Put(kJobs, JobJson("train", "llm", 3600));
  api_->Put("pods", JobPod("train", "llm-0", "llm"));
  ::testing::internal::CaptureStderr();
  StartAll();
  // Asked again and again (every 50 ms here), logged once.
  ASSERT_TRUE(WaitFor([&] { return api_->requests("GET /apis/batch/v1/jobs") >= 4; }));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(jobs_->refused());
  const std::string line = "batch/v1 jobs: HTTP 403";
  const size_t first = log.find(line);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(line, first + 1), std::string::npos) << log;
  // The pod is there and estimated as without Jobs.
  ASSERT_TRUE(state_.FindPodByName("train", "llm-0").has_value());
  queue::PodReport r = Estimate("train", "llm-0");
  EXPECT_EQ(r.runtime_source, "annotation");
  EXPECT_EQ(r.runtime_seconds, 1800);
}

}  // namespace
}  // namespace gpusched::testing
