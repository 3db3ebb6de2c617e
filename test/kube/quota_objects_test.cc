// Quotas as objects: the GPUQuota / ElasticQuota codec (specs, errors that
// name the field, the status patch, `quota export`), the resolution rule
// (one per namespace, duplicates, invalid changes, ElasticQuota fallback),
// the CRD's schema against the decoder, and the whole path through the fake
// API server: quotas created, changed and deleted change admission within a
// watch event; the leader alone writes status; after every step of a random
// workload each status equals the ledger.
#include "scheduler/kube/quota_objects.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "gpusched/policy/framework.h"
#include "scheduler/codec/config_codec.h"
#include "scheduler/codec/quota_object_codec.h"
#include "scheduler/kube/kube_source.h"
#include "scheduler/kube/quota_status.h"
#include "scheduler/queue/queue_wiring.h"
#include "scheduler/queue/quota_ledger.h"
#include "test/kube/api_harness.h"
#include "test/kube/queue_invariants.h"
#include "test/testing/builders.h"

namespace gpusched::testing {
namespace {

using queue::QuotaObject;
using queue::QuotaObjectKind;
using queue::QuotaObjectState;

constexpr char kGpuQuotas[] = "gpusched.io/gpuquotas";
constexpr char kGpuQuotaApi[] = "gpusched.io/v1alpha1";
constexpr char kElasticQuotas[] = "scheduling.x-k8s.io/elasticquotas";
constexpr char kElasticApi[] = "scheduling.x-k8s.io/v1alpha1";

Json GpuQuotaJson(const std::string& ns, const std::string& name, Json spec) {
  return {{"apiVersion", kGpuQuotaApi},
          {"kind", "GPUQuota"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", std::move(spec)}};
}

Json ElasticQuotaJson(const std::string& ns, const std::string& name, Json spec) {
  return {{"apiVersion", kElasticApi},
          {"kind", "ElasticQuota"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", std::move(spec)}};
}

QuotaObject Decoded(QuotaObjectKind kind, const Json& j) {
  auto o = codec::DecodeQuotaObject(kind, j.dump());
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : QuotaObject{};
}

// ---- codec -----------------------------------------------------------------

TEST(QuotaObjectCodec, GpuQuotaSpecIsAPolicyFileEntry) {
  QuotaObject o =
      Decoded(QuotaObjectKind::kGpuQuota,
              GpuQuotaJson("team-a", "q",
                           {{"guaranteed", 16},
                            {"limit", 24},
                            {"cohort", "research"},
                            {"models", {{"H100", {{"guaranteed", 8}, {"limit", 8}}}}}}));
  ASSERT_TRUE(o.spec.has_value()) << o.error;
  EXPECT_EQ(o.ns, "team-a");
  EXPECT_EQ(o.spec->gpus.guaranteed, 16);
  EXPECT_EQ(o.spec->gpus.limit, 24);
  EXPECT_EQ(o.spec->cohort, "research");
  EXPECT_EQ(o.spec->models.at("H100").limit, 8);
  EXPECT_EQ(o.spec->queueing, QueueingStrategy::kBestEffortFifo);  // the default
  EXPECT_EQ(o.spec->attained, kDefaultAttainedService);            // on unless turned off
  QuotaObject as = Decoded(
      QuotaObjectKind::kGpuQuota,
      GpuQuotaJson("c", "q",
                   {{"attainedService", {{"demoteAfterGpuHours", 2}, {"preemptionsPerHour", 3}}}}));
  ASSERT_TRUE(as.spec.has_value()) << as.error;
  EXPECT_EQ(as.spec->attained, (AttainedServiceConfig{true, 7200, 3}));
  QuotaObject be = Decoded(QuotaObjectKind::kGpuQuota,
                           GpuQuotaJson("c", "q", {{"queueingStrategy", "BestEffortFIFO"}}));
  ASSERT_TRUE(be.spec.has_value()) << be.error;
  EXPECT_EQ(be.spec->queueing, QueueingStrategy::kBestEffortFifo);
  QuotaObject bf = Decoded(QuotaObjectKind::kGpuQuota,
                           GpuQuotaJson("c", "q", {{"queueingStrategy", "Backfill"}}));
  ASSERT_TRUE(bf.spec.has_value()) << bf.error;
  EXPECT_EQ(bf.spec->queueing, QueueingStrategy::kBackfill);
  // limit defaults to guaranteed, as in the file.
  QuotaObject d = Decoded(QuotaObjectKind::kGpuQuota, GpuQuotaJson("b", "q", {{"guaranteed", 8}}));
  ASSERT_TRUE(d.spec.has_value());
  EXPECT_EQ(d.spec->gpus.limit, 8);
}

TEST(QuotaObjectCodec, InvalidSpecsNameTheField) {
  struct Case {
    Json spec;
    std::string error;
  } cases[] = {
      {{{"guaranteed", 8}, {"limit", 4}}, "spec.limit: must be >= guaranteed (8), got 4"},
      {{{"guaranteed", -1}}, "spec.guaranteed: must be in [0, 16777216], got -1"},
      {{{"limit", "8"}}, "spec.limit: must be an integer"},
      {{{"gpus", 8}}, "spec.gpus: unknown field"},
      {{{"models", {{"H100", {{"guaranteed", 4}, {"limit", 2}}}}}},
       "spec.models.H100.limit: must be >= guaranteed (4), got 2"},
      {{{"cohort", 3}}, "spec.cohort"},
      {{{"queueingStrategy", "LIFO"}},
       "spec.queueingStrategy: must be StrictFIFO, BestEffortFIFO or Backfill, got 'LIFO'"},
      {{{"attainedService", {{"preemptionsPerHour", 2}}}},
       "spec.attainedService.demoteAfterGpuHours: required"},
      {{{"limit", 8}, {"weight", -1}}, "spec.weight: must be a number in (0, 1000000], got -1"},
      {{{"limit", 8}, {"weight", "2"}}, "spec.weight: must be a number in (0, 1000000], got \"2\""},
      {{{"weight", 2}}, "spec.weight: is set but the limit is 0"},
      {{{"guaranteed", 4},
        {"limit", 8},
        {"models", {{"H100", {{"guaranteed", 4}, {"limit", 16}}}}}},
       "spec.models.H100.limit: must be <= the namespace's limit (8), got 16"},
      {Json::array(), "spec: required, must be an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec.dump());
    QuotaObject o = Decoded(QuotaObjectKind::kGpuQuota, GpuQuotaJson("ns", "q", c.spec));
    EXPECT_FALSE(o.spec.has_value());
    EXPECT_NE(o.error.find(c.error), std::string::npos) << o.error;
  }
  EXPECT_FALSE(codec::DecodeQuotaObject(QuotaObjectKind::kGpuQuota, "[1]").ok());
  EXPECT_FALSE(codec::DecodeQuotaObject(QuotaObjectKind::kGpuQuota, "{").ok());
}

// A repeated key anywhere in an object refuses the object (its last valid
// spec stays), naming the key; raw text, since a parsed Json keeps one.
TEST(QuotaObjectCodec, DuplicateKeysRefuseTheObjectNamingTheField) {
  const std::string meta = R"("metadata":{"name":"q","namespace":"ns","uid":"u"})";
  struct Case {
    QuotaObjectKind kind;
    std::string body;
    std::string path;
  } cases[] = {
      {QuotaObjectKind::kGpuQuota, "{" + meta + R"(,"spec":{"guaranteed":4,"guaranteed":8}})",
       "spec.guaranteed"},
      {QuotaObjectKind::kGpuQuota,
       "{" + meta +
           R"(,"spec":{"limit":8,"models":{"H100":{"limit":4},"A100":{"limit":2},"H100":{"limit":8}}}})",
       "spec.models.H100"},
      {QuotaObjectKind::kGpuQuota,
       "{" + meta + R"(,"spec":{"limit":8,"models":{"H100":{"limit":4,"limit":2}}}})",
       "spec.models.H100.limit"},
      {QuotaObjectKind::kGpuQuota,
       R"({"metadata":{"name":"q","namespace":"a","namespace":"b"},"spec":{"limit":8}})",
       "metadata.namespace"},
      {QuotaObjectKind::kGpuQuota, "{" + meta + R"(,"spec":{"limit":8},"spec":{"limit":9}})",
       "spec"},
      {QuotaObjectKind::kElasticQuota,
       "{" + meta + R"(,"spec":{"max":{"nvidia.com/gpu":"8","nvidia.com/gpu":"2"}}})",
       "spec.max.nvidia.com/gpu"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    auto o = codec::DecodeQuotaObject(c.kind, c.body);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_FALSE(o->spec.has_value());
    EXPECT_EQ(o->error.rfind(c.path + ": duplicate key", 0), 0u) << o->error;
  }

  // In a list, only the object with the repeated key is refused.
  auto page = codec::DecodeQuotaObjectList(
      QuotaObjectKind::kGpuQuota,
      R"({"metadata":{"resourceVersion":"7"},"items":[)"
      R"({"metadata":{"name":"q","namespace":"a"},"spec":{"limit":8}},)"
      R"({"metadata":{"name":"q","namespace":"b"},"spec":{"cohort":"x","limit":8,"cohort":"y"}}]})");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_TRUE(page->items[0].spec.has_value()) << page->items[0].error;
  EXPECT_FALSE(page->items[1].spec.has_value());
  EXPECT_EQ(page->items[1].error.rfind("spec.cohort: duplicate key", 0), 0u)
      << page->items[1].error;
  // A watch event's object likewise.
  auto ev = codec::DecodeQuotaObjectEvent(
      QuotaObjectKind::kGpuQuota,
      R"({"type":"MODIFIED","object":{)" + meta + R"(,"spec":{"limit":8,"limit":2}}})");
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->object.ns, "ns");
  EXPECT_EQ(ev->object.error.rfind("spec.limit: duplicate key", 0), 0u) << ev->object.error;
  // A list's or event's own keys repeated: the whole body is refused.
  auto twice =
      codec::DecodeQuotaObjectList(QuotaObjectKind::kGpuQuota, R"({"items":[],"items":[]})");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("list: items: duplicate key"), std::string::npos)
      << twice.status();
  auto type = codec::DecodeQuotaObjectEvent(
      QuotaObjectKind::kGpuQuota,
      R"({"type":"MODIFIED","type":"DELETED","object":{)" + meta + R"(,"spec":{}}})");
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find("watch event: type: duplicate key"), std::string::npos)
      << type.status();
}

// The watcher's rule on a decoded change: an object refused for a repeated
// key keeps the spec it had, and its verdict (status, log) names the key.
TEST(QuotaObjectCodec, DuplicateKeyChangeKeepsTheLastValidSpec) {
  const std::string meta = R"("metadata":{"name":"q","namespace":"ns","uid":"u"})";
  auto v1 = codec::DecodeQuotaObject(QuotaObjectKind::kGpuQuota,
                                     "{" + meta + R"(,"spec":{"guaranteed":4,"limit":8}})");
  auto v2 = codec::DecodeQuotaObject(
      QuotaObjectKind::kGpuQuota,
      "{" + meta + R"(,"spec":{"guaranteed":4,"limit":8,"guaranteed":0,"limit":0}})");
  ASSERT_TRUE(v1.ok() && v2.ok());
  queue::KeepLastValid(nullptr, *v1);
  queue::KeepLastValid(&*v1, *v2);
  queue::ResolvedQuotas r = queue::ResolveQuotaObjects({*v2});
  EXPECT_EQ(r.namespaces.at("ns").gpus.guaranteed, 4);
  EXPECT_EQ(r.namespaces.at("ns").gpus.limit, 8);
  ASSERT_EQ(r.verdicts.size(), 1u);
  EXPECT_EQ(r.verdicts[0].error.rfind("spec.guaranteed: duplicate key", 0), 0u)
      << r.verdicts[0].error;
  EXPECT_NE(r.verdicts[0].message.find("last valid one stays"), std::string::npos);
}

TEST(QuotaObjectCodec, ElasticQuotaMinMaxOfGpusAreGuaranteedAndLimit) {
  struct Case {
    Json spec;
    bool has_spec;
    int64_t guaranteed, limit;
    std::string error;
  } cases[] = {
      {{{"min", {{"nvidia.com/gpu", "4"}}}, {"max", {{"nvidia.com/gpu", 8}}}}, true, 4, 8, ""},
      {{{"min", {{"nvidia.com/gpu", "2"}, {"cpu", "10"}}}}, true, 2, queue::kUnlimitedGpus, ""},
      {{{"max", {{"nvidia.com/gpu", "6"}}}}, true, 0, 6, ""},
      {{{"min", {{"cpu", "4"}}}, {"max", {{"memory", "1Gi"}}}}, false, 0, 0, ""},
      {{{"min", {{"nvidia.com/gpu", "500m"}}}}, false, 0, 0, "spec.min.nvidia.com/gpu"},
      {{{"min", {{"nvidia.com/gpu", 8}}}, {"max", {{"nvidia.com/gpu", 4}}}},
       false,
       0,
       0,
       "spec.max.nvidia.com/gpu: must be >= min (8), got 4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec.dump());
    QuotaObject o = Decoded(QuotaObjectKind::kElasticQuota, ElasticQuotaJson("ml", "eq", c.spec));
    ASSERT_EQ(o.spec.has_value(), c.has_spec) << o.error;
    if (c.has_spec) {
      EXPECT_EQ(o.spec->gpus.guaranteed, c.guaranteed);
      EXPECT_EQ(o.spec->gpus.limit, c.limit);
      EXPECT_EQ(o.spec->cohort, queue::kElasticQuotaCohort);
    }
    if (c.error.empty()) {
      EXPECT_EQ(o.error, "");
    } else {
      EXPECT_NE(o.error.find(c.error), std::string::npos) << o.error;
    }
  }
}

TEST(QuotaObjectCodec, StatusPatchGolden) {
  queue::QuotaObjectStatus s;
  s.observed_generation = 3;
  s.guaranteed = "16";
  s.limit = "24";
  s.cohort = "research";
  s.used = "20";
  s.borrowed = "4";
  s.lent = "0";
  s.borrowers = {{"team-b", "2.5"}};
  s.pending_pods = 7;
  s.pending_gpus = "24";
  s.head = "team-a/train-0";
  s.head_reason = "";
  s.head_estimated_start = 1'800'000'000;
  s.conditions = {{"Active", true, "Enforced", "enforced"},
                  {"Valid", true, "Valid", "spec is valid"}};
  EXPECT_EQ(
      codec::EncodeQuotaObjectStatusPatch(s, {"2026-11-24T00:00:00Z", "2026-11-24T00:00:01Z"}),
      R"({"status":{"observedGeneration":3,"guaranteed":"16","limit":"24","cohort":"research",)"
      R"("used":"20","borrowed":"4","lent":"0","borrowers":[{"namespace":"team-b","gpus":"2.5"}],)"
      R"("pendingPods":7,"pendingGPUs":"24","head":{"pod":"team-a/train-0","reason":)"
      R"("admissible now: waiting for kube-scheduler to place it",)"
      R"("estimatedStart":"2027-01-15T08:00:00Z"},"conditions":[)"
      R"({"type":"Active","status":"True","reason":"Enforced","message":"enforced",)"
      R"("lastTransitionTime":"2026-11-24T00:00:00Z"},{"type":"Valid","status":"True",)"
      R"("reason":"Valid","message":"spec is valid","lastTransitionTime":"2026-11-24T00:00:01Z"}]}})");
  // A duplicate: no amounts (removed by the merge patch), only conditions.
  queue::QuotaObjectStatus dup;
  dup.conditions = {{"Active", false, "Duplicate", "namespace x already has ..."}};
  const std::string body = codec::EncodeQuotaObjectStatusPatch(dup, {"t"});
  EXPECT_NE(body.find(R"("used":null)"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("status":"False","reason":"Duplicate")"), std::string::npos) << body;
}

// YAML (as `quota export` writes it) as JSON, for the object decoder.
Json YamlToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    Json j = Json::object();
    for (const auto& kv : n) j[kv.first.as<std::string>()] = YamlToJson(kv.second);
    return j;
  }
  if (n.IsSequence()) {
    Json j = Json::array();
    for (const auto& v : n) j.push_back(YamlToJson(v));
    return j;
  }
  const std::string s = n.as<std::string>();
  if (n.Tag() != "!" && (s == "true" || s == "false")) return s == "true";
  int64_t v = 0;
  if (n.Tag() != "!" && !s.empty() && absl::SimpleAtoi(s, &v)) return v;
  double d = 0;
  if (n.Tag() != "!" && !s.empty() && absl::SimpleAtod(s, &d)) return d;
  return s;
}

TEST(QuotaObjectCodec, ExportRoundTripsThePolicyFile) {
  QuotaConfig quotas;
  quotas.enabled = true;
  quotas.namespaces["team-a"] = {{16, 24}, "research", {{"H100", {8, 8}}, {"A100 80GB", {0, 4}}}};
  quotas.namespaces["team-b"] = {{8, 8}, "", {}, QueueingStrategy::kBestEffortFifo};
  quotas.namespaces["team-c"] = {{8, 8}, "", {}, QueueingStrategy::kStrictFifo, {true, 5400, 3}};
  quotas.namespaces["team-d"] = {{8, 8}, "", {}, QueueingStrategy::kStrictFifo, {true, 28800, 0}};
  quotas.namespaces["team-e"] = {{8, 8}, "", {}, QueueingStrategy::kStrictFifo, {}};  // off
  quotas.namespaces["team-f"] = {
      {8, 8}, "", {}, QueueingStrategy::kStrictFifo, kDefaultAttainedService};
  const std::string yaml = codec::EncodeQuotaExport(quotas, "gpu-quota");
  std::map<std::string, NamespaceQuota> back;
  for (const YAML::Node& doc : YAML::LoadAll(yaml)) {
    Json j = YamlToJson(doc);
    EXPECT_EQ(j["apiVersion"], kGpuQuotaApi);
    EXPECT_EQ(j["kind"], "GPUQuota");
    EXPECT_EQ(j["metadata"]["name"], "gpu-quota");
    QuotaObject o = Decoded(QuotaObjectKind::kGpuQuota, j);
    ASSERT_TRUE(o.spec.has_value()) << o.error << "\n" << yaml;
    back[o.ns] = *o.spec;
  }
  EXPECT_EQ(back, quotas.namespaces) << yaml;
}

// ---- resolution and status ---------------------------------------------------

QuotaObject Obj(QuotaObjectKind kind, std::string ns, std::string name, std::string created,
                std::optional<NamespaceQuota> spec, std::string error = "") {
  QuotaObject o;
  o.kind = kind;
  o.ns = std::move(ns);
  o.name = std::move(name);
  o.uid = o.ns + "/" + o.name;
  o.created = std::move(created);
  o.spec = std::move(spec);
  o.error = std::move(error);
  queue::KeepLastValid(nullptr, o);
  return o;
}

NamespaceQuota Q(int64_t g, int64_t l, std::string cohort = "") { return {{g, l}, cohort, {}}; }

const queue::QuotaObjectVerdict* VerdictFor(const queue::ResolvedQuotas& r,
                                            const std::string& name) {
  for (const auto& v : r.verdicts) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TEST(ResolveQuotaObjects, OneObjectPerNamespace) {
  const auto G = QuotaObjectKind::kGpuQuota;
  const auto E = QuotaObjectKind::kElasticQuota;
  struct Case {
    std::string what;
    std::vector<QuotaObject> objects;
    std::map<std::string, NamespaceQuota> want;
    std::map<std::string, QuotaObjectState> states;
  } cases[] = {
      {"the oldest GPUQuota wins; a later one is a duplicate",
       {Obj(G, "a", "new", "2026-02-01T00:00:00Z", Q(1, 1)),
        Obj(G, "a", "old", "2026-01-01T00:00:00Z", Q(4, 8))},
       {{"a", Q(4, 8)}},
       {{"old", QuotaObjectState::kActive}, {"new", QuotaObjectState::kDuplicate}}},
      {"created in the same second: the name decides",
       {Obj(G, "a", "zz", "2026-01-01T00:00:00Z", Q(1, 1)),
        Obj(G, "a", "aa", "2026-01-01T00:00:00Z", Q(2, 2))},
       {{"a", Q(2, 2)}},
       {{"aa", QuotaObjectState::kActive}, {"zz", QuotaObjectState::kDuplicate}}},
      {"a never-valid GPUQuota sets nothing; the next one applies",
       {Obj(G, "a", "bad", "2026-01-01T00:00:00Z", std::nullopt, "spec.limit: ..."),
        Obj(G, "a", "good", "2026-02-01T00:00:00Z", Q(3, 3))},
       {{"a", Q(3, 3)}},
       {{"bad", QuotaObjectState::kInvalid}, {"good", QuotaObjectState::kActive}}},
      {"ElasticQuota where no GPUQuota is; shadowed where one is",
       {Obj(E, "a", "eq-a", "2026-01-01T00:00:00Z", Q(2, 4, "elasticquota")),
        Obj(G, "a", "gq-a", "2026-03-01T00:00:00Z", Q(8, 8)),
        Obj(E, "b", "eq-b", "2026-01-01T00:00:00Z", Q(2, 4, "elasticquota")),
        Obj(E, "c", "eq-c", "2026-01-01T00:00:00Z", std::nullopt)},
       {{"a", Q(8, 8)}, {"b", Q(2, 4, "elasticquota")}},
       {{"eq-a", QuotaObjectState::kShadowed},
        {"gq-a", QuotaObjectState::kActive},
        {"eq-b", QuotaObjectState::kActive},
        {"eq-c", QuotaObjectState::kNoGpuQuota}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    queue::ResolvedQuotas r = queue::ResolveQuotaObjects(c.objects);
    EXPECT_EQ(r.namespaces, c.want);
    ASSERT_EQ(r.verdicts.size(), c.objects.size());
    for (const auto& [name, state] : c.states) {
      const auto* v = VerdictFor(r, name);
      ASSERT_NE(v, nullptr) << name;
      EXPECT_EQ(v->state, state) << name << ": " << v->message;
    }
  }
}

TEST(ResolveQuotaObjects, AnInvalidChangeKeepsTheLastValidSpec) {
  QuotaObject v1 = Obj(QuotaObjectKind::kGpuQuota, "a", "q", "t", Q(4, 8));
  QuotaObject v2 = v1;
  v2.spec.reset();
  v2.error = "spec.limit: must be >= guaranteed (8), got 2";
  queue::KeepLastValid(&v1, v2);
  queue::ResolvedQuotas r = queue::ResolveQuotaObjects({v2});
  EXPECT_EQ(r.namespaces.at("a"), Q(4, 8));
  ASSERT_EQ(r.verdicts.size(), 1u);
  EXPECT_EQ(r.verdicts[0].state, QuotaObjectState::kActive);
  EXPECT_EQ(r.verdicts[0].error, v2.error);
  EXPECT_NE(r.verdicts[0].message.find("last valid one stays"), std::string::npos);
  // Another object under the same name (a new uid) does not inherit it.
  QuotaObject other = v2;
  other.uid = "recreated";
  other.applied.reset();
  queue::KeepLastValid(&v1, other);
  EXPECT_FALSE(other.applied.has_value());
}

queue::NamespaceQueue NsQueue(std::string ns, std::string cohort, int64_t g, int64_t used) {
  queue::NamespaceQueue n;
  n.ns = std::move(ns);
  n.cohort = std::move(cohort);
  n.guaranteed_milli = g * 1000;
  n.limit_milli = 2 * g * 1000;
  n.usage_milli = used * 1000;
  n.borrowed_milli = std::max<int64_t>(0, used - g) * 1000;
  return n;
}

TEST(QuotaObjectStatuses, LendingIsApportionedByIdleGuarantee) {
  queue::QueueReport report;
  report.namespaces = {NsQueue("a", "c", 8, 2),     // idle 6
                       NsQueue("b", "c", 4, 1),     // idle 3
                       NsQueue("x", "c", 2, 8),     // borrows 6
                       NsQueue("solo", "", 4, 0)};  // no cohort: lends nothing
  const auto lent = queue::LentByNamespace(report);
  EXPECT_EQ(lent.at("a"), 4000);
  EXPECT_EQ(lent.at("b"), 2000);
  EXPECT_FALSE(lent.contains("x"));
  EXPECT_FALSE(lent.contains("solo"));

  report.namespaces[0].pending_pods = 3;
  report.namespaces[0].pending_milli = 12000;
  queue::QueuedPod head;
  head.ns = "a";
  head.name = "train-0";
  head.reason = "gpusched: namespace a at quota";
  head.estimated_start_unix = 1'800'000'059;  // the status keeps the minute
  report.namespaces[0].queue = {head};
  queue::ResolvedQuotas r = queue::ResolveQuotaObjects(
      {Obj(QuotaObjectKind::kGpuQuota, "a", "q", "t", Q(8, 16, "c")),
       Obj(QuotaObjectKind::kGpuQuota, "a", "q2", "u", Q(1, 1)),
       Obj(QuotaObjectKind::kElasticQuota, "b", "eq", "t", Q(4, 8, "elasticquota"))});
  const auto statuses = queue::QuotaObjectStatuses(r, report);
  ASSERT_EQ(statuses.size(), 2u);  // ElasticQuota status is its controller's
  const queue::QuotaObjectStatus& s = statuses[0];
  EXPECT_EQ(s.name, "q");
  EXPECT_EQ(s.used, "2");
  EXPECT_EQ(s.lent, "4");
  EXPECT_EQ(s.borrowers, (std::vector<queue::QuotaBorrower>{{"x", "6"}}));
  EXPECT_EQ(s.pending_pods, 3);
  EXPECT_EQ(s.pending_gpus, "12");
  EXPECT_EQ(s.head, "a/train-0");
  EXPECT_EQ(s.head_reason, head.reason);
  EXPECT_EQ(s.head_estimated_start, 1'800'000'000);
  EXPECT_TRUE(s.conditions[0].status);
  const queue::QuotaObjectStatus& d = statuses[1];
  EXPECT_EQ(d.name, "q2");
  EXPECT_EQ(d.used, "");
  EXPECT_FALSE(d.conditions[0].status);
  EXPECT_EQ(d.conditions[0].reason, "Duplicate");
}

// Guarantees over-promising the cluster are accepted, and every active
// GPUQuota's status says by how much.
TEST(QuotaObjectStatuses, OverPromisedGuaranteesAreReportedWithTheAmount) {
  queue::QueueReport report;
  report.namespaces = {NsQueue("a", "", 24, 0), NsQueue("b", "", 16, 0)};
  report.capacity_milli = 32000;
  report.guaranteed_milli = 40000;
  queue::ResolvedQuotas r =
      queue::ResolveQuotaObjects({Obj(QuotaObjectKind::kGpuQuota, "a", "q", "t", Q(24, 48)),
                                  Obj(QuotaObjectKind::kGpuQuota, "b", "q", "t", Q(16, 32))});
  const auto statuses = queue::QuotaObjectStatuses(r, report);
  ASSERT_EQ(statuses.size(), 2u);
  for (const queue::QuotaObjectStatus& s : statuses) {
    EXPECT_TRUE(s.conditions[0].status);
    EXPECT_NE(s.conditions[0].message.find("guarantees add up to 40 GPUs, 8 more than its 32"),
              std::string::npos)
        << s.conditions[0].message;
  }
  report.capacity_milli = 40000;  // a node joins: no longer said
  for (const queue::QuotaObjectStatus& s : queue::QuotaObjectStatuses(r, report)) {
    EXPECT_EQ(s.conditions[0].message.find("add up to"), std::string::npos);
  }
}

TEST(QueueConfigApplier, ObjectsReplaceTheFilesNamespacesOnly) {
  SchedulerConfig file;
  file.quotas.enabled = true;
  file.quotas.default_quota = Q(0, 2, "research");
  file.quotas.namespaces["team-a"] = Q(16, 24);
  file.reclaim.only_lower_priority = false;
  queue::QueueOptions from_file = queue::QueueConfigApplier::OptionsFor(file, "p.json", {});
  EXPECT_EQ(from_file.quotas.namespaces.at("team-a"), Q(16, 24));
  EXPECT_EQ(from_file.quota_source, "policy file p.json");

  queue::ResolvedQuotas objects;
  objects.namespaces["team-b"] = Q(4, 4);
  queue::QueueOptions o = queue::QueueConfigApplier::OptionsFor(file, "p.json", objects);
  EXPECT_EQ(o.quota_source, "GPUQuota objects (gpusched.io/v1alpha1)");
  EXPECT_EQ(o.quotas.namespaces, objects.namespaces);
  EXPECT_EQ(o.quotas.default_quota, Q(0, 2, "research"));  // cohort-wide: the file's
  EXPECT_FALSE(o.reclaim.only_lower_priority);
  // No quotas section in the file: a namespace without an object is not limited.
  SchedulerConfig bare;
  queue::QueueOptions b = queue::QueueConfigApplier::OptionsFor(bare, "p.json", objects);
  EXPECT_TRUE(b.quotas.enabled);
  EXPECT_EQ(b.quotas.default_quota.gpus.limit, queue::kUnlimitedGpus);
  EXPECT_EQ(queue::QueueConfigApplier::OptionsFor(bare, "p.json", {}).quotas.enabled, false);
}

// ---- the CRD -----------------------------------------------------------------

YAML::Node LoadCrd() {
  return YAML::LoadFile(std::string(GPUSCHED_SOURCE_DIR) + "/deploy/crd-gpuquota.yaml");
}

TEST(GpuQuotaCrd, NamesPrinterColumnsAndStatusSubresource) {
  YAML::Node crd = LoadCrd();
  EXPECT_EQ(crd["metadata"]["name"].as<std::string>(), "gpuquotas.gpusched.io");
  EXPECT_EQ(crd["spec"]["group"].as<std::string>(), "gpusched.io");
  EXPECT_EQ(crd["spec"]["scope"].as<std::string>(), "Namespaced");
  EXPECT_EQ(crd["spec"]["names"]["kind"].as<std::string>(), "GPUQuota");
  EXPECT_EQ(crd["spec"]["names"]["plural"].as<std::string>(), "gpuquotas");
  YAML::Node v = crd["spec"]["versions"][0];
  EXPECT_EQ(v["name"].as<std::string>(), "v1alpha1");
  EXPECT_TRUE(v["subresources"]["status"].IsDefined());
  std::map<std::string, std::string> columns;
  for (const auto& c : v["additionalPrinterColumns"]) {
    columns[c["name"].as<std::string>()] = c["jsonPath"].as<std::string>();
  }
  EXPECT_EQ(columns["Guaranteed"], ".spec.guaranteed");
  EXPECT_EQ(columns["Limit"], ".spec.limit");
  EXPECT_EQ(columns["Used"], ".status.used");
  EXPECT_EQ(columns["Borrowed"], ".status.borrowed");
  EXPECT_EQ(columns["Pending"], ".status.pendingPods");
  // Every status field the leader writes is in the schema (a structural
  // schema prunes unknown fields: a missing one would silently vanish).
  queue::QuotaObjectStatus s;
  s.used = "1";
  s.head = "a/b";
  s.borrowers = {{"x", "1"}};
  s.conditions = {{"Active", true, "Enforced", "m"}};
  Json patch = Json::parse(codec::EncodeQuotaObjectStatusPatch(s, {"2026-01-01T00:00:00Z"}));
  YAML::Node status = v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
  for (const auto& [key, value] : patch["status"].items()) {
    EXPECT_TRUE(status[key].IsDefined()) << "status." << key << " missing from the CRD schema";
  }
}

// What the API server does with the schema, for the fields the decoder
// checks: a negative or too large amount fails `minimum`/`maximum`, a
// non-integer fails `type`, an unknown queueing strategy `enum`, limit < guaranteed fails the CEL
// rule (evaluated here by its meaning; the rule's text is checked to be that meaning).
std::string SchemaVerdict(const YAML::Node& props, const YAML::Node& rules, const Json& spec) {
  for (const auto& [key, value] : spec.items()) {
    YAML::Node p = props[key];
    if (!p.IsDefined()) continue;  // pruned, as the API server does
    const std::string type = p["type"].as<std::string>();
    if (type == "integer") {
      if (!value.is_number_integer()) return "spec." + key + ": type";
      if (value.get<int64_t>() < p["minimum"].as<int64_t>()) return "spec." + key + ": minimum";
      if (value.get<int64_t>() > p["maximum"].as<int64_t>()) return "spec." + key + ": maximum";
    }
    if (type == "number" &&
        (!value.is_number() || value.get<double>() < p["minimum"].as<double>() ||
         value.get<double>() > p["maximum"].as<double>())) {
      return "spec." + key + ": number";
    }
    if (type == "object" && p["properties"].IsDefined()) {
      if (!value.is_object()) return "spec." + key + ": type";
      for (const YAML::Node& required : p["required"]) {
        if (!value.contains(required.as<std::string>())) return "spec." + key + ": required";
      }
      if (key == "attainedService") {  // its CEL rule, evaluated by its meaning
        const YAML::Node r = p["x-kubernetes-validations"];
        EXPECT_TRUE(r.IsSequence());
        if (r.IsSequence()) {
          EXPECT_EQ(r[0]["rule"].as<std::string>(),
                    "has(self.demoteAfterGpuHours) || (has(self.enabled) && !self.enabled)");
        }
        if (!value.contains("demoteAfterGpuHours") && value.value("enabled", true)) {
          return "spec." + key + ": required";
        }
      }
      std::string inner = SchemaVerdict(p["properties"], YAML::Node(), value);
      if (!inner.empty()) return "spec." + key + "." + inner.substr(5);
    }
    if (type == "string" && p["enum"].IsDefined()) {
      if (!value.is_string()) return "spec." + key + ": type";
      bool listed = false;
      for (const YAML::Node& allowed : p["enum"]) {
        listed = listed || allowed.as<std::string>() == value.get<std::string>();
      }
      if (!listed) return "spec." + key + ": enum";
    }
  }
  if (!rules.IsSequence()) return "";  // a nested object: no CEL rule
  EXPECT_EQ(rules[0]["rule"].as<std::string>(),
            "!has(self.limit) || self.limit >= (has(self.guaranteed) ? self.guaranteed : 0)");
  if (spec.contains("limit") && spec["limit"].get<int64_t>() < spec.value("guaranteed", 0)) {
    return rules[0]["message"].as<std::string>();
  }
  return "";
}

TEST(GpuQuotaCrd, RejectsAtApplyWhatTheDecoderRejects) {
  YAML::Node spec =
      LoadCrd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
  struct Case {
    Json spec;
    std::string schema;  // "" = accepted
    std::string field;   // what the decoder's error names
  } cases[] = {
      {{{"guaranteed", 8}, {"limit", 16}}, "", ""},
      {{{"guaranteed", 8}}, "", ""},
      {{{"guaranteed", 8}, {"limit", 4}}, "spec.limit must be >= spec.guaranteed", "spec.limit"},
      {{{"guaranteed", -1}}, "spec.guaranteed: minimum", "spec.guaranteed"},
      {{{"limit", -4}}, "spec.limit: minimum", "spec.limit"},
      {{{"guaranteed", 1 << 25}}, "spec.guaranteed: maximum", "spec.guaranteed"},
      {{{"limit", "8"}}, "spec.limit: type", "spec.limit"},
      {{{"guaranteed", 8}, {"queueingStrategy", "BestEffortFIFO"}}, "", ""},
      {{{"guaranteed", 8}, {"queueingStrategy", "LIFO"}},
       "spec.queueingStrategy: enum",
       "spec.queueingStrategy"},
      {{{"attainedService", {{"demoteAfterGpuHours", 2.5}, {"preemptionsPerHour", 4}}}}, "", ""},
      {{{"attainedService", {{"enabled", false}}}}, "", ""},
      {{{"attainedService", {{"preemptionsPerHour", 4}}}},
       "spec.attainedService: required",
       "spec.attainedService.demoteAfterGpuHours"},
      {{{"attainedService", {{"demoteAfterGpuHours", -1}}}},
       "spec.attainedService.demoteAfterGpuHours: number",
       "spec.attainedService.demoteAfterGpuHours"},
      {{{"attainedService", {{"demoteAfterGpuHours", 1}, {"preemptionsPerHour", 4000}}}},
       "spec.attainedService.preemptionsPerHour: maximum",
       "spec.attainedService.preemptionsPerHour"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec.dump());
    EXPECT_EQ(SchemaVerdict(spec["properties"], spec["x-kubernetes-validations"], c.spec),
              c.schema);
    QuotaObject o = Decoded(QuotaObjectKind::kGpuQuota, GpuQuotaJson("ns", "q", c.spec));
    if (c.field.empty()) {
      EXPECT_TRUE(o.spec.has_value()) << o.error;
    } else {
      EXPECT_EQ(o.error.rfind(c.field + ":", 0), 0u) << o.error;
    }
  }
  EXPECT_EQ(spec["x-kubernetes-validations"][0]["fieldPath"].as<std::string>(), ".limit");
  YAML::Node model = spec["properties"]["models"]["additionalProperties"];
  EXPECT_EQ(model["properties"]["limit"]["minimum"].as<int64_t>(), 0);
  EXPECT_EQ(model["x-kubernetes-validations"][0]["rule"].as<std::string>(),
            spec["x-kubernetes-validations"][0]["rule"].as<std::string>());
}

// ---- through the fake API server ----------------------------------------------

class QuotaObjectsApiTest : public FakeApiTest {
 protected:
  void SetUp() override {
    FakeApiTest::SetUp();
    for (int i = 0; i < 4; ++i) api_->Put("nodes", NodeJson("gpu-" + std::to_string(i), 8));
    file_.quotas.enabled = true;
    file_.quotas.default_quota = Q(0, 1);
    file_.quotas.namespaces["team-a"] = Q(8, 8);
    file_.reclaim.enabled = false;
  }

  void TearDown() override {
    writer_.reset();
    watcher_.reset();
    if (source_) source_->Stop();
  }

  // Source, queue, applier and watcher (started); waits until synced.
  void Start() {
    state_ = std::make_unique<ClusterState>(ShippedTemplates());
    source_ = NewSource(client_.get(), &metrics_);
    ASSERT_TRUE(StartSynced(*source_, *state_));
    framework_ = DefaultFramework();
    queue_ = NewQueue(state_.get(), framework_, {.writer = &evictions_, .quiet = true});
    applier_ = std::make_unique<queue::QueueConfigApplier>(queue_.get(), file_, "policy.json",
                                                           [this](const std::string& line) {
                                                             std::lock_guard<std::mutex> l(log_mu_);
                                                             log_.push_back(line);
                                                           });
    applier_->SetFile(file_);
    kube::QuotaObjectsOptions qo;
    qo.discovery_retry = std::chrono::milliseconds(100);
    qo.watch_timeout_seconds = 2;
    qo.backoff_initial = std::chrono::milliseconds(20);
    watcher_ = std::make_unique<kube::QuotaObjectWatcher>(client_.get(), qo, &metrics_);
    watcher_->Start([this](const auto& objects) { applier_->SetObjects(objects); });
    ASSERT_TRUE(WaitFor([&] { return watcher_->settled(); }));
    kube::QuotaStatusWriter::Inputs in;
    in.resolved = [this] { return watcher_->Current(); };
    in.report = [this] { return queue_->Report({"", 1}); };
    in.may_write = [this] { return leader_.load(); };
    in.now_rfc3339 = [] { return std::string("2026-11-24T00:00:00Z"); };
    kube::QuotaStatusWriter::Options wo;
    wo.period = std::chrono::hours(1);  // rounds only by RunOnce
    wo.qps = 0;
    writer_ =
        std::make_unique<kube::QuotaStatusWriter>(client_.get(), std::move(in), wo, &metrics_);
  }

  // Why `ns/name` may not start now ("" = admitted).
  std::string Admit(const std::string& ns, const std::string& name) {
    return AdmitReason(*queue_, *state_, *framework_, ns, name);
  }
  bool WaitAdmit(const std::string& ns, const std::string& name, bool admitted) {
    return WaitFor([&] { return Admit(ns, name).empty() == admitted; });
  }
  Json Status(const std::string& ns, const std::string& name) {
    auto o = api_->Get(kGpuQuotas, ns + "/" + name);
    return o ? o->value("status", Json::object()) : Json();
  }
  bool Logged(const std::string& text) {
    std::lock_guard<std::mutex> l(log_mu_);
    for (const auto& line : log_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }

  // Records the queue's evictions (reclaim) instead of calling the API.
  struct RecordingWriter : ClusterWriter {
    absl::Status Evict(const PodRequest& pod, const std::string& reason) override {
      std::lock_guard<std::mutex> l(mu);
      evicted.push_back(pod.Key());
      (void)reason;
      return absl::OkStatus();
    }
    std::vector<std::string> Evicted() {
      std::lock_guard<std::mutex> l(mu);
      return evicted;
    }
    std::mutex mu;
    std::vector<std::string> evicted;
  };

  SchedulerConfig file_;
  RecordingWriter evictions_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<kube::KubeClusterSource> source_;
  std::shared_ptr<const policy::Framework> framework_;
  std::unique_ptr<queue::QueueManager> queue_;
  std::unique_ptr<queue::QueueConfigApplier> applier_;
  std::unique_ptr<kube::QuotaObjectWatcher> watcher_;
  std::unique_ptr<kube::QuotaStatusWriter> writer_;
  std::atomic<bool> leader_{true};
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

// A reader during a publication (the queue applying it, here slowly) waits
// for it: once the queue has applied a resolution, Current() is never the
// one before (a status writer or test reading it then saw the old one).
TEST_F(QuotaObjectsApiTest, CurrentIsNeverOlderThanWhatTheQueueApplied) {
  api_->ServeApiGroup(kGpuQuotaApi);
  kube::QuotaObjectsOptions qo;
  qo.discovery_retry = std::chrono::milliseconds(100);
  qo.watch_timeout_seconds = 2;
  qo.backoff_initial = std::chrono::milliseconds(20);
  kube::QuotaObjectWatcher w(client_.get(), qo, &metrics_);
  std::atomic<int> applying{0};
  w.Start([&](const auto&) {
    applying.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a slow apply
  });
  ASSERT_TRUE(WaitFor([&] { return w.settled(); }));  // the first: no objects
  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "q", {{"guaranteed", 4}}));
  ASSERT_TRUE(WaitFor([&] { return applying.load() == 2; }));  // inside the second apply
  auto c = w.Current();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->namespaces.count("team-b"), 1u);
  w.Stop();
}

TEST_F(QuotaObjectsApiTest, WithoutTheCrdThePolicyFileIsTheSource) {
  api_->Put("pods", PodJson("team-a", "p8", 8));
  api_->Put("pods", PodJson("team-z", "p2", 2));
  Start();
  EXPECT_FALSE(watcher_->Current().has_value());
  EXPECT_EQ(applier_->source(), "policy file policy.json");
  EXPECT_EQ(queue_->Report({"", 0}).quota_source, "policy file policy.json");
  ASSERT_TRUE(WaitAdmit("team-a", "p8", true));                              // the file's 8
  EXPECT_NE(Admit("team-z", "p2").find("at its limit"), std::string::npos);  // default limit 1
  EXPECT_EQ(api_->requests("GET /apis/gpusched.io/v1alpha1/gpuquotas"), 0);

  // The CRD is installed later: the objects become the source (none yet,
  // so the file's default applies to every namespace, team-a included).
  api_->ServeApiGroup(kGpuQuotaApi);
  ASSERT_TRUE(WaitFor([&] { return watcher_->Current().has_value(); }));
  EXPECT_EQ(applier_->source(), "GPUQuota objects (gpusched.io/v1alpha1)");
  EXPECT_TRUE(Logged("the policy file's quotas.namespaces (1 entries) is not used"));
  ASSERT_TRUE(WaitAdmit("team-a", "p8", false));
}

TEST_F(QuotaObjectsApiTest, CreateChangeAndDeleteChangeAdmission) {
  api_->ServeApiGroup(kGpuQuotaApi);
  api_->Put("pods", PodJson("team-b", "p4", 4));
  Start();
  ASSERT_TRUE(watcher_->Current().has_value());
  EXPECT_NE(Admit("team-b", "p4").find("at its limit"), std::string::npos);  // file default: 1

  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "gpu-quota", {{"guaranteed", 4}}));
  ASSERT_TRUE(WaitAdmit("team-b", "p4", true));
  EXPECT_EQ(queue_->Report({"team-b", 0}).namespaces.at(0).guaranteed_milli, 4000);

  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "gpu-quota", {{"guaranteed", 2}, {"limit", 3}}));
  ASSERT_TRUE(WaitAdmit("team-b", "p4", false));
  EXPECT_NE(Admit("team-b", "p4").find("at its limit: holds 0 of limit 3"), std::string::npos);

  // Above its guarantee it borrows idle GPUs (32 of them, guaranteed to
  // no one), up to its limit.
  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "gpu-quota",
                                     {{"guaranteed", 2}, {"limit", 8}, {"cohort", "research"}}));
  ASSERT_TRUE(WaitAdmit("team-b", "p4", true));
  EXPECT_EQ(queue_->Report({"team-b", 0}).namespaces.at(0).limit_milli, 8000);
  api_->Delete(kGpuQuotas, "team-b/gpu-quota");
  ASSERT_TRUE(WaitAdmit("team-b", "p4", false));  // back to the file's default
  EXPECT_EQ(queue_->Report({"team-b", 0}).namespaces.at(0).limit_milli, 1000);
}

// A fresh install: the CRD, no GPUQuota object yet, the deployed policy
// file. A first Job in `default` runs on the idle cluster, an 8-GPU one
// included (the deployed default sets no limit).
TEST_F(QuotaObjectsApiTest, FreshInstallRunsAFirstEightGpuJobInDefault) {
  auto deployed =
      codec::LoadConfigFile(std::string(GPUSCHED_SOURCE_DIR) + "/deploy/scheduler-policy.json");
  ASSERT_TRUE(deployed.ok()) << deployed.status();
  file_ = *deployed;
  api_->ServeApiGroup(kGpuQuotaApi);
  api_->Put("pods", PodJson("default", "first-job-0", 8));
  api_->Put("pods", PodJson("ml-sandbox", "small-0", 1));
  Start();
  ASSERT_TRUE(watcher_->Current().has_value());
  EXPECT_EQ(applier_->source(), "GPUQuota objects (gpusched.io/v1alpha1)");
  EXPECT_EQ(Admit("default", "first-job-0"), "");
  EXPECT_EQ(Admit("ml-sandbox", "small-0"), "");
}

// The first GPUQuota created on a running cluster whose GPUs unlisted
// namespaces borrow: the new guarantee is restored by reclaim, taking only
// what the borrowers hold above their (zero) guarantee, and no more than the
// waiting pod needs.
TEST_F(QuotaObjectsApiTest, FirstGpuQuotaOnABusyClusterReclaimsBorrowers) {
  auto deployed =
      codec::LoadConfigFile(std::string(GPUSCHED_SOURCE_DIR) + "/deploy/scheduler-policy.json");
  ASSERT_TRUE(deployed.ok()) << deployed.status();
  file_ = *deployed;
  api_->ServeApiGroup(kGpuQuotaApi);
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i);
    api_->Put("pods", PodJson("default", "busy-" + n, 8, "gpu-" + n, "0,1,2,3,4,5,6,7", "Running"));
  }
  api_->Put("pods", PodJson("team-a", "train-0", 8));
  Start();
  // No quota for team-a yet: it may borrow, but nothing is idle.
  EXPECT_NE(Admit("team-a", "train-0").find("0 idle GPUs it may borrow"), std::string::npos)
      << Admit("team-a", "train-0");
  EXPECT_EQ(queue_->Tick(), 0);  // nobody is below a guarantee
  api_->Put(kGpuQuotas, GpuQuotaJson("team-a", "gpu-quota", {{"guaranteed", 16}}));
  ASSERT_TRUE(WaitAdmit("team-a", "train-0", true));  // quota-wise; no node has room
  EXPECT_EQ(queue_->Tick(), 1);
  std::vector<std::string> evicted = evictions_.Evicted();
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].rfind("default/busy-", 0), 0u) << evicted[0];
}

