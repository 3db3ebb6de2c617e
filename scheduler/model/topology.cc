#include "gpusched/model/topology.h"

#include <algorithm>
#include <bit>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "gpusched/util/strings.h"

namespace gpusched {

int PopCount(DeviceMask m) { return std::popcount(m); }

std::vector<int> MaskToIndices(DeviceMask m) {
  std::vector<int> out;
  while (m != 0) {
    out.push_back(std::countr_zero(m));
    m &= m - 1;
  }
  return out;
}

std::string FormatMask(DeviceMask m) {
  return StrCat("[", absl::StrJoin(MaskToIndices(m), " "), "]");
}

absl::StatusOr<Link> ParseLinkCode(std::string_view raw) {
  std::string code = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(ToAbsl(raw)));
  if (code == "X") return Link{0xff, 0};
  if (code.size() > 2 && code[0] == 'N' && code[1] == 'V') {
    int n = 0;
    if (!absl::SimpleAtoi(code.substr(2), &n) || n < 1 || n > 64) {
      return absl::InvalidArgumentError(StrCat("bad NVLink code '", raw, "'"));
    }
    return Link{static_cast<uint8_t>(n), 0};
  }
  if (code == "PIX") return Link{0, 50};
  if (code == "PXB") return Link{0, 40};
  if (code == "PHB") return Link{0, 30};
  if (code == "NODE") return Link{0, 20};
  if (code == "SYS" || code == "SOC") return Link{0, 10};
  return absl::InvalidArgumentError(StrCat("unknown topology code '", raw, "'"));
}

GpuTopology::GpuTopology(int n, std::vector<Link> links) : n_(n), links_(std::move(links)) {
  BuildTable();
}

absl::StatusOr<std::shared_ptr<const GpuTopology>> GpuTopology::FromCodes(
    const std::vector<std::vector<std::string>>& codes) {
  const int n = static_cast<int>(codes.size());
  if (n == 0) return absl::InvalidArgumentError("topology matrix is empty");
  if (n > kMaxGpusPerNode) {
    return absl::InvalidArgumentError(StrCat("topology has ", n, " GPUs; at most 64"));
  }
  std::vector<Link> links(n * n);
  for (int a = 0; a < n; ++a) {
    if (static_cast<int>(codes[a].size()) != n) {
      return absl::InvalidArgumentError(
          StrCat("topology row ", a, " has ", codes[a].size(), " entries, want ", n));
    }
    for (int b = 0; b < n; ++b) {
      auto l = ParseLinkCode(codes[a][b]);
      if (!l.ok()) {
        return absl::InvalidArgumentError(
            StrCat("topology[", a, "][", b, "]: ", l.status().message()));
      }
      bool self = l->nvlinks == 0xff;
      if (self != (a == b)) {
        return absl::InvalidArgumentError(
            StrCat("topology[", a, "][", b, "]: 'X' must be exactly the diagonal"));
      }
      links[a * n + b] = self ? Link{} : *l;
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const Link& x = links[a * n + b];
      const Link& y = links[b * n + a];
      if (x.nvlinks != y.nvlinks || x.pcie != y.pcie) {
        return absl::InvalidArgumentError(
            StrCat("topology is not symmetric at [", a, "][", b, "]"));
      }
    }
  }
  return std::make_shared<const GpuTopology>(n, std::move(links));
}

std::shared_ptr<const GpuTopology> GpuTopology::Uniform(int gpus, Link link) {
  gpus = std::clamp(gpus, 0, kMaxGpusPerNode);
  std::vector<Link> links(gpus * gpus, link);
  for (int i = 0; i < gpus; ++i) links[i * gpus + i] = Link{};
  return std::make_shared<const GpuTopology>(gpus, std::move(links));
}

int GpuTopology::PairScore(int a, int b) const {
  const Link& l = link(a, b);
  return l.nvlinks * 100 + l.pcie;
}

int GpuTopology::SetScore(DeviceMask m) const {
  int sum = 0;
  for (DeviceMask a = m; a != 0; a &= a - 1) {
    int i = std::countr_zero(a);
    for (DeviceMask b = a & (a - 1); b != 0; b &= b - 1) sum += PairScore(i, std::countr_zero(b));
  }
  return sum;
}

bool GpuTopology::AllNvlink(DeviceMask m) const {
  for (DeviceMask a = m; a != 0; a &= a - 1) {
    int i = std::countr_zero(a);
    for (DeviceMask b = a & (a - 1); b != 0; b &= b - 1) {
      if (link(i, std::countr_zero(b)).nvlinks == 0) return false;
    }
  }
  return true;
}

