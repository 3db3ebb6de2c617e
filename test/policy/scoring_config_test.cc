// The config's "scoring" section translated into the policies' ScoringSpec:
// the fixed weight fields, the "scorers" list naming any registered scorer,
// and errors that name the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/match.h"
#include "gpusched/policy/framework.h"
#include "gpusched/policy/registry.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/config_codec.h"
#include "test/testing/builders.h"

namespace gpusched::policy {
namespace {

std::string Names(const ScoringSpec& spec) {
  std::string out;
  for (const ScorerSpec& s : spec.scorers)
    StrAppend(&out, out.empty() ? "" : " ", s.name, ":", s.weight);
  return out;
}

TEST(ScoringConfig, FixedFieldsNameTheirScorers) {
  const struct {
    const char* scoring;
    const char* want;
  } kCases[] = {
      {"{}", "GpuTopology:3 GpuPacking:2"},
      {R"({"topologyWeight": 0})", "GpuPacking:2"},
      {R"({"fragmentationWeight": 5})", "GpuTopology:3 GpuPacking:2 Fgd:5"},
      {R"({"fragmentationWeight": 90, "fragmentationPolicy": "lookahead", "packingWeight": 0,
           "topologyWeight": 10})",
       "GpuTopology:10 FragLookahead:90"},
      {R"({"fragmentationPolicy": "lookahead"})", "GpuTopology:3 GpuPacking:2"},
  };
  for (const auto& c : kCases) {
    auto config = codec::DecodeConfig(StrCat(R"({"scoring": )", c.scoring, "}"));
    ASSERT_TRUE(config.ok()) << c.scoring << ": " << config.status();
    EXPECT_EQ(Names(config->scoring), c.want) << c.scoring;
    EXPECT_EQ(Names(ScoringSpec{}), "GpuTopology:3 GpuPacking:2");
  }
}

TEST(ScoringConfig, ParametersReachEveryScorer) {
  auto config = codec::DecodeConfig(R"({"scoring": {"scorers": [
      {"name": "GpuPacking", "weight": 2}, {"name": "FragLookahead"}],
      "spread": true, "fragmentationScale": 500, "fragmentationCpuGuard": 2,
      "fragmentationCapacity": 0.5,
      "fragmentationTarget": [{"cpuMilli": 8000, "gpus": 1, "weight": 1}]}})");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(Names(config->scoring), "GpuPacking:2 FragLookahead:1");
  for (const ScorerSpec& s : config->scoring.scorers) {
    EXPECT_TRUE(s.params.spread);
    EXPECT_DOUBLE_EQ(s.params.fragmentation_scale, 500);
    EXPECT_DOUBLE_EQ(s.params.cpu_guard, 2);
    EXPECT_DOUBLE_EQ(s.params.capacity, 0.5);
    ASSERT_EQ(s.params.fragmentation_target.size(), 1u);
    EXPECT_EQ(s.params.fragmentation_target[0].cpu_milli, 8000);
  }
}

// Every registered scorer can be named in the config and served.
TEST(ScoringConfig, NamesEveryRegisteredScorer) {
  for (const ScorerEntry& entry : RegisteredScorers()) {
    auto config = codec::DecodeConfig(
        StrCat(R"({"scoring": {"scorers": [{"name": ")", entry.name, R"(", "weight": 4}]}})"));
    ASSERT_TRUE(config.ok()) << entry.name << ": " << config.status();
    EXPECT_EQ(Names(config->scoring), StrCat(entry.name, ":4"));
    auto fw = Framework::Create(config->scoring);
    ASSERT_TRUE(fw.ok()) << entry.name << ": " << fw.status();
    ASSERT_EQ((*fw)->scorers().size(), 1u);
    EXPECT_EQ((*fw)->scorers()[0].scorer->Name(), entry.name);
  }
}

