#include "scheduler/cli/flags.h"

#include "gpusched/util/strings.h"

namespace gpusched::cli {

absl::Status Flags::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (switches_.count(name)) {
      values_[name] = has_value ? value : "true";
      continue;
    }
    if (!valued_.count(name)) return absl::InvalidArgumentError(StrCat("unknown flag --", name));
    if (!has_value) {
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(StrCat("flag --", name, " needs a value"));
      value = args[++i];
    }
    values_[name] = value;
  }
  return absl::OkStatus();
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

}  // namespace gpusched::cli
