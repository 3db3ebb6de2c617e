// PodJobs, the source's map from a pod to the Job that controls it: which
// pods a set of changed Jobs names (by namespace and name, each pod with
// its Job's name and uid), after pods are added, moved to another Job,
// removed, or the map is cleared; Kubernetes uids and uids of any other
// shape alike (upper case, short, dashes elsewhere: kept as text), and a
// differential test against a plain map through random changes.
#include "scheduler/kube/pod_jobs.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace gpusched::kube {
namespace {

constexpr char kUidA[] = "0f8c1b2a-3d4e-4f50-8a6b-7c8d9e0f1a2b";
constexpr char kUidB[] = "e3b0c442-98fc-4c14-9afb-f4c8996fb924";
constexpr char kJobUid[] = "5d41402a-bc4b-4a76-b971-9d911017c592";

// "pod_uid job_name job_uid" of every pod of `jobs`, sorted.
std::set<std::string> PodsOf(const PodJobs& map, const std::vector<std::string>& jobs) {
  absl::flat_hash_set<std::string> keys(jobs.begin(), jobs.end());
  std::set<std::string> out;
  map.ForEachPodOf(keys, [&](const std::string& pod, std::string_view name, std::string_view uid) {
    out.insert(pod + " " + std::string(name) + " " + std::string(uid));
  });
  return out;
}

TEST(PodJobs, NamesThePodsOfTheJobsAsked) {
  PodJobs map;
  map.Set(kUidA, "train", "llm", kJobUid);
  map.Set(kUidB, "train", "llm", kJobUid);
  map.Set("pod-c", "train", "eval", "");  // not a Kubernetes uid; the Job named by label only
  map.Set("pod-d", "other", "llm", "uid-x");
  EXPECT_EQ(map.size(), 4u);
  struct Case {
    std::string name;
    std::vector<std::string> jobs;
    std::set<std::string> pods;
  };
  const std::string a = std::string(kUidA) + " llm " + kJobUid;
  const std::string b = std::string(kUidB) + " llm " + kJobUid;
  const Case cases[] = {
      {"one Job, two pods", {"train/llm"}, {a, b}},
      {"same name, other namespace", {"other/llm"}, {"pod-d llm uid-x"}},
      {"no uid", {"train/eval"}, {"pod-c eval "}},
      {"two Jobs", {"train/eval", "other/llm"}, {"pod-c eval ", "pod-d llm uid-x"}},
      {"a Job with no pods", {"train/none"}, {}},
      {"a name alone is no key", {"llm"}, {}},
      {"nothing asked", {}, {}},
  };
  for (const Case& c : cases) EXPECT_EQ(PodsOf(map, c.jobs), c.pods) << c.name;
}

TEST(PodJobs, FollowsPodsThatMoveOrGoAndAClear) {
  PodJobs map;
  map.Set(kUidA, "train", "llm", kJobUid);
  map.Set(kUidB, "train", "llm", kJobUid);
  // The pod is now another Job's (a uid reused cannot happen in the API, but
  // a pod whose controller changed replaces its entry).
  map.Set(kUidB, "train", "eval", "uid-e");
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(PodsOf(map, {"train/llm"}),
            (std::set<std::string>{std::string(kUidA) + " llm " + kJobUid}));
  EXPECT_EQ(PodsOf(map, {"train/eval"}),
            (std::set<std::string>{std::string(kUidB) + " eval uid-e"}));
  map.Erase(kUidA);
  map.Erase("never-there");
  EXPECT_EQ(map.size(), 1u);
  EXPECT_TRUE(PodsOf(map, {"train/llm"}).empty());
  // The Job comes back with a new pod after its last pod went.
  map.Set("pod-z", "train", "llm", kJobUid);
  EXPECT_EQ(PodsOf(map, {"train/llm"}),
            (std::set<std::string>{std::string("pod-z llm ") + kJobUid}));
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_TRUE(PodsOf(map, {"train/llm", "train/eval"}).empty());
}

TEST(PodJobs, UidsOfEveryShapeComeBackAsGiven) {
  PodJobs map;
  const std::vector<std::string> uids = {
      kUidA,                                   // packed
      "0F8C1B2A-3D4E-4F50-8A6B-7C8D9E0F1A2B",  // upper case: kept as text, not lowered
      "0f8c1b2a-3d4e-4f50-8a6b-7c8d9e0f1a2",   // one short
      "0f8c1b2a3d4e-4f50-8a6b-7c8d9e0f1a2b-",  // dashes elsewhere
      "0f8c1b2a-3d4e-4f50-8a6b-7c8d9e0f1a2g",  // not hex
      "00000000-0000-0000-0000-000000000000",
      "ffffffff-ffff-ffff-ffff-ffffffffffff",
      "",
  };
  std::set<std::string> want;
  for (const std::string& uid : uids) {
    map.Set(uid, "ns", "job", "j");
    want.insert(uid + " job j");
  }
  EXPECT_EQ(map.size(), uids.size());
  EXPECT_EQ(PodsOf(map, {"ns/job"}), want);
  for (const std::string& uid : uids) map.Erase(uid);
  EXPECT_EQ(map.size(), 0u);
  EXPECT_TRUE(PodsOf(map, {"ns/job"}).empty());
}

// Random sets, moves and erases over packed and text uids, a Job's last pod
// leaving and the Job coming back (its slot reused), against a plain map.
TEST(PodJobs, EqualsAPlainMapThroughRandomChanges) {
  std::mt19937 rng(7);
  std::vector<std::string> pods;
  for (int i = 0; i < 40; ++i) {
    char b[40];
    std::snprintf(b, sizeof b, "%08x-aaaa-4bbb-8ccc-%012x", i * 2654435761u, i);
    pods.push_back(i % 4 == 0 ? "pod-" + std::to_string(i) : b);
  }
  // Kubernetes-length names (held on the heap) and one short enough to sit
  // inside its string.
  const std::vector<std::tuple<std::string, std::string, std::string>> jobs = {
      {"team-a", "llama-7b-finetune-train", kJobUid},
      {"team-a", "llama-7b-finetune-eval", kUidA},
      {"team-b", "llama-7b-finetune-train", kUidB},
      {"team-b", "llama-7b-finetune-train", "recreated-job-uid"},  // same name, another uid
      {"c", "x", ""}};
  std::map<std::string, size_t> reference;  // pod uid -> index into jobs
  PodJobs map;
  for (int step = 0; step < 4000; ++step) {
    const std::string& pod = pods[rng() % pods.size()];
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      const size_t j = rng() % jobs.size();
      map.Set(pod, std::get<0>(jobs[j]), std::get<1>(jobs[j]), std::get<2>(jobs[j]));
      reference[pod] = j;
    } else if (op < 9) {
      map.Erase(pod);
      reference.erase(pod);
    } else if (step % 500 == 0) {
      map.Clear();
      reference.clear();
    }
    ASSERT_EQ(map.size(), reference.size()) << "step " << step;
    for (const auto& [ns, name, uid] : jobs) {
      std::set<std::string> want;
      for (const auto& [p, j] : reference) {
        const auto& [jns, jname, juid] = jobs[j];
        if (jns == ns && jname == name) want.insert(p + " " + jname + " " + juid);
      }
      ASSERT_EQ(PodsOf(map, {ns + "/" + name}), want)
          << "step " << step << " job " << ns << "/" << name;
    }
  }
}

}  // namespace
}  // namespace gpusched::kube