TEST(ScoringConfig, ErrorsNameTheField) {
  const struct {
    const char* scoring;
    const char* error;
  } kCases[] = {
      {R"({"scorers": [{"name": "Tetris"}]})",
       "scoring.scorers[0].name: must be a registered scorer (GpuTopology, GpuPacking, Fgd, "
       "FragLookahead, BestFit, DotProd, GpuSharePacking, GpuClustering, LeastAllocated, "
       "MostAllocated), got 'Tetris'"},
      {R"({"scorers": [{"name": "BestFit"}, {"name": "BestFit"}]})",
       "scoring.scorers[1].name: listed twice"},
      {R"({"scorers": [{"name": "BestFit", "weight": 101}]})",
       "scoring.scorers[0].weight: must be in [0, 100], got 101"},
      {R"({"scorers": [{"name": "BestFit", "weight": "2"}]})",
       "scoring.scorers[0].weight: must be an integer"},
      {R"({"scorers": [{"name": 3}]})", "scoring.scorers[0].name: must be a string"},
      {R"({"scorers": [{"name": "BestFit", "wieght": 2}]})",
       "scoring.scorers[0].wieght: unknown field"},
      {R"({"scorers": {"name": "BestFit"}})", "scoring.scorers: must be an array"},
      {R"({"scorers": [{"name": "BestFit", "weight": 0}]})",
       "scoring: scorers needs one scorer with a positive weight"},
      {R"({"scorers": [], "packingWeight": 2})",
       "scoring.packingWeight: cannot be combined with scoring.scorers"},
      {R"({"scorers": [{"name": "Fgd"}], "fragmentationPolicy": "fgd"})",
       "scoring.fragmentationPolicy: cannot be combined with scoring.scorers"},
      {R"({"topologyWeight": 0, "packingWeight": 0})",
       "scoring: topologyWeight, packingWeight and fragmentationWeight cannot all be 0"},
      {R"({"fragmentationPolicy": "best"})",
       "scoring.fragmentationPolicy: must be \"fgd\" or \"lookahead\""},
  };
  for (const auto& c : kCases) {
    auto config = codec::DecodeConfig(StrCat(R"({"scoring": )", c.scoring, "}"));
    ASSERT_FALSE(config.ok()) << c.scoring;
    EXPECT_EQ(config.status().message(), c.error) << c.scoring;
  }
}

// What a cluster gets is what was measured: the deployed policy scores and
// resolves NVLink topology exactly as the shipped one (README, "Simulator
// results"); only server, quota and reclaim settings may differ.
TEST(DeployedPolicy, ScoresAndResolvesTopologyLikeTheMeasuredOne) {
  const auto shipped =
      nlohmann::json::parse(::gpusched::testing::ReadSourceFile("config/scheduler-policy.json"));
  const auto deployed =
      nlohmann::json::parse(::gpusched::testing::ReadSourceFile("deploy/scheduler-policy.json"));
  EXPECT_EQ(deployed.at("scoring"), shipped.at("scoring"));
  EXPECT_EQ(deployed.at("topologyTemplates"), shipped.at("topologyTemplates"));
  auto config =
      codec::DecodeConfig(::gpusched::testing::ReadSourceFile("deploy/scheduler-policy.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->topology_templates.empty());
}

// The quota entry's queueing strategy (Kueue's values); BestEffortFIFO
// unless set.
TEST(QuotaConfig, QueueingStrategyIsBestEffortUnlessSetAndOtherValuesNameTheField) {
  auto config = codec::DecodeConfig(R"({"quotas": {"namespaces": {
      "a": {"guaranteed": 8}, "b": {"guaranteed": 8, "queueingStrategy": "StrictFIFO"},
      "c": {"guaranteed": 8, "queueingStrategy": "Backfill"}}}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->quotas.namespaces.at("a").queueing, QueueingStrategy::kBestEffortFifo);
  EXPECT_EQ(config->quotas.namespaces.at("b").queueing, QueueingStrategy::kStrictFifo);
  EXPECT_EQ(config->quotas.namespaces.at("c").queueing, QueueingStrategy::kBackfill);
  EXPECT_EQ(config->quotas.default_quota.queueing, QueueingStrategy::kBestEffortFifo);
  auto bad = codec::DecodeConfig(
      R"({"quotas": {"default": {"guaranteed": 0, "queueingStrategy": "bestEffortFIFO"}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "quotas.default.queueingStrategy: must be StrictFIFO, BestEffortFIFO or Backfill, got "
            "'bestEffortFIFO'");
}

