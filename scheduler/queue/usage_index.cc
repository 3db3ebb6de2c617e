#include "scheduler/queue/usage_index.h"

#include <algorithm>

#include "gpusched/util/strings.h"

namespace gpusched::queue {
namespace {

std::string GangKey(const std::string& ns, const std::string& gang) {
  return StrCat(ns, "/", gang);
}

// Adds `by` to m[key] and drops the key when it reaches zero.
template <typename Map>
void AddOrErase(Map& m, const std::string& key, int64_t by) {
  auto [it, fresh] = m.try_emplace(key, 0);
  it->second += by;
  if (it->second == 0) m.erase(it);
}

}  // namespace

int64_t NodeCapacityMilli(const NodeInfo& node) {
  int64_t held = 0;
  for (const PodOnNode& p : node.pods) held += int64_t{p.gpus} * p.milli_per_gpu;
  if (node.unschedulable) return held;
  return std::max<int64_t>(held, int64_t{node.healthy_count()} * 1000);
}

std::shared_ptr<const UsageTable> UsageTable::Of(std::map<std::string, NamespaceUse> use,
                                                 GpuCapacity capacity) {
  std::vector<Row> rows;
  rows.reserve(use.size());
  for (auto& [ns, u] : use) {
    u.ns = ns;
    rows.push_back(std::make_shared<const NamespaceUse>(std::move(u)));
  }
  return std::make_shared<const UsageTable>(std::move(rows), std::move(capacity));
}

const NamespaceUse* UsageTable::Find(const std::string& ns) const {
  auto it = std::lower_bound(rows_.begin(), rows_.end(), ns,
                             [](const Row& r, const std::string& name) { return r->ns < name; });
  return it != rows_.end() && (*it)->ns == ns ? it->get() : nullptr;
}

std::shared_ptr<const UsageTable> UsageIndex::Table() const {
  if (table_ == nullptr) {
    std::vector<UsageTable::Row> rows;
    rows.reserve(use_.size());
    for (const auto& [ns, u] : use_) rows.push_back(u);
    table_ = std::make_shared<const UsageTable>(std::move(rows), capacity_);
  }
  return table_;
}

NamespaceUse& UsageIndex::Mutable(const std::string& ns) {
  table_.reset();
  std::shared_ptr<NamespaceUse>& row = use_[ns];
  if (row == nullptr) {
    row = std::make_shared<NamespaceUse>();
    row->ns = ns;
  } else if (row.use_count() > 1) {
    row = std::make_shared<NamespaceUse>(*row);  // a table still reads the old sums
  }
  return *row;
}

void UsageIndex::Clear() {
  last_.reset();
  table_.reset();
  use_.clear();
  capacity_ = {};
  ClearGangs();
}

void UsageIndex::ClearGangs() {
  gangs_ = std::make_shared<GangUsage>();
  gangs_shared_ = false;
  gangs_owned_.clear();
}

std::shared_ptr<const GangUsage> UsageIndex::Gangs() const {
  gangs_shared_ = true;
  gangs_owned_.clear();
  return gangs_;
}

GangUsage::Gang& UsageIndex::MutableGang(const std::string& key) {
  if (gangs_shared_) {
    gangs_ = std::make_shared<GangUsage>(*gangs_);  // the gangs' pointers, not the gangs
    gangs_shared_ = false;
  }
  std::shared_ptr<GangUsage::Gang>& gang = gangs_->by_key_[key];
  if (gang == nullptr) {
    gang = std::make_shared<GangUsage::Gang>();
    gangs_owned_.insert(key);
  } else if (gangs_owned_.insert(key).second) {
    gang = std::make_shared<GangUsage::Gang>(*gang);  // a published table still reads it
  }
  return *gang;
}

void UsageIndex::Apply(const NodeInfo& node, const std::string& product, int sign) {
  if (const int64_t cap = NodeCapacityMilli(node) * sign; cap != 0) {
    table_.reset();
    capacity_.total += cap;
    AddOrErase(capacity_.by_product, product, cap);
  }
  for (const PodOnNode& p : node.pods) {
    const int64_t milli = int64_t{p.gpus} * p.milli_per_gpu * sign;
    NamespaceUse& u = Mutable(p.ns);
    u.total += milli;
    u.pods += sign;
    u.by_product[product] += milli;
    AddOrErase(u.pods_by_product, product, sign);
    if (!u.pods_by_product.contains(product)) u.by_product.erase(product);
    if (u.pods == 0) use_.erase(p.ns);
    if (p.gang.empty()) continue;
    const std::string key = GangKey(p.ns, p.gang);
    GangUsage::Gang& gang = MutableGang(key);
    gang.held += sign;
    AddOrErase(gang.nodes, node.name, sign);
    if (gang.nodes.empty()) {
      gangs_->by_key_.erase(key);
      gangs_owned_.erase(key);
    }
  }
}

void UsageIndex::Update(std::shared_ptr<const ClusterSnapshot> snapshot) {
  if (snapshot == last_) return;
  const auto& nodes = snapshot->nodes();
  if (last_ != nullptr && last_->node_set_identity() == snapshot->node_set_identity()) {
    const auto& before = last_->nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (before[i] == nodes[i]) continue;
      Apply(*before[i], last_->product(*before[i]), -1);
      Apply(*nodes[i], snapshot->product(*nodes[i]), +1);
    }
  } else {
    use_.clear();
    capacity_ = {};
    table_.reset();
    ClearGangs();
    for (const auto& n : nodes) Apply(*n, snapshot->product(*n), +1);
  }
  last_ = std::move(snapshot);
}

int32_t GangUsage::Held(const std::string& ns, const std::string& gang) const {
  auto it = by_key_.find(GangKey(ns, gang));
  return it == by_key_.end() ? 0 : it->second->held;
}

const absl::flat_hash_map<std::string, int32_t>* GangUsage::Nodes(const std::string& ns,
                                                                  const std::string& gang) const {
  auto it = by_key_.find(GangKey(ns, gang));
  return it == by_key_.end() ? nullptr : &it->second->nodes;
}

}  // namespace gpusched::queue
