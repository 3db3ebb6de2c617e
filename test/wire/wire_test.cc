// Golden wire tests: kube-scheduler's sample bodies (research extender-api.md
// §4) decoded, run through ExtenderService, encoded, and compared as parsed
// JSON with the golden responses. GPUSCHED_UPDATE_GOLDEN=1 rewrites them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "gpusched/core/extender_service.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/extender_codec.h"
#include "test/testing/builders.h"

namespace gpusched {
namespace {

using json = nlohmann::json;
using testing::PodBuilder;

std::string Golden(const std::string& name) {
  std::ifstream in(std::string(GPUSCHED_SOURCE_DIR) + "/test/wire/golden/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectGolden(const std::string& name, const std::string& actual) {
  if (std::getenv("GPUSCHED_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(std::string(GPUSCHED_SOURCE_DIR) + "/test/wire/golden/" + name)
        << json::parse(actual).dump(2) << "\n";
  }
  EXPECT_EQ(json::parse(actual), json::parse(Golden(name))) << actual;
}

class WireTest : public ::testing::Test {
 protected:
  WireTest() {
    NodeSpec h1 = testing::Hgx8H100("gpu-h100-001");
    NodeSpec h2 = testing::Hgx8H100("gpu-h100-002");
    h2.gpu_allocatable = 0;  // device plugin reports every device unhealthy
    NodeSpec h7 = testing::Hgx8H100("gpu-h100-007");
    NodeSpec mig = testing::DgxA100("gpu-a100-mig-003");
    mig.gpu_allocatable = 4;
    state_ = testing::MakeState(
        {h1, h2, h7, mig},
        {PodBuilder("busy", "ml-team-b").Gpus(6).OnNode("gpu-h100-001", 0x3f).Build()});
    service_ = std::make_unique<ExtenderService>(state_.get(),
                                                 *policy::Framework::Create(ScoringConfig{}));
    service_->SetReady(true);
  }
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ExtenderService> service_;
  codec::RequestDecoder decoder_;
};

TEST_F(WireTest, FilterCacheMode) {
  std::string body = Golden("filter_cache_request.json");
  auto args = decoder_.DecodeExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->cache_mode);
  EXPECT_EQ(args->pod.gpu.count, 4);
  EXPECT_EQ(args->pod.priority, 100000);
  EXPECT_EQ(args->pod.priority_class, "batch-high");
  EXPECT_EQ(args->pod.ns, "ml-team-a");
  EXPECT_EQ(args->pod.cpu_milli, 32000);
  EXPECT_EQ(args->pod.memory_mib, 256 * 1024);
  ASSERT_EQ(args->node_names.size(), 3u);
  FilterOutcome out = service_->Filter(*args);
  ExpectGolden("filter_cache_response.json", codec::EncodeFilterResult(*args, out));
}

// Many nodes, few reasons: each distinct reason is in the table once, and
// every failure points at the reason its node would get on its own.
TEST_F(WireTest, FilterSharesOneReasonPerDistinctAnswer) {
  ExtenderArgs args;
  args.pod = PodBuilder("p", "ml-team-a").Gpus(4).Build();
  std::vector<std::string> names;
  for (int k = 0; k < 100; ++k) {
    for (const char* n : {"gpu-h100-001", "gpu-h100-002", "gpu-h100-007", "gpu-a100-mig-003"}) {
      names.push_back(n);
    }
    names.push_back("not-a-node-" + std::to_string(k));
  }
  for (const std::string& n : names) args.node_names.push_back(n);
  FilterOutcome out = service_->Filter(args);
  // Each node once (the 99 repeats of the four real nodes are left out).
  EXPECT_EQ(out.passed.size(), 2u);  // h100-007 and the 4-GPU A100
  EXPECT_EQ(out.failed.size(), 1u);
  EXPECT_EQ(out.unresolvable.size(), 101u);  // h100-002 and the 100 unknown names
  std::set<std::string> distinct(out.reasons.begin(), out.reasons.end());
  EXPECT_EQ(distinct.size(), out.reasons.size());
  EXPECT_EQ(out.reasons.size(), 3u);  // 2 of 8 free; no healthy GPUs; unknown node
  for (const auto* list : {&out.failed, &out.unresolvable}) {
    for (const FilterOutcome::Failure& f : *list) {
      ExtenderArgs one = args;
      one.node_names = {args.node_names[f.node]};
      FilterOutcome alone = service_->Filter(one);
      ASSERT_EQ(alone.failed.size() + alone.unresolvable.size(), 1u);
      const FilterOutcome::Failure g =
          alone.failed.empty() ? alone.unresolvable[0] : alone.failed[0];
      EXPECT_EQ(out.reason(f), alone.reason(g)) << args.node_names[f.node];
    }
  }
}

TEST_F(WireTest, FilterNodeListModeEchoesNodes) {
  std::string body = Golden("filter_nodelist_request.json");
  json request = json::parse(body);
  auto args = decoder_.DecodeExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_FALSE(args->cache_mode);
  EXPECT_EQ(args->pod.gpu.count, 2);
  FilterOutcome out = service_->Filter(*args);
  json response = json::parse(codec::EncodeFilterResult(*args, out));
  EXPECT_TRUE(response["NodeNames"].is_null());
  ASSERT_EQ(response["Nodes"]["items"].size(), 2u);
  // Echoed verbatim: the same objects kube-scheduler sent, including the "Port" quirk.
  EXPECT_EQ(response["Nodes"]["items"], request["Nodes"]["items"]);
  EXPECT_EQ(response["Nodes"]["items"][0]["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250);
  EXPECT_EQ(response["Error"], "");
}

TEST_F(WireTest, PrioritizeBareArray) {
  std::string body = Golden("filter_cache_request.json");
  auto args = decoder_.DecodeExtenderArgs(body);
  ASSERT_TRUE(args.ok());
  ExpectGolden("prioritize_response.json",
               codec::EncodePrioritizeResult(*args, service_->Prioritize(*args)));
  // Scores are clamped to MaxExtenderPriority on the wire.
  json clamped = json::parse(codec::EncodePrioritizeResult(*args, {99, 0, 7}));
  EXPECT_EQ(clamped[0]["Score"], 10);
  EXPECT_EQ(clamped[1]["Score"], 0);
  EXPECT_EQ(clamped[2]["Score"], 7);
  EXPECT_EQ(clamped[0]["Host"], "gpu-h100-001");
  // A repeated name's position (a negative score) is left out.
  json skipped = json::parse(
      codec::EncodePrioritizeResult(*args, {3, ExtenderService::kRepeatedNodeScore, 7}));
  ASSERT_EQ(skipped.size(), 2u) << skipped.dump();
  EXPECT_EQ(skipped[1]["Host"], "gpu-h100-007");
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A node named twice is decided once (first occurrence wins): no repeated
// JSON key in FailedNodes / FailedAndUnresolvableNodes, no repeated name in
// NodeNames, Nodes.items or the prioritize list.
TEST_F(WireTest, RepeatedNodeNamesAreAnsweredOnce) {
  json request = json::parse(Golden("filter_cache_request.json"));
  request["NodeNames"] = {"gpu-h100-001", "gpu-h100-002", "gpu-h100-007", "gpu-h100-002",
                          "ghost",        "gpu-h100-001", "ghost",        "gpu-h100-007"};
  std::string body = request.dump();
  auto args = decoder_.DecodeExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status();
  const std::string filtered = codec::EncodeFilterResult(*args, service_->Filter(*args));
  ExpectGolden("filter_repeated_names_response.json", filtered);
  for (const char* name : {"gpu-h100-001", "gpu-h100-002", "gpu-h100-007", "ghost"}) {
    EXPECT_EQ(Occurrences(filtered, StrCat("\"", name, "\"")), 1u) << name << " in " << filtered;
  }
  const std::string prioritized = codec::EncodePrioritizeResult(*args, service_->Prioritize(*args));
  ExpectGolden("prioritize_repeated_names_response.json", prioritized);
  EXPECT_EQ(json::parse(prioritized).size(), 4u) << prioritized;

  // Node-list mode: the repeated Node object is echoed once.
  json list = json::parse(Golden("filter_nodelist_request.json"));
  list["Nodes"]["items"].push_back(list["Nodes"]["items"][0]);
  std::string list_body = list.dump();
  auto list_args = decoder_.DecodeExtenderArgs(list_body);
  ASSERT_TRUE(list_args.ok()) << list_args.status();
  json answer = json::parse(codec::EncodeFilterResult(*list_args, service_->Filter(*list_args)));
  EXPECT_EQ(answer["Nodes"]["items"].size() + answer["FailedNodes"].size() +
                answer["FailedAndUnresolvableNodes"].size(),
            list["Nodes"]["items"].size() - 1)
      << answer.dump();
}

// Each thread remembers the last name list it resolved, one for the filter
// and one for prioritize: a list equal to it (kube-scheduler's next cycle)
// is answered from that memory, a list that differs in one name (of
// another length, or of the same length, where only the bytes tell), or the
// same list after the node set changed, is looked up again. Every answer
// equals a fresh thread's (empty memory). A list resolved in advance
// (ExtenderService::Resolve) answers alike, and not at all once the node set
// has changed.
TEST_F(WireTest, RepeatedNameListsAnswerAsAFreshLookup) {
  json request = json::parse(Golden("filter_cache_request.json"));
  auto filter = [&](std::vector<std::string> names) {
    request["NodeNames"] = names;
    std::string body = request.dump();
    auto args = decoder_.DecodeExtenderArgs(body);
    EXPECT_TRUE(args.ok()) << args.status();
    const std::string here = codec::EncodeFilterResult(*args, service_->Filter(*args));
    std::string fresh;
    std::thread([&] { fresh = codec::EncodeFilterResult(*args, service_->Filter(*args)); }).join();
    EXPECT_EQ(here, fresh);
    return here;
  };
  // Prioritize keeps a memory of its own (the filter's survivors).
  auto prioritize = [&](std::vector<std::string> names) {
    request["NodeNames"] = names;
    std::string body = request.dump();
    auto args = decoder_.DecodeExtenderArgs(body);
    EXPECT_TRUE(args.ok()) << args.status();
    const std::string here = codec::EncodePrioritizeResult(*args, service_->Prioritize(*args));
    std::string fresh;
    std::thread([&] {
      fresh = codec::EncodePrioritizeResult(*args, service_->Prioritize(*args));
    }).join();
    EXPECT_EQ(here, fresh);
    return here;
  };
  const std::vector<std::string> a = {"gpu-h100-001", "gpu-h100-002", "ghost", "gpu-h100-007",
                                      "gpu-h100-001"};
  std::vector<std::string> b = a;
  b[2] = "gpu-a100-mig-003";  // one name differs, and its length
  std::vector<std::string> c = a;
  c[1] = "gpu-h100-003";  // one name differs, every length the same
  const std::string first = filter(a);
  EXPECT_EQ(filter(a), first);
  // An in-process caller's list resolved once answers alike.
  std::vector<std::string_view> views(a.begin(), a.end());
  ExtenderArgs prepared;
  std::string golden = Golden("filter_cache_request.json");
  prepared.pod = decoder_.DecodeExtenderArgs(golden)->pod;
  prepared.node_names = views;
  prepared.resolved = service_->Resolve(views);
  ExtenderArgs plain = prepared;
  plain.resolved = nullptr;
  EXPECT_EQ(codec::EncodeFilterResult(prepared, service_->Filter(prepared)),
            codec::EncodeFilterResult(plain, service_->Filter(plain)));
  EXPECT_NE(filter(b), first);
  EXPECT_EQ(filter(a), first);
  EXPECT_NE(filter(c), first);
  EXPECT_NE(filter(c).find("\"gpu-h100-003\""), std::string::npos);
  EXPECT_EQ(filter(a), first);
  const std::string scored = prioritize(a);
  EXPECT_EQ(prioritize(a), scored);
  EXPECT_NE(prioritize(c), scored);
  EXPECT_NE(prioritize(b), scored);
  EXPECT_EQ(prioritize(a), scored);
  // The ghost node appears: same list, new node set.
  state_->UpsertNode(testing::Hgx8H100("ghost"));
  state_->Commit();
  const std::string after = filter(a);
  EXPECT_NE(after, first);
  // What was resolved on the old node set is not used on the new one.
  plain.pod = prepared.pod;
  EXPECT_EQ(codec::EncodeFilterResult(prepared, service_->Filter(prepared)),
            codec::EncodeFilterResult(plain, service_->Filter(plain)));
  EXPECT_NE(codec::EncodeFilterResult(prepared, service_->Filter(prepared)).find("\"ghost\""),
            std::string::npos);
  EXPECT_NE(after.find("\"ghost\""), std::string::npos);
}

TEST_F(WireTest, PreemptArgsBothForms) {
  std::string meta = Golden("preempt_meta_request.json");
  auto m = decoder_.DecodePreemptionArgs(meta);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->cache_mode);
  ASSERT_EQ(m->candidates.size(), 2u);
  EXPECT_EQ(m->candidates[0].node, "gpu-h100-002");
  EXPECT_FALSE(m->candidates[0].victim_uids.empty());
  std::string full = Golden("preempt_full_request.json");
  auto f = decoder_.DecodePreemptionArgs(full);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->cache_mode);
  ASSERT_EQ(f->candidates.size(), 1u);
  ASSERT_EQ(f->victim_pods.size(), f->candidates[0].victim_uids.size());
  EXPECT_EQ(f->victim_pods[0].node_name, "gpu-h100-002");
}

TEST(WireKeysTest, GoldenEncodingsFromUpstream) {
  // Key spellings from kube-scheduler's extender/v1 types_test.go.
  PreemptionOutcome p;
  p.nodes.push_back({"foo", {"myuid"}, 1});
  EXPECT_EQ(codec::EncodePreemptionResult(p),
            R"({"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}})");
  EXPECT_EQ(codec::EncodeBindingResult("myerror"), R"({"Error":"myerror"})");
  EXPECT_EQ(codec::EncodePreemptionResult(PreemptionOutcome{}), R"({"NodeNameToMetaVictims":{}})");
  // '%' is doubled: kube-scheduler uses Error as a printf format.
  EXPECT_EQ(codec::EncodeBindingResult("100% full"), R"({"Error":"100%% full"})");
  EXPECT_EQ(codec::EncodeErrorBody("a\"b\n"), R"({"Error":"a\"b\n"})");
  std::string bind =
      R"({"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"})";
  codec::RequestDecoder d;
  auto b = d.DecodeBindingArgs(bind);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->pod_name, "mypodname");
  EXPECT_EQ(b->pod_namespace, "mypodnamespace");
  EXPECT_EQ(b->pod_uid, "mypoduid");
  EXPECT_EQ(b->node, "mynode");
}

