// JsonWriter: appends compact JSON to a string. The extender's responses are
// written with it because they are on the hot path (5,000-node answers) and
// have a fixed shape. Private to scheduler/codec. Not thread-safe.
#ifndef GPUSCHED_CODEC_JSON_WRITER_H_
#define GPUSCHED_CODEC_JSON_WRITER_H_

#include <cstdint>
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

// Returns `s` with '%' doubled: kube-scheduler passes an extender's Error
// string to fmt.Errorf as the format, so a bare '%' would be mangled.
std::string EscapePercent(std::string_view s);

}  // namespace gpusched::codec

#endif  // GPUSCHED_CODEC_JSON_WRITER_H_