// Weights: a positive number (default 1), never on a namespace that may
// hold no GPU; per-model limits within the namespace's limit; no default
// entry = nothing guaranteed and no limit.
TEST(QuotaConfig, WeightsAndModelLimitsAreCheckedAndTheDefaultIsUnlimited) {
  auto config = codec::DecodeConfig(R"({"quotas": {"namespaces": {
      "a": {"guaranteed": 8, "weight": 2.5}, "b": {"guaranteed": 8}}}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->quotas.namespaces.at("a").weight, 2.5);
  EXPECT_EQ(config->quotas.namespaces.at("b").weight, 1.0);
  EXPECT_EQ(config->quotas.default_quota.gpus.guaranteed, 0);
  EXPECT_EQ(config->quotas.default_quota.gpus.limit, kUnlimitedGpus);
  const std::pair<const char*, const char*> kBad[] = {
      {R"({"a": {"guaranteed": 8, "weight": 0}})",
       "quotas.namespaces.a.weight: must be a number in (0, 1000000], got 0"},
      {R"({"a": {"guaranteed": 8, "weight": "heavy"}})",
       "quotas.namespaces.a.weight: must be a number in (0, 1000000], got \"heavy\""},
      {R"({"a": {"guaranteed": 0, "weight": 3}})",
       "quotas.namespaces.a.weight: is set but the limit is 0: a namespace that may hold no GPU "
       "has no share"},
      {R"({"a": {"guaranteed": 4, "limit": 8, "models": {"H100": {"limit": 12}}}})",
       "quotas.namespaces.a.models.H100.limit: must be <= the namespace's limit (8), got 12"},
  };
  for (const auto& [namespaces, error] : kBad) {
    auto bad = codec::DecodeConfig(StrCat(R"({"quotas": {"namespaces": )", namespaces, "}}"));
    ASSERT_FALSE(bad.ok()) << namespaces;
    EXPECT_EQ(bad.status().message(), error) << namespaces;
  }
}