TEST(WireKeysTest, FilterResultAlwaysHasEveryKey) {
  ExtenderArgs args;
  args.node_names = {"a", "b", "c"};
  FilterOutcome out;
  out.passed = {0};
  out.Fail(1, "gpusched: 2 of 8 GPUs free, pod needs 4");
  out.FailUnresolvable(2, "gpusched: node has no GPUs");
  EXPECT_EQ(
      codec::EncodeFilterResult(args, out),
      R"({"Nodes":null,"NodeNames":["a"],"FailedNodes":{"b":"gpusched: 2 of 8 GPUs free, pod needs 4"},)"
      R"("FailedAndUnresolvableNodes":{"c":"gpusched: node has no GPUs"},"Error":""})");
}

// Names and reasons that need escaping, at every offset of the 8-byte
// word test, come back unchanged through a JSON parser; '%' in Error is doubled.
TEST(WireKeysTest, AnswersEscapeEveryByteThatNeedsIt) {
  std::vector<std::string> names;
  const std::vector<std::string> specials = {"\"",  "\\", "\n", "\r", "\t", std::string(1, '\x01'),
                                             "\x1f"};
  for (const std::string& special : specials) {
    for (int at = 0; at < 17; ++at) {
      std::string n(17, 'n');
      n.insert(at, special);
      names.push_back(n);
    }
  }
  names.push_back("");
  names.push_back("plain-node-name-longer-than-a-word");
  ExtenderArgs args;
  for (const std::string& n : names) args.node_names.push_back(n);
  FilterOutcome out;
  std::vector<int64_t> scores;
  for (int32_t i = 0; i < static_cast<int32_t>(names.size()); ++i) {
    scores.push_back(i % 13);
    if (i % 3 == 0) out.passed.push_back(i);
    if (i % 3 == 1) out.Fail(i, "reason \"" + names[i] + "\"");
    if (i % 3 == 2) out.FailUnresolvable(i, names[i]);
  }
  const json filter = json::parse(codec::EncodeFilterResult(args, out));
  ASSERT_EQ(filter["NodeNames"].size(), out.passed.size());
  for (size_t k = 0; k < out.passed.size(); ++k) {
    EXPECT_EQ(filter["NodeNames"][k], names[out.passed[k]]);
  }
  ASSERT_EQ(filter["FailedNodes"].size(), out.failed.size());
  for (const auto& f : out.failed) {
    EXPECT_EQ(filter["FailedNodes"][names[f.node]], out.reason(f));
  }
  ASSERT_EQ(filter["FailedAndUnresolvableNodes"].size(), out.unresolvable.size());
  for (const auto& f : out.unresolvable) {
    EXPECT_EQ(filter["FailedAndUnresolvableNodes"][names[f.node]], out.reason(f));
  }
  EXPECT_EQ(filter["Error"], "");

  const json prio = json::parse(codec::EncodePrioritizeResult(args, scores));
  ASSERT_EQ(prio.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(prio[i]["Host"], names[i]);
    EXPECT_EQ(prio[i]["Score"], std::min<int64_t>(scores[i], 10));
  }

  FilterOutcome failed;
  failed.error = "gpusched: 100% \"busy\"\n";
  const json err = json::parse(codec::EncodeFilterResult(args, failed));
  EXPECT_EQ(err["Error"], "gpusched: 100%% \"busy\"\n");
  EXPECT_TRUE(err["NodeNames"].is_null());
}

