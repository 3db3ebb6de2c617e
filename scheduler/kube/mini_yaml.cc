#include "scheduler/kube/mini_yaml.h"

#include "gpusched/util/strings.h"

namespace gpusched::kube {
namespace {

struct Line {
  int number = 0;
  int indent = 0;
  std::string text;  // without indentation and trailing comment/space
};

bool IsListItem(const std::string& t) { return t == "-" || t.rfind("- ", 0) == 0; }

// Strips a trailing " # comment" outside quotes and trailing blanks.
std::string StripComment(std::string_view s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      s = s.substr(0, i);
      break;
    }
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return std::string(s);
}

absl::StatusOr<std::string> Unquote(std::string_view s, int line) {
  if (s.size() >= 2 && s.front() == '\'' && s.back() == '\'') {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      out.push_back(s[i]);
      if (s[i] == '\'' && i + 2 < s.size() && s[i + 1] == '\'') ++i;
    }
    return out;
  }
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] != '\\') {
        out.push_back(s[i]);
        continue;
      }
      if (i + 2 >= s.size())
        return absl::InvalidArgumentError(StrCat("line ", line, ": bad escape"));
      char e = s[++i];
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        default:
          return absl::InvalidArgumentError(StrCat("line ", line, ": unsupported escape"));
      }
    }
    return out;
  }
  if (!s.empty() && (s.front() == '"' || s.front() == '\'' || s.front() == '|' ||
                     s.front() == '>' || s.front() == '&' || s.front() == '*')) {
    return absl::InvalidArgumentError(StrCat("line ", line, ": unsupported YAML '", s, "'"));
  }
  return std::string(s);
}

class Parser {
 public:
  explicit Parser(std::vector<Line> lines) : lines_(std::move(lines)) {}

  absl::StatusOr<YamlNode> Block(size_t& i, int indent) {
    if (i >= lines_.size()) return YamlNode{};
    if (IsListItem(lines_[i].text)) return List(i, indent);
    return Map(i, indent);
  }

 private:
  absl::StatusOr<YamlNode> Value(std::string_view v, int line) {
    YamlNode n;
    if (v == "{}") {
      n.kind = YamlNode::Kind::kMap;
    } else if (v == "[]") {
      n.kind = YamlNode::Kind::kList;
    } else {
      auto s = Unquote(v, line);
      if (!s.ok()) return s.status();
      n.scalar = *std::move(s);
    }
    return n;
  }

  // The nested block after "key:" or "-" on line i-1 (which had `indent`).
  absl::StatusOr<YamlNode> Child(size_t& i, int indent, bool allow_same_indent_list) {
    if (i < lines_.size() &&
        (lines_[i].indent > indent ||
         (allow_same_indent_list && lines_[i].indent == indent && IsListItem(lines_[i].text)))) {
      return Block(i, lines_[i].indent);
    }
    return YamlNode{};
  }

  absl::StatusOr<YamlNode> List(size_t& i, int indent) {
    YamlNode n;
    n.kind = YamlNode::Kind::kList;
    while (i < lines_.size() && lines_[i].indent == indent && IsListItem(lines_[i].text)) {
      Line& l = lines_[i];
      if (l.text == "-") {
        ++i;
        auto c = Child(i, indent, false);
        if (!c.ok()) return c.status();
        n.list.push_back(*std::move(c));
        continue;
      }
      // "- rest": re-read the rest as if it started a block two columns in.
      size_t off = 2;
      while (off < l.text.size() && l.text[off] == ' ') ++off;
      l.text = l.text.substr(off);
      l.indent += static_cast<int>(off);
      if (l.text.find(':') != std::string::npos && l.text.front() != '"' &&
          l.text.front() != '\'') {
        auto m = Block(i, l.indent);
        if (!m.ok()) return m.status();
        n.list.push_back(*std::move(m));
      } else {
        auto v = Value(l.text, l.number);
        if (!v.ok()) return v.status();
        n.list.push_back(*std::move(v));
        ++i;
      }
    }
    return n;
  }

  absl::StatusOr<YamlNode> Map(size_t& i, int indent) {
    YamlNode n;
    n.kind = YamlNode::Kind::kMap;
    while (i < lines_.size() && lines_[i].indent == indent && !IsListItem(lines_[i].text)) {
      const Line& l = lines_[i];
      size_t colon = l.text.find(": ");
      if (colon == std::string::npos && !l.text.empty() && l.text.back() == ':') {
        colon = l.text.size() - 1;
      }
      if (colon == std::string::npos) {
        return absl::InvalidArgumentError(StrCat("line ", l.number, ": expected 'key: value'"));
      }
      auto key = Unquote(std::string_view(l.text).substr(0, colon), l.number);
      if (!key.ok()) return key.status();
      std::string rest = l.text.substr(colon + 1);
      size_t b = rest.find_first_not_of(' ');
      rest = b == std::string::npos ? "" : rest.substr(b);
      ++i;
      if (rest.empty()) {
        auto c = Child(i, indent, true);
        if (!c.ok()) return c.status();
        n.map.emplace_back(*std::move(key), *std::move(c));
      } else {
        auto v = Value(rest, l.number);
        if (!v.ok()) return v.status();
        n.map.emplace_back(*std::move(key), *std::move(v));
      }
    }
    if (i < lines_.size() && lines_[i].indent > indent) {
      return absl::InvalidArgumentError(
          StrCat("line ", lines_[i].number, ": unexpected indentation"));
    }
    return n;
  }

  std::vector<Line> lines_;
};

}  // namespace

const YamlNode* YamlNode::Get(std::string_view key) const {
  for (const auto& [k, v] : map) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string YamlNode::Str(std::string_view key) const {
  const YamlNode* n = Get(key);
  return n != nullptr && n->kind == Kind::kScalar ? n->scalar : std::string();
}

absl::StatusOr<YamlNode> ParseMiniYaml(std::string_view text) {
  std::vector<Line> lines;
  int number = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++number;
    size_t indent = raw.find_first_not_of(' ');
    if (indent == std::string_view::npos) continue;
    if (raw[indent] == '\t') {
      return absl::InvalidArgumentError(StrCat("line ", number, ": tabs are not YAML indentation"));
    }
    std::string t = StripComment(raw.substr(indent));
    if (t.empty() || t == "---") continue;
    lines.push_back(Line{number, static_cast<int>(indent), std::move(t)});
  }
  if (lines.empty()) return YamlNode{YamlNode::Kind::kMap, {}, {}, {}};
  Parser p(lines);
  size_t i = 0;
  auto root = p.Block(i, lines[0].indent);
  if (!root.ok()) return root.status();
  if (i != lines.size()) {
    return absl::InvalidArgumentError(StrCat("line ", lines[i].number, ": unexpected content"));
  }
  return root;
}

}  // namespace gpusched::kube
