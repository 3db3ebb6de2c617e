#include "scheduler/codec/json_writer.h"

#include <algorithm>
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

// Length of the longest prefix of `s`, in whole 8-byte words, with nothing
// to escape.
inline size_t CleanWordPrefix(std::string_view s) {
  size_t i = 0;
  while (i + 8 <= s.size()) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (NeedsEscape(w)) break;
    i += 8;
  }
  return i;
}

}  // namespace

void JsonWriter::WriteString(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_->push_back('"');
  size_t i = CleanWordPrefix(s);
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

JsonAppender::JsonAppender(std::string* out, size_t expected) : out_(out) {
  const size_t used = out->size();
  out->resize(used + expected);
  p_ = out->data() + used;
  end_ = out->data() + out->size();
}

void JsonAppender::Grow(size_t n) {
  const size_t used = static_cast<size_t>(p_ - out_->data());
  out_->resize(std::max(used + n, 2 * out_->size()));
  p_ = out_->data() + used;
  end_ = out_->data() + out_->size();
}

void JsonAppender::String(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  *p_++ = '"';
  size_t i = CleanWordPrefix(s);
  if (i < s.size() && s.size() - i < 8 && s.size() >= 8) {
    // Only a part-word tail is left: test the last 8 bytes at once (they
    // overlap the clean prefix, which is harmless).
    uint64_t w;
    std::memcpy(&w, s.data() + s.size() - 8, 8);
    if (!NeedsEscape(w)) i = s.size();
  }
  std::memcpy(p_, s.data(), i);
  p_ += i;
  for (; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') {
      *p_++ = static_cast<char>(c);
      continue;
    }
    *p_++ = '\\';
    switch (c) {
      case '"':
        *p_++ = '"';
        break;
      case '\\':
        *p_++ = '\\';
        break;
      case '\n':
        *p_++ = 'n';
        break;
      case '\r':
        *p_++ = 'r';
        break;
      case '\t':
        *p_++ = 't';
        break;
      default:
        std::memcpy(p_, "u00", 3);
        p_ += 3;
        *p_++ = kHex[c >> 4];
        *p_++ = kHex[c & 15];
    }
  }
  *p_++ = '"';
}

void JsonAppender::Int(int64_t v) { p_ = std::to_chars(p_, p_ + 20, v).ptr; }

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
