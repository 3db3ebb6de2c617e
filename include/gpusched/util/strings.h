// String helpers that accept std::string_view. Debian's abseil is built with
// its own absl::string_view (not an alias of std::string_view), so these
// wrappers convert at the boundary; everything else in gpusched uses
// std::string_view. Pure; thread-safe.
#ifndef GPUSCHED_UTIL_STRINGS_H_
#define GPUSCHED_UTIL_STRINGS_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpusched {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view FromAbsl(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

namespace strings_internal {
template <typename T>
decltype(auto) Arg(const T& v) {
  if constexpr (std::is_same_v<T, std::string_view>) {
    return ToAbsl(v);
  } else {
    return (v);
  }
}
}  // namespace strings_internal

// absl::StrCat / absl::StrAppend that also take std::string_view.
template <typename... Args>
std::string StrCat(const Args&... args) {
  return absl::StrCat(strings_internal::Arg(args)...);
}
template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  absl::StrAppend(out, strings_internal::Arg(args)...);
}

}  // namespace gpusched

#endif  // GPUSCHED_UTIL_STRINGS_H_
