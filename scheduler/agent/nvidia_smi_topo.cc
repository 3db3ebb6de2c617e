#include "scheduler/agent/nvidia_smi_topo.h"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gpusched/util/strings.h"

namespace gpusched::agent {
namespace {

using Matrix = std::vector<std::vector<std::string>>;

// Removes ANSI escape sequences; some drivers underline the header line.
std::string StripAnsi(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '\x1b') {
      out.push_back(text[i++]);
      continue;
    }
    ++i;
    if (i < text.size() && text[i] == '[') {
      // CSI: parameter/intermediate bytes, then one final byte.
      ++i;
      while (i < text.size() && text[i] >= 0x20 && text[i] <= 0x3f) ++i;
      if (i < text.size() && text[i] >= 0x40 && text[i] <= 0x7e) ++i;
    } else if (i < text.size()) {
      ++i;  // Two-byte escape.
    }
  }
  return out;
}

std::vector<absl::string_view> Tokens(absl::string_view line) {
  return absl::StrSplit(line, absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty());
}

// Returns the number in "GPU<n>", or nullopt for any other token.
std::optional<int> GpuIndex(absl::string_view token) {
  if (!absl::ConsumePrefix(&token, "GPU") || token.empty()) return std::nullopt;
  for (char c : token) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  int index = 0;
  if (!absl::SimpleAtoi(token, &index)) return std::nullopt;
  return index;
}

// First words of the trailing "CPU Affinity", "NUMA Affinity" and
// "GPU NUMA ID" header columns; link columns end at the first of these.
bool IsTrailingHeaderWord(absl::string_view token) {
  return token == "CPU" || token == "NUMA" || token == "GPU";
}

// Returns the canonical link code, or nullopt if `code` is not one.
std::optional<std::string> CanonicalCode(absl::string_view code) {
  if (code == "X" || code == "PIX" || code == "PXB" || code == "PHB" || code == "NODE" ||
      code == "SYS") {
    return std::string(code);
  }
  if (code == "SOC") return std::string("SYS");
  absl::string_view links = code;
  if (absl::ConsumePrefix(&links, "NV") && !links.empty()) {
    for (char c : links) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
        return std::nullopt;
      }
    }
    int count = 0;
    if (absl::SimpleAtoi(links, &count) && count > 0) {
      return StrCat("NV", count);
    }
  }
  return std::nullopt;
}

std::string Gpu(size_t index) { return StrCat("GPU", index); }

absl::Status CheckShape(const Matrix& m) {
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i][i] != "X") {
      return absl::InvalidArgumentError(StrCat("diagonal entry at row ", Gpu(i), ", column ",
                                               Gpu(i), " is \"", m[i][i], "\", expected \"X\""));
    }
    for (size_t j = 0; j < m.size(); ++j) {
      if (i == j) continue;
      if (m[i][j] == "X") {
        return absl::InvalidArgumentError(
            StrCat("\"X\" off the diagonal at row ", Gpu(i), ", column ", Gpu(j)));
      }
      if (m[i][j] != m[j][i]) {
        return absl::InvalidArgumentError(StrCat("asymmetric matrix: row ", Gpu(i), ", column ",
                                                 Gpu(j), " is \"", m[i][j], "\" but row ", Gpu(j),
                                                 ", column ", Gpu(i), " is \"", m[j][i], "\""));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::vector<std::string>>> ParseNvidiaSmiTopo(std::string_view text) {
  const std::string clean = StripAnsi(absl::string_view(text.data(), text.size()));
  const std::vector<absl::string_view> lines = absl::StrSplit(clean, '\n');

  // The header is the first line starting with GPU0 that is not the GPU0
  // row itself (whose second entry is the diagonal "X").
  std::vector<absl::string_view> header;
  size_t line = 0;
  for (; line < lines.size() && header.empty(); ++line) {
    std::vector<absl::string_view> tokens = Tokens(lines[line]);
    if (!tokens.empty() && tokens[0] == "GPU0" && (tokens.size() == 1 || tokens[1] != "X")) {
      header = std::move(tokens);
    }
  }
  if (header.empty()) {
    return absl::InvalidArgumentError(
        "no GPU header line: expected a line of column names starting with GPU0");
  }

  size_t link_columns = 0;
  while (link_columns < header.size() && !IsTrailingHeaderWord(header[link_columns])) {
    ++link_columns;
  }
  size_t gpu_columns = 0;
  while (gpu_columns < link_columns &&
         GpuIndex(header[gpu_columns]) == static_cast<int>(gpu_columns)) {
    ++gpu_columns;
  }
  for (size_t c = gpu_columns; c < link_columns; ++c) {
    if (GpuIndex(header[c]).has_value()) {
      return absl::InvalidArgumentError(
          StrCat("header column ", header[c],
                 " is out of order: GPU columns must be GPU0, GPU1, ... "
                 "before any NIC column"));
    }
  }

  Matrix m;
  for (; line < lines.size(); ++line) {
    const std::vector<absl::string_view> tokens = Tokens(lines[line]);
    if (tokens.empty()) continue;
    if (absl::StartsWith(tokens[0], "Legend")) break;
    const std::optional<int> index = GpuIndex(tokens[0]);
    if (!index.has_value()) continue;  // NIC rows and other text.
    if (*index != static_cast<int>(m.size())) {
      return absl::InvalidArgumentError(
          StrCat("row ", tokens[0], " is out of order: expected row ", Gpu(m.size())));
    }
    if (m.size() == gpu_columns) {
      return absl::InvalidArgumentError(StrCat("matrix is not square: row ", tokens[0],
                                               " has no column; the header has ", gpu_columns,
                                               " GPU columns"));
    }
    if (tokens.size() < link_columns + 1) {
      return absl::InvalidArgumentError(StrCat("row ", tokens[0], " is truncated: it has ",
                                               tokens.size() - 1, " entries but the header has ",
                                               link_columns, " link columns"));
    }
    std::vector<std::string> row;
    row.reserve(gpu_columns);
    for (size_t c = 0; c < gpu_columns; ++c) {
      std::optional<std::string> code = CanonicalCode(tokens[c + 1]);
      if (!code.has_value()) {
        return absl::InvalidArgumentError(StrCat("unknown link code \"", tokens[c + 1],
                                                 "\" at row ", tokens[0], ", column ", header[c]));
      }
      row.push_back(*std::move(code));
    }
    m.push_back(std::move(row));
  }
  if (m.size() != gpu_columns) {
    return absl::InvalidArgumentError(StrCat("matrix is not square: the header has ", gpu_columns,
                                             " GPU columns but there are ", m.size(),
                                             " GPU rows (missing row ", Gpu(m.size()), ")"));
  }
  if (absl::Status status = CheckShape(m); !status.ok()) return status;
  return m;
}

}  // namespace gpusched::agent
