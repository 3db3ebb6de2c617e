#include "scheduler/sim/inputs.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gpusched/util/strings.h"
#include "scheduler/codec/extender_codec.h"

namespace gpusched::sim {
namespace {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.push_back(line);
    start = end + 1;
  }
  return out;
}

std::vector<std::string_view> SplitComma(std::string_view line) {
  std::vector<std::string_view> out;
  for (absl::string_view f : absl::StrSplit(ToAbsl(line), ',')) out.push_back(FromAbsl(f));
  return out;
}

bool ToInt(std::string_view s, int64_t* out) {
  if (s.empty()) {
    *out = 0;
    return true;
  }
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool ToDouble(std::string_view s, double* out) {
  std::string tmp(s);
  char* end = nullptr;
  *out = std::strtod(tmp.c_str(), &end);
  return !tmp.empty() && end == tmp.c_str() + tmp.size();
}

absl::Status LineError(int line, std::string_view what) {
  return absl::InvalidArgumentError(StrCat("line ", line, ": ", what));
}

// Column positions by header name.
struct Header {
  std::vector<std::string_view> names;
  int Find(std::string_view n) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == n) return static_cast<int>(i);
    }
    return -1;
  }
};

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::vector<NodeSpec>> ParseOpenbNodes(std::string_view csv) {
  auto lines = SplitLines(csv);
  if (lines.empty()) return absl::InvalidArgumentError("empty node CSV");
  Header h{SplitComma(lines[0])};
  const int sn = h.Find("sn"), cpu = h.Find("cpu_milli"), mem = h.Find("memory_mib"),
            gpu = h.Find("gpu"), model = h.Find("model");
  if (sn < 0 || cpu < 0 || mem < 0 || gpu < 0 || model < 0) {
    return absl::InvalidArgumentError("node CSV needs sn,cpu_milli,memory_mib,gpu,model");
  }
  std::vector<NodeSpec> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto f = SplitComma(lines[i]);
    if (f.size() < h.names.size()) return LineError(i + 1, "too few fields");
    NodeSpec s;
    s.name = std::string(f[sn]);
    int64_t g = 0;
    if (!ToInt(f[cpu], &s.cpu_milli) || !ToInt(f[mem], &s.memory_mib) || !ToInt(f[gpu], &g) ||
        g < 0 || g > kMaxGpusPerNode) {
      return LineError(i + 1, "bad number");
    }
    s.gpu_count = s.gpu_allocatable = static_cast<int32_t>(g);
    s.product = std::string(f[model]);
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<PodRequest>> ParseOpenbPods(std::string_view csv) {
  auto lines = SplitLines(csv);
  if (lines.empty()) return absl::InvalidArgumentError("empty pod CSV");
  Header h{SplitComma(lines[0])};
  const int name = h.Find("name"), cpu = h.Find("cpu_milli"), mem = h.Find("memory_mib"),
            ngpu = h.Find("num_gpu"), milli = h.Find("gpu_milli"), spec = h.Find("gpu_spec");
  if (name < 0 || cpu < 0 || mem < 0 || ngpu < 0 || milli < 0) {
    return absl::InvalidArgumentError("pod CSV needs name,cpu_milli,memory_mib,num_gpu,gpu_milli");
  }
  std::vector<PodRequest> out;
  out.reserve(lines.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    auto f = SplitComma(lines[i]);
    if (f.size() < 5) return LineError(i + 1, "too few fields");
    PodRequest p;
    p.ns = "default";
    p.name = std::string(f[name]);
    p.uid = p.name;
    int64_t n = 0, m = 0;
    if (!ToInt(f[cpu], &p.cpu_milli) || !ToInt(f[mem], &p.memory_mib) || !ToInt(f[ngpu], &n) ||
        !ToInt(f[milli], &m) || n < 0 || n > kMaxGpusPerNode || m < 0 || m > 1000) {
      return LineError(i + 1, "bad number");
    }
    p.gpu.count = static_cast<int32_t>(n);
    p.gpu.milli_per_gpu = n == 0 ? 0 : static_cast<int32_t>(m);
    if (n > 0 && m == 0) p.gpu.milli_per_gpu = 1000;
    if (n > 1 && m < 1000) p.gpu.milli_per_gpu = 1000;  // sharing is single-GPU only
    p.gpu.topology = TopologyMode::kNone;
    if (spec >= 0 && spec < static_cast<int>(f.size()) && !f[spec].empty()) {
      for (absl::string_view e : absl::StrSplit(ToAbsl(f[spec]), '|')) {
        if (!e.empty()) p.gpu.models.emplace_back(e);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<std::vector<NodeSpec>> ParseClusterList(std::string json) {
  codec::RequestDecoder decoder;
  auto objs = decoder.DecodeClusterList(json);
  if (!objs.ok()) return objs.status();
  return std::move(objs->nodes);
}

absl::StatusOr<std::vector<NodeSpec>> GenerateNodes(std::string_view spec) {
  struct Machine {
    std::string_view name;
    std::string_view product;
    int gpus;
    int64_t cpu_milli, memory_mib, gpu_memory_mib;
  };
  static constexpr Machine kMachines[] = {
      {"dgx-a100", "NVIDIA-A100-SXM4-80GB", 8, 256000, 2097152, 81920},
      {"dgx-h100", "NVIDIA-H100-80GB-HBM3", 8, 224000, 2097152, 81920},
      {"dgx1-v100", "Tesla-V100-SXM2-32GB", 8, 80000, 524288, 32768},
      {"dgx1-p100", "Tesla-P100-SXM2-16GB", 8, 80000, 524288, 16384},
      {"t4x4", "Tesla-T4", 4, 96000, 393216, 15360},
      {"a10x1", "NVIDIA-A10", 1, 32000, 131072, 24576},
      {"p100x2", "Tesla-P100-PCIE-16GB", 2, 16000, 122880, 16384},
  };
  std::vector<NodeSpec> out;
  for (absl::string_view item : absl::StrSplit(ToAbsl(spec), ',', absl::SkipEmpty())) {
    std::vector<std::string_view> kv;
    for (absl::string_view p : absl::StrSplit(item, ':')) kv.push_back(FromAbsl(p));
    int64_t count = 0;
    if (kv.size() != 2 || !ToInt(kv[1], &count) || count <= 0 || count > 100000) {
      return absl::InvalidArgumentError(StrCat("bad --nodes item '", FromAbsl(item), "'"));
    }
    const Machine* m = nullptr;
    for (const Machine& k : kMachines) {
      if (k.name == kv[0]) m = &k;
    }
    if (m == nullptr) {
      return absl::InvalidArgumentError(
          StrCat("unknown machine '", kv[0],
                 "' (dgx-a100, dgx-h100, dgx1-v100, dgx1-p100, t4x4, a10x1, p100x2)"));
    }
    for (int64_t i = 0; i < count; ++i) {
      NodeSpec s;
      s.name = StrCat(m->name, "-", absl::Dec(i, absl::kZeroPad4));
      s.product = std::string(m->product);
      s.gpu_count = s.gpu_allocatable = m->gpus;
      s.gpu_memory_mib = m->gpu_memory_mib;
      s.cpu_milli = m->cpu_milli;
      s.memory_mib = m->memory_mib;
      out.push_back(std::move(s));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("--nodes spec has no machines");
  return out;
}

absl::StatusOr<std::vector<Job>> ParsePhillyJobs(std::string_view csv,
                                                 const std::vector<std::string>& vcs,
                                                 double window_seconds) {
  auto lines = SplitLines(csv);
  if (lines.empty()) return absl::InvalidArgumentError("empty job CSV");
  Header h{SplitComma(lines[0])};
  const int ts = h.Find("timestamp"), dur = h.Find("duration"), ng = h.Find("num_gpus"),
            vc = h.Find("cluster");
  if (ts < 0 || dur < 0 || ng < 0 || vc < 0) {
    return absl::InvalidArgumentError("job CSV needs timestamp,duration,num_gpus,cluster");
  }
  const absl::Time base =
      absl::FromCivil(absl::CivilSecond(2017, 10, 1, 0, 0, 0), absl::UTCTimeZone());
  struct Raw {
    double t, duration;
    int gpus;
    std::string vc;
  };
  std::vector<Raw> raw;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto f = SplitComma(lines[i]);
    if (f.size() < h.names.size()) return LineError(i + 1, "too few fields");
    int64_t g = 0;
    double d = 0;
    if (!ToInt(f[ng], &g) || !ToDouble(f[dur], &d)) return LineError(i + 1, "bad number");
    if (g <= 0) continue;
    std::string v(f[vc]);
    if (!vcs.empty() && std::find(vcs.begin(), vcs.end(), v) == vcs.end()) continue;
    absl::Time t;
    std::string err;
    if (!absl::ParseTime("%Y-%m-%d %H:%M:%S", ToAbsl(f[ts]), absl::UTCTimeZone(), &t, &err)) {
      return LineError(i + 1, "bad timestamp");
    }
    raw.push_back({absl::ToDoubleSeconds(t - base), d, static_cast<int>(g), std::move(v)});
  }
  double t0 = 1e300;
  for (const Raw& r : raw) {
    if (r.t >= 0 && r.t < t0) t0 = r.t;
  }
  std::vector<Job> out;
  for (size_t i = 0; i < raw.size(); ++i) {
    const double s = raw[i].t - t0;
    if (s < 0 || s > window_seconds) continue;
    Job j;
    j.id = StrCat("job-", i);
    j.ns = raw[i].vc;
    j.submit = s;
    j.duration = raw[i].duration;
    j.gpus_per_pod = raw[i].gpus;
    j.pods = 1;
    out.push_back(std::move(j));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Job& a, const Job& b) { return a.submit < b.submit; });
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, int>>> ParseVcNodes(std::string_view csv) {
  auto lines = SplitLines(csv);
  std::vector<std::pair<std::string, int>> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto f = SplitComma(lines[i]);
    int64_t n = 0;
    if (f.size() < 2 || !ToInt(f[1], &n)) return LineError(i + 1, "bad VC line");
    out.emplace_back(std::string(f[0]), static_cast<int>(n));
  }
  return out;
}

}  // namespace gpusched::sim