namespace {

// True if `x` is a better choice than `y`.
bool Better(const DeviceChoice& x, const DeviceChoice& y) {
  if (y.devices == 0) return x.devices != 0;
  if (x.internal != y.internal) return x.internal > y.internal;
  if (x.leftover != y.leftover) return x.leftover > y.leftover;
  // Lowest indices first: compare the masks as sorted index lists.
  DeviceMask diff = x.devices ^ y.devices;
  DeviceMask low = diff & (~diff + 1);
  return (x.devices & low) != 0;
}

// Calls fn(subset) for every k-subset of `set`, in no particular order.
template <typename Fn>
void ForEachSubset(DeviceMask set, int k, Fn&& fn) {
  std::vector<int> idx = MaskToIndices(set);
  const int n = static_cast<int>(idx.size());
  if (k > n || k <= 0) return;
  std::vector<int> pick(k);
  for (int i = 0; i < k; ++i) pick[i] = i;
  while (true) {
    DeviceMask m = 0;
    for (int i : pick) m |= DeviceMask{1} << idx[i];
    fn(m);
    int i = k - 1;
    while (i >= 0 && pick[i] == n - k + i) --i;
    if (i < 0) return;
    ++pick[i];
    for (int j = i + 1; j < k; ++j) pick[j] = pick[j - 1] + 1;
  }
}

uint64_t Binomial(int n, int k) {
  if (k < 0 || k > n) return 0;
  uint64_t r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

}  // namespace

DeviceChoice GpuTopology::Search(DeviceMask free, int k, bool require_nvlink) const {
  DeviceChoice best;
  if (k <= 0 || PopCount(free) < k) return best;
  const int free_score = SetScore(free);
  auto consider = [&](DeviceMask m) {
    DeviceChoice c;
    c.devices = m;
    c.all_nvlink = AllNvlink(m);
    if (require_nvlink && !c.all_nvlink) return;
    c.internal = SetScore(m);
    DeviceMask rest = free & ~m;
    // leftover = free_score - internal - cross(m, rest)
    int cross = 0;
    for (DeviceMask a = m; a != 0; a &= a - 1) {
      int i = std::countr_zero(a);
      for (DeviceMask b = rest; b != 0; b &= b - 1) cross += PairScore(i, std::countr_zero(b));
    }
    c.leftover = free_score - c.internal - cross;
    if (Better(c, best)) best = c;
  };
  if (Binomial(PopCount(free), k) <= 20000) {
    ForEachSubset(free, k, consider);
    return best;
  }
  // Large nodes (e.g. 16+ GPUs): greedy growth from every seed device.
  for (DeviceMask s = free; s != 0; s &= s - 1) {
    DeviceMask m = s & (~s + 1);
    while (PopCount(m) < k) {
      int best_gain = -1;
      DeviceMask pick = 0;
      for (DeviceMask c = free & ~m; c != 0; c &= c - 1) {
        int j = std::countr_zero(c);
        if (require_nvlink && !AllNvlink(m | (DeviceMask{1} << j))) continue;
        int gain = 0;
        for (DeviceMask a = m; a != 0; a &= a - 1) gain += PairScore(std::countr_zero(a), j);
        if (gain > best_gain) {
          best_gain = gain;
          pick = DeviceMask{1} << j;
        }
      }
      if (pick == 0) break;
      m |= pick;
    }
    if (PopCount(m) == k) consider(m);
  }
  return best;
}

void GpuTopology::BuildTable() {
  best_internal_.assign(n_ + 1, 0);
  const DeviceMask all = n_ >= 64 ? ~DeviceMask{0} : (DeviceMask{1} << n_) - 1;
  if (n_ > kTableMaxGpus) {
    for (int k = 2; k <= n_; ++k) best_internal_[k] = Search(all, k, false).internal;
    return;
  }
  const size_t masks = size_t{1} << n_;
  table_.assign(masks * (n_ + 1) * 2, DeviceChoice{});
  std::vector<int32_t> set_score(masks, 0);
  std::vector<uint8_t> nvl(masks, 1);
  for (size_t m = 1; m < masks; ++m) {
    int hi = 63 - std::countl_zero(static_cast<DeviceMask>(m));
    DeviceMask rest = m & ~(DeviceMask{1} << hi);
    int add = 0;
    bool ok = nvl[rest];
    for (DeviceMask b = rest; b != 0; b &= b - 1) {
      int j = std::countr_zero(b);
      add += PairScore(hi, j);
      if (link(hi, j).nvlinks == 0) ok = false;
    }
    set_score[m] = set_score[rest] + add;
    nvl[m] = ok;
  }
  for (size_t free = 0; free < masks; ++free) {
    // Enumerate all subsets of `free`.
    for (DeviceMask sub = free;; sub = (sub - 1) & free) {
      if (sub != 0) {
        int k = PopCount(sub);
        DeviceChoice c;
        c.devices = sub;
        c.internal = set_score[sub];
        c.leftover = set_score[free & ~sub];
        c.all_nvlink = nvl[sub];
        DeviceChoice& any = table_[(free * (n_ + 1) + k) * 2];
        if (Better(c, any)) any = c;
        if (c.all_nvlink) {
          DeviceChoice& req = table_[(free * (n_ + 1) + k) * 2 + 1];
          if (Better(c, req)) req = c;
        }
      }
      if (sub == 0) break;
    }
  }
  for (int k = 2; k <= n_; ++k) best_internal_[k] = table_[(all * (n_ + 1) + k) * 2].internal;
}

int GpuTopology::BestInternal(int k) const {
  if (k < 0 || k > n_) return 0;
  return best_internal_[k];
}

DeviceChoice GpuTopology::Choose(DeviceMask free, int k, bool require_nvlink) const {
  if (k <= 0 || k > n_) return DeviceChoice{};
  if (!table_.empty()) return table_[(free * (n_ + 1) + k) * 2 + (require_nvlink ? 1 : 0)];
  return Search(free, k, require_nvlink);
}

}  // namespace gpusched
