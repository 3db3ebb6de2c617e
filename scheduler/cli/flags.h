// Flags: "--name value" / "--name=value" / "--switch" parsing for the
// gpusched subcommands. Unknown flags are errors that name the flag.
// `--help` and `-h` are accepted by every command: they ask for its usage.
// Not thread-safe (used once at start-up).
#ifndef GPUSCHED_CLI_FLAGS_H_
#define GPUSCHED_CLI_FLAGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gpusched::cli {

class Flags {
 public:
  // `valued`: flags that take a value; `switches`: flags that do not;
  // `usage`: the command's help text (ParseOrExit prints it).
  Flags(std::set<std::string> valued, std::set<std::string> switches, std::string usage = "")
      : valued_(std::move(valued)), switches_(std::move(switches)), usage_(std::move(usage)) {}

  // Parses `args`. `--help` / `-h` anywhere set help() and are not errors.
  absl::Status Parse(const std::vector<std::string>& args);
  // The start of a subcommand: parses `args`. Asked for help, prints the
  // usage to stdout and returns 0; on a bad flag, prints "gpusched
  // <command>: <message>" and the usage to stderr and returns 2; otherwise
  // returns nullopt and the command goes on.
  std::optional<int> ParseOrExit(std::string_view command, const std::vector<std::string>& args);

  bool help() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> valued_;
  std::set<std::string> switches_;
  std::string usage_;
  bool help_ = false;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// True if `args` ask for help (`--help` or `-h`), for commands that do not
// parse with Flags::ParseOrExit.
bool WantsHelp(const std::vector<std::string>& args);

}  // namespace gpusched::cli

#endif  // GPUSCHED_CLI_FLAGS_H_
