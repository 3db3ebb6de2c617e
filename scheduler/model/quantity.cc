#include "gpusched/util/quantity.h"

#include <limits>

#include "gpusched/util/strings.h"

namespace gpusched {
namespace {

using int128 = __int128;

// A parsed quantity: value = mantissa * 10^exp10 * 2^exp2.
struct Parsed {
  int128 mantissa = 0;
  int exp10 = 0;
  int exp2 = 0;
  bool negative = false;
};

absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(StrCat("quantity '", text, "': ", why));
}

absl::StatusOr<Parsed> Parse(std::string_view text) {
  Parsed p;
  size_t i = 0;
  if (text.empty()) return Bad(text, "empty");
  if (text.size() > 64) return Bad(text, "too long");
  if (text[i] == '+' || text[i] == '-') {
    p.negative = text[i] == '-';
    ++i;
  }
  bool digits = false;
  bool dot = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      digits = true;
      if (p.mantissa > (int128{1} << 100)) return Bad(text, "too large");
      p.mantissa = p.mantissa * 10 + (c - '0');
      if (dot) --p.exp10;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits) return Bad(text, "no digits");
  std::string_view suffix = text.substr(i);
  if (suffix.empty()) return p;
  struct S {
    std::string_view s;
    int exp10;
    int exp2;
  };
  static constexpr S kSuffixes[] = {{"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40},
                                    {"Pi", 0, 50}, {"Ei", 0, 60}, {"n", -9, 0},  {"u", -6, 0},
                                    {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},   {"G", 9, 0},
                                    {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0}};
  for (const S& s : kSuffixes) {
    if (suffix == s.s) {
      p.exp10 += s.exp10;
      p.exp2 += s.exp2;
      return p;
    }
  }
  if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string_view e = suffix.substr(1);
    bool neg = false;
    if (!e.empty() && (e[0] == '+' || e[0] == '-')) {
      neg = e[0] == '-';
      e.remove_prefix(1);
    }
    if (e.empty() || e.size() > 3) return Bad(text, "bad exponent");
    int v = 0;
    for (char c : e) {
      if (c < '0' || c > '9') return Bad(text, "bad exponent");
      v = v * 10 + (c - '0');
    }
    p.exp10 += neg ? -v : v;
    return p;
  }
  return Bad(text, StrCat("unknown suffix '", suffix, "'"));
}

// Returns ceil(p * scale10 * 2^scale2 ... ) as int64, or an error on overflow.
absl::StatusOr<int64_t> Scale(std::string_view text, const Parsed& p, int extra_exp10,
                              int extra_exp2, bool require_integer) {
  if (p.negative && p.mantissa != 0) return Bad(text, "negative");
  int e10 = p.exp10 + extra_exp10;
  int e2 = p.exp2 + extra_exp2;
  if (e10 > 30 || e10 < -40 || e2 > 70 || e2 < -70) return Bad(text, "out of range");
  int128 num = p.mantissa;
  int128 den = 1;
  constexpr int128 kCap = int128{1} << 120;
  for (int k = 0; k < e10; ++k) {
    num *= 10;
    if (num > kCap) return Bad(text, "too large");
  }
  for (int k = 0; k < e2; ++k) {
    num *= 2;
    if (num > kCap) return Bad(text, "too large");
  }
  // num <= kCap from here on, so once den passes it the quotient is 0 and
  // den need not grow further (10^40 * 2^70 would leave int128).
  for (int k = 0; k < -e10 && den <= kCap; ++k) den *= 10;
  for (int k = 0; k < -e2 && den <= kCap; ++k) den *= 2;
  int128 q = num / den;
  if (num % den != 0) {
    if (require_integer) return Bad(text, "must be a whole number");
    ++q;
  }
  if (q > std::numeric_limits<int64_t>::max()) return Bad(text, "too large");
  return static_cast<int64_t>(q);
}

}  // namespace

absl::StatusOr<int64_t> ParseQuantityMilli(std::string_view text) {
  auto p = Parse(text);
  if (!p.ok()) return p.status();
  return Scale(text, *p, 3, 0, false);
}

absl::StatusOr<int64_t> ParseQuantityValue(std::string_view text) {
  auto p = Parse(text);
  if (!p.ok()) return p.status();
  return Scale(text, *p, 0, 0, false);
}

absl::StatusOr<int64_t> ParseQuantityInteger(std::string_view text) {
  auto p = Parse(text);
  if (!p.ok()) return p.status();
  return Scale(text, *p, 0, 0, true);
}

absl::StatusOr<int64_t> ParseQuantityMiB(std::string_view text) {
  auto p = Parse(text);
  if (!p.ok()) return p.status();
  return Scale(text, *p, 0, -20, false);
}

}  // namespace gpusched