// Bad input: malformed JSON is a framing error (HTTP 400); well-formed nonsense is not.
TEST(WireBadInputTest, Table) {
  struct Case {
    const char* name;
    std::string body;
    bool ok;
    bool malformed;
  } cases[] = {
      {"empty", "", false, true},
      {"truncated", R"({"Pod":{"metadata":{"name":"x"})", false, true},
      {"not json", "hello", false, true},
      {"array", "[1,2]", false, false},
      {"no pod", R"({"NodeNames":["a"]})", false, false},
      {"pod not object", R"({"Pod":5,"NodeNames":["a"]})", false, false},
      {"names not array", R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":"a"})", false, false},
      {"name not string", R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":[1]})", false, false},
      {"neither names nor nodes",
       R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":null})", false, false},
      {"bad gpu quantity",
       R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"two"}}}]}},"NodeNames":[]})",
       false, false},
      {"fractional gpu",
       R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"0.5"}}}]}},"NodeNames":[]})",
       false, false},
      {"bad topology annotation",
       R"({"Pod":{"metadata":{"name":"p","annotations":{"gpusched.io/topology":"fast"}}},"NodeNames":[]})",
       false, false},
      {"bad timestamp",
       R"({"Pod":{"metadata":{"name":"p","creationTimestamp":"yesterday"}},"NodeNames":[]})", false,
       false},
      {"minimal ok",
       R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":null},"status":{}},"Nodes":null,"NodeNames":["a"]})",
       true, false},
      {"lowercase keys are not kube-scheduler's",
       R"({"pod":{"metadata":{"name":"p"}},"nodenames":["a"]})", false, false},
  };
  codec::RequestDecoder d;
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = d.DecodeExtenderArgs(c.body);
    EXPECT_EQ(r.ok(), c.ok) << r.status();
    if (!r.ok()) {
      EXPECT_EQ(codec::IsMalformedJson(r.status()), c.malformed) << r.status();
    }
  }
  std::string deep(200, '[');
  deep += std::string(200, ']');
  auto r = d.DecodeExtenderArgs(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(codec::IsMalformedJson(r.status()));
}

