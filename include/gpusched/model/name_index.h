// NameIndex: node name -> node index for one snapshot, built for the filter
// path: 5,000 lookups per request. Open addressing over 8-byte slots (32-bit
// fingerprint + index), names kept in one contiguous arena, so a lookup
// touches two cache lines that stay hot across requests. Immutable after
// construction; thread-safe.
#ifndef GPUSCHED_MODEL_NAME_INDEX_H_
#define GPUSCHED_MODEL_NAME_INDEX_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gpusched {

class NameIndex {
 public:
  // `names[i]` gets index i. Names must be unique.
  explicit NameIndex(const std::vector<std::string>& names);

  // Returns the index of `name`, or -1.
  int32_t Find(std::string_view name) const {
    if (slots_.empty()) return -1;
    return FindHashed(name, Hash(name));
  }
  // out[i] = Find(names[i]) for i < n. Faster than n calls to Find: the
  // cache misses of neighbouring lookups overlap (software prefetch).
  void FindAll(const std::string_view* names, size_t n, int32_t* out) const;
  size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }

  // A fast 64-bit string hash (8 bytes at a time, multiply-xorshift mixing).
  static uint64_t Hash(std::string_view s) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = Mix(h ^ w);
    }
    const size_t rest = s.size() - i;
    uint64_t tail = 0;
    if (rest > 0 && s.size() >= 8) {
      // The last 8 bytes, shifted so only the unhashed ones remain: one load
      // instead of a variable-length copy.
      std::memcpy(&tail, s.data() + s.size() - 8, 8);
      tail >>= 8 * (8 - rest);
    } else if (rest > 0) {
      std::memcpy(&tail, s.data(), rest);
    }
    return Mix(h ^ tail ^ (uint64_t{0xff} << 56));
  }

 private:
  int32_t FindHashed(std::string_view name, uint64_t h) const {
    const uint32_t fp = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.index < 0) return -1;
      if (s.fingerprint == fp) {
        const uint32_t begin = offsets_[s.index];
        const uint32_t len = offsets_[s.index + 1] - begin;
        if (len == name.size() && std::memcmp(arena_.data() + begin, name.data(), len) == 0) {
          return s.index;
        }
      }
    }
  }
  static uint64_t Mix(uint64_t x) {
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 29);
  }
  struct Slot {
    uint32_t fingerprint = 0;
    int32_t index = -1;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string arena_;
  std::vector<uint32_t> offsets_;  // names_[i] = arena_[offsets_[i], offsets_[i+1])
};

}  // namespace gpusched

#endif  // GPUSCHED_MODEL_NAME_INDEX_H_
