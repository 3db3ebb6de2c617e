// MiniYaml: a parser for the block-style YAML subset found in kubeconfig
// files: nested maps, "- " sequences (also at their key's indentation),
// plain, 'single' and "double" quoted scalars, comments, empty {} and [].
// Anything else is an error naming the line. Private to scheduler/kube.
// Pure; thread-safe.
#ifndef GPUSCHED_KUBE_MINI_YAML_H_
#define GPUSCHED_KUBE_MINI_YAML_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusched::kube {

struct YamlNode {
  enum class Kind { kScalar, kMap, kList };
  Kind kind = Kind::kScalar;
  std::string scalar;
  std::vector<std::pair<std::string, YamlNode>> map;
  std::vector<YamlNode> list;

  // The member `key` of a map, or nullptr.
  const YamlNode* Get(std::string_view key) const;
  // The scalar member `key` of a map, or "".
  std::string Str(std::string_view key) const;
};

absl::StatusOr<YamlNode> ParseMiniYaml(std::string_view text);

}  // namespace gpusched::kube

#endif  // GPUSCHED_KUBE_MINI_YAML_H_