TEST(WirePodTest, EffectiveGpuRequest) {
  // max(sum over containers, max over init containers); limits win over requests.
  std::string body = R"({"Pod":{"metadata":{"name":"p","namespace":"ns","annotations":{
      "gpusched.io/gpu-model":"A100, H100","gpusched.io/gpu-memory":"40Gi",
      "gpusched.io/topology":"nvlink-required","gpusched.io/gang":"g","gpusched.io/gang-size":"4"}},
    "spec":{"containers":[
      {"resources":{"limits":{"nvidia.com/gpu":"2"},"requests":{"nvidia.com/gpu":"1"}}},
      {"resources":{"requests":{"nvidia.com/gpu":"1"}}}],
     "initContainers":[{"resources":{"limits":{"nvidia.com/gpu":"5"}}}],
     "priority":7,"preemptionPolicy":"Never"}},"NodeNames":[]})";
  codec::RequestDecoder d;
  auto a = d.DecodeExtenderArgs(body);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->pod.gpu.count, 5);  // max(2 + 1, 5)
  EXPECT_EQ(a->pod.gpu.models, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(a->pod.gpu.min_memory_mib, 40960);
  EXPECT_EQ(a->pod.gpu.topology, TopologyMode::kNvlinkRequired);
  EXPECT_EQ(a->pod.gang, "g");
  EXPECT_EQ(a->pod.gang_size, 4);
  EXPECT_TRUE(a->pod.preempt_never);
  EXPECT_EQ(a->pod.priority, 7);
}