// The opt-in attained-service ordering: present = on, GPU-hours to seconds,
// a budget of 0 by default; every error names the field.
TEST(QuotaConfig, AttainedServiceIsOnByDefaultAndErrorsNameTheField) {
  auto config = codec::DecodeConfig(R"({"quotas": {"namespaces": {"a": {"guaranteed": 8},
      "b": {"guaranteed": 8, "attainedService": {"demoteAfterGpuHours": 1.5}},
      "c": {"attainedService": {"demoteAfterGpuHours": 8, "preemptionsPerHour": 4}},
      "d": {"guaranteed": 8, "attainedService": {"enabled": false}}}}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->quotas.namespaces.at("a").attained, kDefaultAttainedService);
  EXPECT_EQ(kDefaultAttainedService, (AttainedServiceConfig{true, 8 * 3600, 12}));
  EXPECT_FALSE(config->quotas.namespaces.at("d").attained.enabled);
  EXPECT_EQ(config->quotas.default_quota.attained, kDefaultAttainedService);
  const AttainedServiceConfig& b = config->quotas.namespaces.at("b").attained;
  EXPECT_TRUE(b.enabled);
  EXPECT_EQ(b.demote_after_gpu_seconds, 5400);
  EXPECT_EQ(b.preemptions_per_hour, 0);
  EXPECT_EQ(config->quotas.namespaces.at("c").attained, (AttainedServiceConfig{true, 8 * 3600, 4}));
  struct Case {
    const char* entry;
    const char* error;
  };
  const Case kCases[] = {
      {R"({"attainedService": {}})",
       "quotas.default.attainedService.demoteAfterGpuHours: required"},
      {R"({"attainedService": {"demoteAfterGpuHours": -1}})",
       "quotas.default.attainedService.demoteAfterGpuHours: must be a number of GPU-hours in [0, "
       "1000000]"},
      {R"({"attainedService": {"demoteAfterGpuHours": "8"}})",
       "quotas.default.attainedService.demoteAfterGpuHours: must be a number of GPU-hours in [0, "
       "1000000]"},
      {R"({"attainedService": {"demoteAfterGpuHours": 8, "preemptionsPerHour": 1.5}})",
       "quotas.default.attainedService.preemptionsPerHour: must be an integer"},
      {R"({"attainedService": {"demoteAfterGpuHours": 8, "preemptionsPerHour": 4000}})",
       "quotas.default.attainedService.preemptionsPerHour: must be in [0, 3600], got 4000"},
      {R"({"attainedService": {"demoteAfterGpuHours": 8, "budget": 1}})",
       "quotas.default.attainedService.budget: unknown field"},
      {R"({"attainedService": 8})", "quotas.default.attainedService: must be an object"},
      {R"({"attainedService": {"enabled": false, "preemptionsPerHour": 2}})",
       "quotas.default.attainedService.enabled: is false: no other attainedService field may be "
       "set"},
  };
  for (const Case& c : kCases) {
    auto bad = codec::DecodeConfig(StrCat(R"({"quotas": {"default": )", c.entry, "}}"));
    ASSERT_FALSE(bad.ok()) << c.entry;
    EXPECT_EQ(bad.status().message(), c.error) << c.entry;
  }
}

// A number too large for a double is a JSON error with its position, not an
// exception (found by the config fuzzer).
TEST(ScoringConfig, NumberOverflowIsASyntaxError) {
  auto config = codec::DecodeConfig("{\n  \"gang\": {\"reservationSeconds\": 9e999}}");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "config: not valid JSON at line 2, column 34: number overflow parsing '9e999'");
  EXPECT_FALSE(codec::DecodeConfig("\n9999e99999999999999999*98").ok());
}

// A key set twice in one object is refused naming it, at every depth (it
// used to win silently, last one first), and the same key in different
// objects is not a duplicate.
TEST(ScoringConfig, DuplicateKeyIsRefusedNamingIt) {
  struct Case {
    const char* text;
    const char* field;
  };
  const Case cases[] = {
      {R"({"gang": {"reservationSeconds": 60}, "gang": {"reservationSeconds": 90}})", "gang"},
      {R"({"quotas": {"namespaces": {"team-a": {"guaranteed": 8, "limit": 8, "limit": 80}}}})",
       "quotas.namespaces.team-a.limit"},
      {R"({"quotas": {"namespaces": {"a": {"guaranteed": 1}, "a": {"guaranteed": 2}}}})",
       "quotas.namespaces.a"},
      {R"({"scoring": {"fragmentationTarget": [{"gpus": 1, "weight": 1},
           {"gpus": 2, "weight": 1, "weight": 3}]}})",
       "scoring.fragmentationTarget[1].weight"},
      {R"({"topologyTemplates": [[1, 2], {"name": "x", "name": "y"}]})",
       "topologyTemplates[1].name"},
  };
  for (const Case& c : cases) {
    auto config = codec::DecodeConfig(c.text);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_TRUE(absl::StartsWith(config.status().message(), StrCat(c.field, ": duplicate key")))
        << config.status().message();
  }
  auto ok = codec::DecodeConfig(R"({"quotas": {"namespaces": {
      "a": {"guaranteed": 1, "limit": 2}, "b": {"guaranteed": 1, "limit": 2}}}})");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

}  // namespace
}  // namespace gpusched::policy
