#include "scheduler/cli/flags.h"

#include <iostream>

#include "gpusched/util/strings.h"

namespace gpusched::cli {
namespace {

bool IsHelp(const std::string& a) { return a == "--help" || a == "-h"; }

}  // namespace

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (IsHelp(a)) return true;
  }
  return false;
}

absl::Status Flags::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (IsHelp(a)) {
      help_ = true;
      continue;
    }
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

std::optional<int> Flags::ParseOrExit(std::string_view command,
                                      const std::vector<std::string>& args) {
  absl::Status s = Parse(args);
  // Help wins over a bad flag: `gpusched x --bogus --help` shows the usage.
  if (help_) {
    std::cout << usage_;
    return 0;
  }
  if (!s.ok()) {
    std::cerr << "gpusched " << command << ": " << s.message() << "\n" << usage_;
    return 2;
  }
  return std::nullopt;
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

}  // namespace gpusched::cli