TEST_F(QuotaObjectsApiTest, InvalidChangeKeepsTheOldSpecAndTheStatusSaysWhy) {
  api_->ServeApiGroup(kGpuQuotaApi);
  api_->Put("pods", PodJson("team-b", "p4", 4));
  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "q", {{"guaranteed", 4}}));
  Start();
  ASSERT_TRUE(WaitAdmit("team-b", "p4", true));
  writer_->RunOnce();
  EXPECT_EQ(Status("team-b", "q")["guaranteed"], "4");

  // Past a CRD without validation (or an older API server): the change is
  // refused by gpusched, the last valid spec stays.
  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "q", {{"guaranteed", 4}, {"limit", 1}}));
  ASSERT_TRUE(WaitFor([&] {
    auto c = watcher_->Current();
    return c && !c->verdicts.empty() && !c->verdicts[0].error.empty();
  }));
  EXPECT_EQ(Admit("team-b", "p4"), "");
  writer_->RunOnce();
  Json s = Status("team-b", "q");
  EXPECT_EQ(s["guaranteed"], "4");
  EXPECT_EQ(s["observedGeneration"], 2);
  ASSERT_EQ(s["conditions"].size(), 2u) << s.dump();
  EXPECT_EQ(s["conditions"][0]["status"], "True");
  EXPECT_EQ(s["conditions"][1]["type"], "Valid");
  EXPECT_EQ(s["conditions"][1]["status"], "False");
  EXPECT_NE(s["conditions"][1]["message"].get<std::string>().find(
                "spec.limit: must be >= guaranteed (4), got 1"),
            std::string::npos)
      << s.dump();
}

