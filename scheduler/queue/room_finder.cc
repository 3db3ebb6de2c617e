#include "scheduler/queue/room_finder.h"

#include <algorithm>
#include <map>

#include "gpusched/policy/placement.h"
#include "gpusched/policy/preemption_planner.h"

namespace gpusched::queue {

Room FindRoomByScan(const PodRequest& pod, const policy::PodContext& ctx,
                    const ClusterSnapshot& snapshot, const policy::Framework& fw,
                    const QuotaLedger& ledger, const std::function<const NodeInfo&(size_t)>& view,
                    const std::function<bool(size_t)>& fits, const NodeSubset* only) {
  Room best;
  int64_t best_score = -1;
  const int64_t demand = DemandMilli(pod.gpu);
  const size_t count = only != nullptr ? only->size() : snapshot.nodes().size();
  for (size_t i = 0; i < count; ++i) {
    const size_t k = only != nullptr ? static_cast<size_t>((*only)[i]) : i;
    if (!fits(k)) continue;
    const NodeInfo& n = view(k);
    if (!ledger.CheckModels(pod.ns, snapshot.product(n), demand).empty()) continue;
    auto placement = policy::ChoosePlacement(pod.gpu, n);
    if (!placement.has_value()) continue;
    const int64_t score = fw.Score(ctx, n);
    if (score > best_score) {
      best = {k, placement->devices};
      best_score = score;
    }
  }
  return best;
}

RoomFinder::RoomFinder(const PodRequest& pod, const policy::PodContext& ctx,
                       const ClusterSnapshot& snapshot, const policy::Framework& fw,
                       const NodeSubset* only)
    : pod_(pod), ctx_(ctx), snapshot_(snapshot), fw_(fw) {
  policy::FilterMemo memo(fw, ctx);
  const auto count = static_cast<int32_t>(only != nullptr ? only->size() : snapshot.nodes().size());
  if (only != nullptr) {
    allowed_.assign(snapshot.nodes().size(), false);
    for (int32_t k : *only) allowed_[k] = true;
  }
  order_.reserve(count);
  for (int32_t i = 0; i < count; ++i) {
    const int32_t k = only != nullptr ? (*only)[i] : i;
    const NodeHot& hot = snapshot.hot(k);
    if (!memo.Filter(hot).fits()) continue;
    order_.push_back({memo.Score(hot), static_cast<size_t>(k), false});
  }
  std::sort(order_.begin(), order_.end(), Before);
}

const NodeInfo& RoomFinder::View(size_t k) const {
  auto it = changed_.find(k);
  return it == changed_.end() ? *snapshot_.nodes()[k] : it->second;
}

Room RoomFinder::Best(const QuotaLedger& ledger) {
  const int64_t demand = DemandMilli(pod_.gpu);
  std::vector<int8_t> quota_ok;  // per product id: -1 not asked yet, 0 no, 1 yes
  for (Candidate& c : order_) {
    if (c.no_room) continue;
    const NodeInfo& n = View(c.index);
    if (n.product_id >= quota_ok.size()) quota_ok.resize(n.product_id + 1, -1);
    int8_t& ok = quota_ok[n.product_id];
    if (ok < 0) ok = ledger.CheckModels(pod_.ns, snapshot_.product(n), demand).empty() ? 1 : 0;
    if (ok == 0) continue;
    auto placement = policy::ChoosePlacement(pod_.gpu, n);
    if (!placement.has_value()) {
      c.no_room = true;  // until the node changes
      continue;
    }
    return {c.index, placement->devices};
  }
  return {};
}

void RoomFinder::Change(size_t k, NodeInfo node) {
  auto old =
      std::find_if(order_.begin(), order_.end(), [k](const Candidate& c) { return c.index == k; });
  if (old != order_.end()) order_.erase(old);
  const NodeInfo& now = changed_.insert_or_assign(k, std::move(node)).first->second;
  if (!allowed_.empty() && !allowed_[k]) return;
  if (!fw_.Filter(ctx_, now).fits()) return;
  const Candidate c{fw_.Score(ctx_, now), k, false};
  order_.insert(std::lower_bound(order_.begin(), order_.end(), c, Before), c);
}

std::vector<std::pair<std::string, DeviceMask>> PlaceMembers(const ClusterSnapshot& snapshot,
                                                             const policy::Framework& fw,
                                                             const PodRequest& pod,
                                                             QuotaLedger ledger, int32_t missing,
                                                             bool by_scan, const NodeSubset* only) {
  const policy::PodContext ctx = fw.Prepare(pod, snapshot);
  const int64_t demand = DemandMilli(pod.gpu);
  const auto& nodes = snapshot.nodes();
  std::vector<std::pair<std::string, DeviceMask>> picks;
  if (by_scan) {
    std::map<size_t, NodeInfo> changed;
    auto view = [&](size_t k) -> const NodeInfo& {
      auto c = changed.find(k);
      return c == changed.end() ? *nodes[k] : c->second;
    };
    auto fits = [&](size_t k) { return fw.Filter(ctx, view(k)).fits(); };
    for (int32_t i = 0; i < missing; ++i) {
      const Room room = FindRoomByScan(pod, ctx, snapshot, fw, ledger, view, fits, only);
      if (!room.found()) break;
      NodeInfo next = policy::WithPod(view(room.index), pod, room.devices);
      ledger.Add(pod.ns, snapshot.product(next), demand);
      changed.insert_or_assign(room.index, std::move(next));
      picks.emplace_back(nodes[room.index]->name, room.devices);
    }
    return picks;
  }
  RoomFinder finder(pod, ctx, snapshot, fw, only);
  for (int32_t i = 0; i < missing; ++i) {
    const Room room = finder.Best(ledger);
    if (!room.found()) break;
    NodeInfo next = policy::WithPod(finder.View(room.index), pod, room.devices);
    ledger.Add(pod.ns, snapshot.product(next), demand);
    finder.Change(room.index, std::move(next));
    picks.emplace_back(nodes[room.index]->name, room.devices);
  }
  return picks;
}

}  // namespace gpusched::queue
