#include "gpusched/model/name_index.h"

namespace gpusched {

NameIndex::NameIndex(const std::vector<std::string>& names) {
  offsets_.reserve(names.size() + 1);
  offsets_.push_back(0);
  for (const std::string& n : names) {
    arena_ += n;
    offsets_.push_back(static_cast<uint32_t>(arena_.size()));
  }
  size_t cap = 16;
  while (cap < names.size() * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (size_t k = 0; k < names.size(); ++k) {
    const uint64_t h = Hash(names[k]);
    size_t i = h & mask_;
    while (slots_[i].index >= 0) i = (i + 1) & mask_;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(k)};
  }
}

}  // namespace gpusched