// Runtime estimate inputs are carried as given: a malformed value is judged
// (and reported) by the estimate, never a reason to refuse the pod.
TEST(WirePodTest, RuntimeEstimateInputsNeverFailTheDecode) {
  struct Case {
    const char* name;
    const char* spec_extra;
    const char* annotation;
    const char* status;
    int64_t want_deadline;
    const char* want_runtime;
    int64_t want_finish;
  };
  const Case cases[] = {
      {"both set", R"(,"activeDeadlineSeconds":7200)", "2h30m", R"({"phase":"Pending"})", 7200,
       "2h30m", 0},
      {"malformed annotation kept as text", "", "two hours", R"({"phase":"Pending"})", 0,
       "two hours", 0},
      {"negative deadline kept", R"(,"activeDeadlineSeconds":-5)", "", R"({})", -5, "", 0},
      {"deadline not an integer", R"(,"activeDeadlineSeconds":"soon")", "", R"({})", -1, "", 0},
      {"finished: the latest finishedAt", "", "",
       R"({"phase":"Succeeded","containerStatuses":[
           {"state":{"terminated":{"finishedAt":"2026-01-01T00:10:00Z"}}},
           {"state":{"terminated":{"finishedAt":"2026-01-01T00:20:00Z"}}},
           {"state":{"terminated":{"finishedAt":"garbage"}}}]})",
       0, "", 1767226800},
      {"running: no finish", "", "",
       R"({"phase":"Running","containerStatuses":[
           {"state":{"terminated":{"finishedAt":"2026-01-01T00:10:00Z"}}}]})",
       0, "", 0},
  };
  codec::RequestDecoder d;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string ann = *c.annotation
                          ? std::string(R"("gpusched.io/expected-runtime":")") + c.annotation + "\""
                          : "";
    std::string body =
        std::string(R"({"Pod":{"metadata":{"name":"p","namespace":"ns",)") + R"("annotations":{)" +
        ann + R"(}},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"1"}}}])" +
        c.spec_extra + R"(},"status":)" + c.status + R"(},"NodeNames":[]})";
    auto a = d.DecodeExtenderArgs(body);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->pod.active_deadline_s, c.want_deadline);
    EXPECT_EQ(a->pod.expected_runtime, c.want_runtime);
    EXPECT_EQ(a->pod.finish_unix, c.want_finish);
  }
}