TEST_F(QuotaObjectsApiTest, SecondObjectInANamespaceIsIgnoredAndSaysSo) {
  api_->ServeApiGroup(kGpuQuotaApi);
  api_->Put("pods", PodJson("team-b", "p4", 4));
  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "first", {{"guaranteed", 4}}));
  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "second", {{"guaranteed", 0}, {"limit", 0}}));
  Start();
  ASSERT_TRUE(WaitAdmit("team-b", "p4", true));
  writer_->RunOnce();
  EXPECT_EQ(Status("team-b", "first")["conditions"][0]["reason"], "Enforced");
  Json dup = Status("team-b", "second");
  EXPECT_EQ(dup["conditions"][0]["status"], "False");
  EXPECT_EQ(dup["conditions"][0]["reason"], "Duplicate");
  EXPECT_NE(dup["conditions"][0]["message"].get<std::string>().find("GPUQuota 'first'"),
            std::string::npos);
  EXPECT_FALSE(dup.contains("used"));
  // The first one goes: the second one applies.
  api_->Delete(kGpuQuotas, "team-b/first");
  ASSERT_TRUE(WaitAdmit("team-b", "p4", false));
}

TEST_F(QuotaObjectsApiTest, ElasticQuotaIsReadWhereNoGpuQuotaIs) {
  api_->ServeApiGroup(kGpuQuotaApi);
  api_->ServeApiGroup(kElasticApi);
  api_->Put("pods", PodJson("ml", "p4", 4));
  api_->Put(kElasticQuotas, ElasticQuotaJson("ml", "eq",
                                             {{"min", {{"nvidia.com/gpu", "2"}, {"cpu", "8"}}},
                                              {"max", {{"nvidia.com/gpu", "4"}}}}));
  Start();
  // Until the watcher's resolution reaches the queue, the default quota
  // (limit 1) refuses the pod; the ElasticQuota's max of 4 lets it borrow
  // idle GPUs above its min of 2.
  ASSERT_TRUE(WaitAdmit("ml", "p4", true)) << Admit("ml", "p4");
  auto report = queue_->Report({"ml", 0});
  EXPECT_EQ(report.namespaces.at(0).guaranteed_milli, 2000);
  EXPECT_EQ(report.namespaces.at(0).limit_milli, 4000);
  EXPECT_EQ(report.namespaces.at(0).cohort, queue::kElasticQuotaCohort);
  // A GPUQuota in the namespace takes over; the ElasticQuota is shadowed.
  api_->Put(kGpuQuotas, GpuQuotaJson("ml", "q", {{"guaranteed", 1}}));
  ASSERT_TRUE(WaitAdmit("ml", "p4", false));
  auto c = watcher_->Current();
  ASSERT_TRUE(c.has_value());
  bool shadowed = false;
  for (const auto& v : c->verdicts) shadowed |= v.state == QuotaObjectState::kShadowed;
  EXPECT_TRUE(shadowed);
  writer_->RunOnce();
  EXPECT_FALSE(api_->Get(kElasticQuotas, "ml/eq")->contains("status"));  // never written
}

