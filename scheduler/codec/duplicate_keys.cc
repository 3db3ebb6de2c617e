#include "scheduler/codec/internal/duplicate_keys.h"

#include <utility>

#include "gpusched/util/strings.h"

namespace gpusched::codec {

using json = nlohmann::json;

bool DuplicateKeyFinder::operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
  switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      frames_.push_back({event == json::parse_event_t::array_start, {}, {}, 0});
      break;
    case json::parse_event_t::key:
      OnKey(parsed.get<std::string>());
      break;
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      frames_.pop_back();
      NextElement();
      break;
    case json::parse_event_t::value:
      NextElement();
      break;
  }
  return true;
}

std::string DuplicateKeyFinder::InObject(size_t index) const {
  auto it = in_object_.find(index);
  return it == in_object_.end() ? std::string() : it->second;
}

void DuplicateKeyFinder::OnKey(std::string key) {
  Frame& f = frames_.back();
  f.key = std::move(key);
  if (f.keys.insert(f.key).second) return;
  if (first_.empty()) first_ = Path(0);
  // frames_: [0] the root object, [1] its member `objects_`: one object,
  // or an array whose element [1].index is frames_[2] (a key is read in an
  // object frame, so a listed one has at least 3).
  const bool in_objects =
      !objects_.empty() && frames_.size() >= 2 && !frames_[0].array && frames_[0].key == objects_;
  const bool listed = in_objects && frames_[1].array;
  if (!in_objects) {
    if (outside_.empty()) outside_ = Path(0);
    return;
  }
  std::string& slot = in_object_[listed ? frames_[1].index : 0];
  if (slot.empty()) slot = Path(listed ? 2 : 1);
}

void DuplicateKeyFinder::NextElement() {
  if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
}

std::string DuplicateKeyFinder::Path(size_t from) const {
  std::string path;
  for (size_t i = from; i < frames_.size(); ++i) {
    const Frame& f = frames_[i];
    if (f.array) {
      path = StrCat(path, "[", f.index, "]");
    } else {
      path = path.empty() ? f.key : StrCat(path, ".", f.key);
    }
  }
  return path;
}

}  // namespace gpusched::codec
