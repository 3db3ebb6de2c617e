#include "scheduler/codec/json_writer.h"

#include <charconv>
#include <cstdint>
#include <cstring>

namespace gpusched::codec {

namespace {

// True if any of the 8 bytes in `w` needs escaping: < 0x20, '"' or '\\'
// (word-at-a-time test; node names and reasons are almost always clean).
inline bool NeedsEscape(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  uint64_t below_space = (w - kOnes * 0x20) & ~w & kHigh;
  return (below_space | has_zero(w ^ (kOnes * '"')) | has_zero(w ^ (kOnes * '\\'))) != 0;
}

}  // namespace

void JsonWriter::WriteString(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_->push_back('"');
  size_t i = 0;
  while (i + 8 <= s.size()) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (NeedsEscape(w)) break;
    i += 8;
  }
  size_t run = 0;
  for (; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out_->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out_->append("\\\"");
        break;
      case '\\':
        out_->append("\\\\");
        break;
      case '\n':
        out_->append("\\n");
        break;
      case '\r':
        out_->append("\\r");
        break;
      case '\t':
        out_->append("\\t");
        break;
      default:
        out_->append("\\u00");
        out_->push_back(kHex[c >> 4]);
        out_->push_back(kHex[c & 15]);
    }
  }
  out_->append(s.data() + run, s.size() - run);
  out_->push_back('"');
}

void JsonWriter::Int(int64_t v) {
  Sep();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out_->append(buf, r.ptr);
}

std::string EscapePercent(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    out.push_back(c);
    if (c == '%') out.push_back('%');
  }
  return out;
}

}  // namespace gpusched::codec
