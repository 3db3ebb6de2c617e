// Finds keys repeated within one JSON object while nlohmann parses (its
// objects keep only the last value of a repeated key, so a duplicate cannot
// be seen afterwards). Decoders refuse such a document or object, naming
// the key, rather than letting the last value win. Paths are written as
// errors name fields: "quotas.namespaces.team-a.limit", "items[2].spec".
// Private to scheduler/codec (the policy file and the quota objects use it).
// Thread-compatible: one finder per parse.
#ifndef GPUSCHED_CODEC_INTERNAL_DUPLICATE_KEYS_H_
#define GPUSCHED_CODEC_INTERNAL_DUPLICATE_KEYS_H_

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpusched::codec {

// What follows the path in the error: "<path>: <kDuplicateKeyMessage>".
inline constexpr char kDuplicateKeyMessage[] =
    "duplicate key: set more than once in the same object (refused rather than letting the last "
    "one win)";

// Pass as the parser callback, by reference:
//   json::parse(text, std::ref(finder), /*allow_exceptions=*/false)
class DuplicateKeyFinder {
 public:
  // `objects`: the root member that holds objects decoded one by one, each
  // refused on its own: "items" (a Kubernetes list: an array of them) or
  // "object" (a watch event: one). "" for a document decoded as a whole.
  explicit DuplicateKeyFinder(std::string objects = "") : objects_(std::move(objects)) {}

  // Keeps every value, records duplicates.
  bool operator()(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed);

  // The path of the first repeated key anywhere, or "" if none.
  const std::string& first() const { return first_; }
  // The first repeated key within object `index` of `objects` (0 for a
  // watch event's), as a path from that object ("spec.guaranteed"), or "".
  std::string InObject(size_t index) const;
  // The first repeated key outside every object of `objects` (the list's or
  // event's own: "metadata.continue", "items", "type"), or "" if none.
  const std::string& outside_objects() const { return outside_; }

 private:
  struct Frame {
    bool array = false;
    std::set<std::string> keys;
    std::string key;   // the current member (objects)
    size_t index = 0;  // the current element (arrays)
  };
  void OnKey(std::string key);
  void NextElement();
  // The path of the current member from frames_[from] on.
  std::string Path(size_t from) const;

  const std::string objects_;
  std::vector<Frame> frames_;
  std::string first_, outside_;
  std::map<size_t, std::string> in_object_;
};

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_INTERNAL_DUPLICATE_KEYS_H_
