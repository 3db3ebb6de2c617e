// JsonWriter: appends compact JSON to a string. The extender's responses are
// written with it because they are on the hot path (5,000-node answers) and
// have a fixed shape. Private to scheduler/codec. Not thread-safe.
#ifndef GPUSCHED_CODEC_JSON_WRITER_H_
#define GPUSCHED_CODEC_JSON_WRITER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gpusched::codec {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  void BeginObject() {
    Sep();
    out_->push_back('{');
    first_ = true;
  }
  void EndObject() {
    out_->push_back('}');
    first_ = false;
  }
  void BeginArray() {
    Sep();
    out_->push_back('[');
    first_ = true;
  }
  void EndArray() {
    out_->push_back(']');
    first_ = false;
  }
  void Key(std::string_view k) {
    Sep();
    WriteString(k);
    out_->push_back(':');
    first_ = true;
  }
  void String(std::string_view s) {
    Sep();
    WriteString(s);
  }
  void Int(int64_t v);
  // The common member shapes: "k":"v" and "k":v.
  void StringMember(std::string_view k, std::string_view v) {
    Key(k);
    String(v);
  }
  void IntMember(std::string_view k, int64_t v) {
    Key(k);
    Int(v);
  }
  // Writes "k":"v" only when `v` is non-empty (Kubernetes' omitempty).
  void OptionalStringMember(std::string_view k, std::string_view v) {
    if (!v.empty()) StringMember(k, v);
  }
  void Bool(bool v) {
    Sep();
    out_->append(v ? "true" : "false");
  }
  void Null() {
    Sep();
    out_->append("null");
  }
  // Appends already-encoded JSON (e.g. an echoed Node object).
  void Raw(std::string_view json) {
    Sep();
    out_->append(json);
  }

 private:
  void WriteString(std::string_view s);
  void Sep() {
    if (!first_) out_->push_back(',');
    first_ = false;
  }
  std::string* out_;
  bool first_ = true;
};

// JsonAppender: writes JSON text through a raw pointer into a string sized
// up front, for the two answers written once per scheduling cycle with one
// entry per node (filter and prioritize). The caller does the punctuation.
// Every write REQUIRES room made by Reserve() first; Finish() trims the string
// to what was written and must be called before the string is read.
// Private to scheduler/codec. Not thread-safe.
class JsonAppender {
 public:
  // Room for `expected` bytes is made at once.
  JsonAppender(std::string* out, size_t expected);
  JsonAppender(const JsonAppender&) = delete;
  JsonAppender& operator=(const JsonAppender&) = delete;

  // Makes room for `n` more bytes.
  void Reserve(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) Grow(n);
  }
  // Room String(s) may need: every byte escaped as \u00XX, plus quotes.
  static size_t StringBound(std::string_view s) { return 6 * s.size() + 2; }

  void Char(char c) { *p_++ = c; }
  void Literal(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  // Writes `s` quoted and escaped.
  void String(std::string_view s);
  // Writes `v` in decimal; needs 20 bytes of room.
  void Int(int64_t v);
  void Finish() { out_->resize(static_cast<size_t>(p_ - out_->data())); }

 private:
  void Grow(size_t n);
  std::string* out_;
  char* p_;
  char* end_;
};

// Returns `s` with '%' doubled: kube-scheduler passes an extender's Error
// string to fmt.Errorf as the format, so a bare '%' would be mangled.
std::string EscapePercent(std::string_view s);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_JSON_WRITER_H_