// gang-size without a gang name: the gang is the controlling Job (owner
// reference, else the Job controller's label); an explicit name wins; no Job
// (or owner data that is not a Job controller) leaves the pod alone.
TEST(WirePodTest, GangDefaultsToTheControllingJob) {
  struct Case {
    const char* name;
    const char* metadata_extra;
    const char* annotations;
    const char* want_gang;
    const char* want_workload;  // attained service's workload: the gang, else the Job
  };
  const Case cases[] = {
      {"owner reference", R"("ownerReferences":[{"apiVersion":"batch/v1","kind":"Job",
          "name":"llm-sft","uid":"u1","controller":true}])",
       R"("gpusched.io/gang-size":"3")", "llm-sft", "llm-sft"},
      {"owner that is not the controller",
       R"("ownerReferences":[{"kind":"Job","name":"x","controller":false}])",
       R"("gpusched.io/gang-size":"3")", "", ""},
      {"controller that is not a Job",
       R"("ownerReferences":[{"kind":"ReplicaSet","name":"rs","controller":true}])",
       R"("gpusched.io/gang-size":"3")", "", ""},
      {"job-name label", R"("labels":{"batch.kubernetes.io/job-name":"bert","job-name":"old"})",
       R"("gpusched.io/gang-size":"2")", "bert", "bert"},
      {"legacy job-name label", R"("labels":{"job-name":"old"})", R"("gpusched.io/gang-size":"2")",
       "old", "old"},
      {"explicit name wins", R"("ownerReferences":[{"kind":"Job","name":"j","controller":true}])",
       R"("gpusched.io/gang":"g","gpusched.io/gang-size":"2")", "g", "g"},
      {"gang of one is no gang",
       R"("ownerReferences":[{"kind":"Job","name":"j","controller":true}])",
       R"("gpusched.io/gang-size":"1")", "", "j"},
      {"no gang-size", R"("ownerReferences":[{"kind":"Job","name":"j","controller":true}])",
       R"("gpusched.io/gpu-model":"A100")", "", "j"},
      {"malformed owner data", R"("ownerReferences":"Job/j","labels":{"job-name":7})",
       R"("gpusched.io/gang-size":"2")", "", ""},
  };
  codec::RequestDecoder d;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string body =
        std::string(R"({"Pod":{"metadata":{"name":"p","namespace":"ns",)") + c.metadata_extra +
        R"(,"annotations":{)" + c.annotations +
        R"(}},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"8"}}}]}},
                          "NodeNames":[]})";
    auto a = d.DecodeExtenderArgs(body);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->pod.gang, c.want_gang);
    EXPECT_EQ(a->pod.workload, c.want_workload);
    EXPECT_EQ(a->pod.WorkloadKey(), *c.want_workload ? c.want_workload : "p");
  }
}

