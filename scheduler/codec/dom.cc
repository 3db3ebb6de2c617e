#include "scheduler/codec/internal/dom.h"

#include "absl/time/time.h"
#include "gpusched/util/strings.h"

namespace gpusched::codec {

absl::Status TypeError(std::string_view path, std::string_view want) {
  return absl::InvalidArgumentError(StrCat(path, ": expected ", want));
}

std::optional<Element> Member(const Object& obj, std::string_view key) {
  Element e;
  if (obj.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
  return e;
}

absl::StatusOr<std::optional<Object>> OptObject(const Object& obj, std::string_view key,
                                                std::string_view path) {
  auto e = Member(obj, key);
  if (!e) return std::optional<Object>();
  Object o;
  if (e->get_object().get(o) != simdjson::SUCCESS)
    return TypeError(StrCat(path, ".", key), "object");
  return std::optional<Object>(o);
}

absl::StatusOr<std::optional<std::string_view>> OptString(const Object& obj, std::string_view key,
                                                          std::string_view path) {
  auto e = Member(obj, key);
  if (!e) return std::optional<std::string_view>();
  std::string_view s;
  if (e->get_string().get(s) != simdjson::SUCCESS)
    return TypeError(StrCat(path, ".", key), "string");
  return std::optional<std::string_view>(s);
}

absl::StatusOr<std::optional<int64_t>> OptInt(const Object& obj, std::string_view key,
                                              std::string_view path) {
  auto e = Member(obj, key);
  if (!e) return std::optional<int64_t>();
  int64_t v = 0;
  if (e->get_int64().get(v) != simdjson::SUCCESS)
    return TypeError(StrCat(path, ".", key), "integer");
  return std::optional<int64_t>(v);
}

absl::StatusOr<std::optional<bool>> OptBool(const Object& obj, std::string_view key,
                                            std::string_view path) {
  auto e = Member(obj, key);
  if (!e) return std::optional<bool>();
  bool v = false;
  if (e->get_bool().get(v) != simdjson::SUCCESS)
    return TypeError(StrCat(path, ".", key), "boolean");
  return std::optional<bool>(v);
}

absl::StatusOr<int64_t> ParseTimestamp(std::string_view text, std::string_view path) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, ToAbsl(text), &t, &err)) {
    return absl::InvalidArgumentError(StrCat(path, ": bad timestamp '", text, "': ", err));
  }
  return absl::ToUnixSeconds(t);
}

}  // namespace gpusched::codec
