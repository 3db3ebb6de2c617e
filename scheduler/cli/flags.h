// Flags: "--name value" / "--name=value" / "--switch" parsing for the
// gpusched subcommands. Unknown flags are errors that name the flag.
// Not thread-safe (used once at start-up).
#ifndef GPUSCHED_CLI_FLAGS_H_
#define GPUSCHED_CLI_FLAGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gpusched::cli {

class Flags {
 public:
  // `valued`: flags that take a value; `switches`: flags that do not.
  Flags(std::set<std::string> valued, std::set<std::string> switches)
      : valued_(std::move(valued)), switches_(std::move(switches)) {}

  absl::Status Parse(const std::vector<std::string>& args);
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> valued_;
  std::set<std::string> switches_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace gpusched::cli

#endif  // GPUSCHED_CLI_FLAGS_H_