TEST(WireClusterTest, DemoClusterLoads) {
  std::string body = testing::ReadSourceFile("config/demo-cluster.json");
  codec::RequestDecoder d(256);
  auto objs = d.DecodeClusterList(body);
  ASSERT_TRUE(objs.ok()) << objs.status();
  EXPECT_EQ(objs->nodes.size(), 10u);
  EXPECT_EQ(objs->pods.size(), 10u);  // 7 running or done, 3 pending (config/examples/)
  auto state = std::make_unique<ClusterState>(testing::ShippedTemplates());
  state->Reset(objs->nodes, objs->pods);
  auto snap = state->Commit();
  // bert 4 + finetune 2 + legacy 1 + inference 0.5 + llm-sft 4 + sweep 8; the Succeeded and the
  // pending pods hold nothing.
  EXPECT_EQ(snap->AllocatedGpuMilli(), 19500);
  EXPECT_EQ(snap->Find("t4-03")->healthy_count(), 3);
  EXPECT_EQ(snap->Find("hgx-h100-01")->topology->link(0, 7).nvlinks, 18);  // from its annotation
  EXPECT_EQ(snap->Find("dgx1-v100-01")->topology->link(0, 3).nvlinks, 2);  // template
}

}  // namespace
}  // namespace gpusched