TEST_F(QuotaObjectsApiTest, OnlyTheLeaderWritesStatus) {
  api_->ServeApiGroup(kGpuQuotaApi);
  api_->Put(kGpuQuotas, GpuQuotaJson("team-b", "q", {{"guaranteed", 4}}));
  Start();
  leader_ = false;
  writer_->RunOnce();
  const std::string path = "PATCH /apis/gpusched.io/v1alpha1/namespaces/team-b/gpuquotas/q/status";
  EXPECT_EQ(api_->requests(path), 0);
  EXPECT_FALSE(api_->Get(kGpuQuotas, "team-b/q")->contains("status"));
  leader_ = true;
  writer_->RunOnce();
  EXPECT_EQ(api_->requests(path), 1);
  EXPECT_EQ(Status("team-b", "q")["used"], "0");
  writer_->RunOnce();  // unchanged: not written again
  EXPECT_EQ(api_->requests(path), 1);
}

// After every step of a random workload (pods bound and deleted, quotas
// created, changed and deleted), the leader's status of every GPUQuota
// equals a ledger computed from scratch over the cluster, and the queue's
// invariants hold.
TEST_F(QuotaObjectsApiTest, StatusMatchesTheLedgerThroughARandomWorkload) {
  api_->ServeApiGroup(kGpuQuotaApi);
  Start();
  std::mt19937 rng(20261124);
  const std::vector<std::string> namespaces = {"ns-a", "ns-b", "ns-c"};
  std::map<std::string, std::vector<int>> free;  // node -> free device indices
  for (int n = 0; n < 4; ++n) {
    for (int d = 0; d < 8; ++d) free["gpu-" + std::to_string(n)].push_back(d);
  }
  struct Bound {
    std::string node;
    std::vector<int> devices;
  };
  std::map<std::string, Bound> bound;  // "ns/name" ->
  int seq = 0, binds = 0, quota_writes = 0;
  std::vector<std::string> pending;  // "ns/name" left pending
  for (const std::string& ns : namespaces) {
    api_->Put(kGpuQuotas,
              GpuQuotaJson(ns, "q", {{"guaranteed", 4}, {"limit", 12}, {"cohort", "all"}}));
  }
  ASSERT_TRUE(WaitFor([&] {
    auto c = watcher_->Current();
    return c && c->namespaces.size() == namespaces.size();
  }));
  for (int step = 0; step < 80; ++step) {
    SCOPED_TRACE(step);
    const std::string& ns = namespaces[rng() % namespaces.size()];
    const int action = static_cast<int>(rng() % 5);
    auto usage = [&](const std::string& n) {
      int64_t milli = 0;
      for (const PodRequest& p : state_->Pods()) {
        if (p.ns == n && !p.node_name.empty()) milli += p.gpu.total_milli();
      }
      return milli / 1000;
    };
    if (action == 0) {  // a quota created or changed (never below what is held)
      const int64_t g = 2 + static_cast<int64_t>(rng() % 9);
      const int64_t limit = std::max<int64_t>(g + static_cast<int64_t>(rng() % 8), usage(ns));
      ++quota_writes;
      api_->Put(kGpuQuotas,
                GpuQuotaJson(ns, "q", {{"guaranteed", g}, {"limit", limit}, {"cohort", "all"}}));
    } else if (action == 1 && usage(ns) <= 1) {  // a quota deleted (the default: 1)
      api_->Delete(kGpuQuotas, ns + "/q");
    } else if (action == 2 && !pending.empty()) {  // a pending pod goes
      const size_t i = rng() % pending.size();
      api_->Delete("pods", pending[i]);
      pending.erase(pending.begin() + static_cast<long>(i));
    } else if (action == 3 && !bound.empty()) {  // a pod finished
      auto it = std::next(bound.begin(), static_cast<long>(rng() % bound.size()));
      for (int d : it->second.devices) free[it->second.node].push_back(d);
      api_->Delete("pods", it->first);
      bound.erase(it);
    } else {  // a pod arrives; bound (as kube-scheduler would) if admitted
      const int gpus = 1 + static_cast<int>(rng() % 3);
      const std::string name = "p" + std::to_string(++seq);
      const std::string node = "gpu-" + std::to_string(rng() % 4);
      api_->Put("pods", PodJson(ns, name, gpus));
      ASSERT_TRUE(WaitFor([&] { return state_->FindPodByName(ns, name).has_value(); }));
      if (Admit(ns, name).empty() && free[node].size() >= static_cast<size_t>(gpus)) {
        Bound b{node, {}};
        std::string ids;
        for (int i = 0; i < gpus; ++i) {
          b.devices.push_back(free[node].back());
          free[node].pop_back();
          ids += (i ? "," : "") + std::to_string(b.devices.back());
        }
        api_->Put("pods", PodJson(ns, name, gpus, node, ids, "Running"));
        bound[ns + "/" + name] = b;
        ++binds;
      } else {
        pending.push_back(ns + "/" + name);
      }
    }
    // Wait for the cluster view and the quota view to catch up with the API.
    const int64_t rv = api_->resource_version();
    ASSERT_TRUE(WaitFor([&] {
      std::map<std::string, std::string> pods, api_pods;  // "ns/name" -> node
      for (const PodRequest& p : state_->Pods()) pods[p.ns + "/" + p.name] = p.node_name;
      for (const Json& p : api_->List("pods")) {
        api_pods[p["metadata"]["namespace"].get<std::string>() + "/" +
                 p["metadata"]["name"].get<std::string>()] = p["spec"].value("nodeName", "");
      }
      std::map<std::string, NamespaceQuota> want;
      for (const Json& q : api_->List(kGpuQuotas)) {
        QuotaObject o = Decoded(QuotaObjectKind::kGpuQuota, q);
        want[o.ns] = *o.spec;
      }
      auto c = watcher_->Current();
      return pods == api_pods && c && c->namespaces == want;
    })) << "rv "
        << rv;
    writer_->RunOnce();
    // The statuses against a ledger built from scratch.
    auto snapshot = state_->Snapshot();
    QuotaConfig config;
    config.enabled = true;
    config.default_quota = file_.quotas.default_quota;
    config.namespaces = watcher_->Current()->namespaces;
    queue::QuotaLedger ledger(config, *snapshot);
    for (const Json& q : api_->List(kGpuQuotas)) {
      const std::string qns = q["metadata"]["namespace"];
      SCOPED_TRACE(qns);
      const Json s = q.value("status", Json::object());
      EXPECT_EQ(s.value("used", "?"), queue::FormatGpus(ledger.Usage(qns)));
      EXPECT_EQ(s.value("borrowed", "?"), queue::FormatGpus(ledger.Borrowed(qns)));
      EXPECT_EQ(s.value("guaranteed", "?"), queue::FormatGpus(ledger.Guaranteed(qns)));
      EXPECT_EQ(s.value("limit", "?"), queue::FormatGpus(ledger.Limit(qns)));
      int64_t pending = 0;
      for (const PodRequest& p : state_->Pods()) {
        pending += p.ns == qns && p.node_name.empty() ? 1 : 0;
      }
      EXPECT_EQ(s.value("pendingPods", int64_t{-1}), pending);
      EXPECT_EQ(s.value("observedGeneration", int64_t{-1}),
                q["metadata"]["generation"].get<int64_t>());
    }
    EXPECT_EQ(CheckQueueInvariants(*state_, *queue_), "");
  }
  EXPECT_GE(binds, 8) << binds;
  EXPECT_GE(quota_writes, 10);
}

}  // namespace
}  // namespace gpusched::testing
