#include "gpusched/model/name_index.h"

#include <algorithm>

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

void NameIndex::FindAll(const std::string_view* names, size_t n, int32_t* out) const {
  if (slots_.empty()) {
    std::fill(out, out + n, -1);
    return;
  }
  // Three stages, kAhead lookups apart, so that the misses of one lookup (its
  // slot, then its name in the arena) are in flight while others are probed:
  //   i + 2*kAhead: hash the name, prefetch its home slot;
  //   i + kAhead:   read that slot, prefetch the name it points to;
  //   i:            probe, from cache.
  constexpr size_t kAhead = 8;
  constexpr size_t kRing = 32;  // > 2 * kAhead hashes in flight
  uint64_t ring[kRing];
  auto hash = [&](size_t j) {
    const uint64_t h = Hash(names[j]);
    ring[j % kRing] = h;
    __builtin_prefetch(&slots_[h & mask_]);
  };
  auto touch = [&](size_t j) {
    const Slot& s = slots_[ring[j % kRing] & mask_];
    if (s.index >= 0) __builtin_prefetch(arena_.data() + offsets_[s.index]);
  };
  for (size_t j = 0; j < std::min(n, 2 * kAhead); ++j) hash(j);
  for (size_t j = 0; j < std::min(n, kAhead); ++j) touch(j);
  for (size_t i = 0; i < n; ++i) {
    if (i + 2 * kAhead < n) hash(i + 2 * kAhead);
    if (i + kAhead < n) touch(i + kAhead);
    out[i] = FindHashed(names[i], ring[i % kRing]);
  }
}

}  // namespace gpusched
