// The built gpusched binary's usage texts and validate's warnings: every
// subcommand takes --help / -h (usage on stdout, exit 0), the top-level
// usage lists every command and the cluster-source and TLS flags, and
// validate warns (exit 0) about namespaces that can never get a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

namespace gpusched {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int exit_code = -1;
  std::string out;  // stdout only
};

Outcome Gpusched(const std::string& args) {
  const std::string cmd = std::string(GPUSCHED_BINARY) + " " + args + " 2>/dev/null";
  Outcome r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Source(const std::string& relative) {
  return std::string(GPUSCHED_SOURCE_DIR) + "/" + relative;
}

TEST(CliUsageTest, EverySubcommandTakesHelp) {
  struct Case {
    std::string args;
    std::vector<std::string> mentions;
  } cases[] = {
      {"serve --help", {"usage: gpusched serve", "--kube", "--tls-cert"}},
      {"serve -h", {"usage: gpusched serve"}},
      {"serve --cluster x.json --help", {"usage: gpusched serve"}},
      {"validate --help", {"usage: gpusched validate", "--config", "--cluster"}},
      {"validate -h", {"usage: gpusched validate"}},
      {"simulate --help", {"usage: gpusched simulate", "--protocol"}},
      {"simulate -h", {"usage: gpusched simulate"}},
      {"topology-agent --help", {"usage: gpusched topology-agent", "--node", "--once"}},
      {"topology-agent -h", {"usage: gpusched topology-agent"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    Outcome r = Gpusched(c.args);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    for (const std::string& m : c.mentions) EXPECT_THAT(r.out, HasSubstr(m));
  }
}

TEST(CliUsageTest, TopLevelUsageListsCommandsAndSourceAndTlsFlags) {
  for (const std::string args : {"--help", "help", "-h"}) {
    SCOPED_TRACE(args);
    Outcome r = Gpusched(args);
    EXPECT_EQ(r.exit_code, 0);
    for (const char* m :
         {"serve", "validate", "simulate", "topology-agent", "version", "--kube", "--kubeconfig",
          "--cluster", "--tls-cert", "--tls-key", "--tls-client-ca"}) {
      EXPECT_THAT(r.out, HasSubstr(m));
    }
  }
}

TEST(CliUsageTest, BadFlagIsAnErrorNotHelp) {
  EXPECT_EQ(Gpusched("validate --bogus").exit_code, 2);
  EXPECT_EQ(Gpusched("topology-agent --bogus").exit_code, 2);
  EXPECT_EQ(Gpusched("").exit_code, 2);
}

TEST(CliUsageTest, ValidateWarnsAboutNamespacesThatNeverGetGpus) {
  Outcome r = Gpusched("validate --config " + Source("test/cli/warn/never_admitted.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // Idle GPUs are lent to every namespace up to its limit: only a limit of
  // 0 shuts one out (no guarantee and no cohort is fine).
  EXPECT_THAT(r.out, AllOf(HasSubstr("WARNING: quotas.namespaces.frozen: limit 0"),
                           HasSubstr("WARNING: quotas.namespaces.no-h100.models.H100: limit 0"),
                           Not(HasSubstr("quotas.default")), Not(HasSubstr("lonely")),
                           Not(HasSubstr("quotas.namespaces.fine"))));
}

// With a cluster: the GPUs no quota can ever use (unlisted namespaces hold
// nothing, listed limits add up to less than the cluster), and guarantees
// that over-promise the cluster, each with the amount.
TEST(CliUsageTest, ValidateSaysWhichGpusNoQuotaCanUseAndHowFarGuaranteesOverPromise) {
  const std::string cluster = " --cluster " + Source("config/demo-cluster.json");
  Outcome r = Gpusched("validate --config " + Source("test/cli/warn/uncovered.json") + cluster);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("WARNING: quotas: 39 of the cluster's 59 GPUs can never be used: "
                               "the listed limits add up to 20"));
  EXPECT_THAT(r.out, Not(HasSubstr("guarantees add up")));
  r = Gpusched("validate --config " + Source("test/cli/warn/overpromised.json") + cluster);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("WARNING: quotas: guarantees add up to 100 GPUs, 41 more than the "
                               "cluster's 59"));  // one of the demo's 60 is unhealthy
  EXPECT_THAT(r.out, Not(HasSubstr("can never be used")));
}

// Two running pods claiming the same devices: validate does not call the
// cluster ok, names the conflict, and counts both claims as allocated.
TEST(CliUsageTest, ValidateReportsConflictingDeviceClaims) {
  Outcome r = Gpusched("validate --config " + Source("config/scheduler-policy.json") +
                       " --cluster " + Source("test/cli/warn/conflicting_ids.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, AllOf(HasSubstr(": 1 device conflict (1 nodes, 8 healthy GPUs, 8 allocated)"),
                           HasSubstr("warning: node h0: device conflict: pods team-a/first and "
                                     "team-b/second both claim GPU 0"),
                           Not(HasSubstr(": ok (1 nodes"))));
}

TEST(CliUsageTest, ShippedConfigHasNoWarnings) {
  Outcome r = Gpusched("validate --config " + Source("config/scheduler-policy.json") +
                       " --cluster " + Source("config/demo-cluster.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("WARNING")));
}

}  // namespace
}  // namespace gpusched
