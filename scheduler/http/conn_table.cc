#include "scheduler/http/conn_table.h"

#include <algorithm>
#include <utility>

namespace gpusched::http {

const char* EvictReasonName(EvictReason r) {
  switch (r) {
    case EvictReason::kHeader:
      return "header";
    case EvictReason::kFresh:
      return "fresh";
    case EvictReason::kIdle:
      return "idle";
    case EvictReason::kBody:
      return "body";
    case EvictReason::kAnswer:
      return "answer";
  }
  return "?";
}

namespace {

EvictReason ReasonOf(const ConnEntry& e) {
  switch (e.phase) {
    case ConnPhase::kHeader:
      return EvictReason::kHeader;
    case ConnPhase::kIdle:
      return e.requests == 0 ? EvictReason::kFresh : EvictReason::kIdle;
    case ConnPhase::kAnswer:
      return EvictReason::kAnswer;
    default:
      return EvictReason::kBody;
  }
}

}  // namespace

ConnTable::ConnTable(std::vector<ListenerLimits> listeners, BudgetLimits budget) : budget_(budget) {
  for (const ListenerLimits& l : listeners) slots_.push_back(Slots{l, 0, 0, {}});
}

ConnTable::Opened ConnTable::Open(int listener, const std::string& source,
                                  ConnClock::time_point now) {
  absl::MutexLock l(&mu_);
  Slots& s = slots_[static_cast<size_t>(listener)];
  Opened out;
  auto count = [&] {
    auto it = s.per_source.find(source);
    return it == s.per_source.end() ? 0 : it->second;
  };
  if (count() >= s.limits.max_per_source) {
    if (ConnEntry* v = SlotVictimLocked(listener, source, now)) {
      EvictLocked(*v, ReasonOf(*v), now, &out.evicted);
    }
  }
  if (count() < s.limits.max_per_source && s.open >= s.limits.max_connections) {
    if (ConnEntry* v = SlotVictimLocked(listener, "", now)) {
      EvictLocked(*v, ReasonOf(*v), now, &out.evicted);
    }
  }
  const bool serve = count() < s.limits.max_per_source && s.open < s.limits.max_connections;
  if (!serve && s.refused >= s.limits.refusal_slots) return out;
  auto e = std::make_shared<ConnEntry>();
  e->listener = listener;
  e->source = source;
  e->refused = !serve;
  e->phase_since = e->last_progress = now;
  if (serve) {
    ++s.open;
    ++s.per_source[source];
  } else {
    ++s.refused;
  }
  e->index = entries_.size();
  entries_.push_back(e);
  out.admission = serve ? Admission::kServe : Admission::kRefuse;
  out.entry = std::move(e);
  return out;
}

bool ConnTable::SetCancel(ConnEntry& e, std::function<void()> cancel) {
  absl::MutexLock l(&mu_);
  if (e.evicted) return false;
  e.cancel = std::move(cancel);
  return true;
}

void ConnTable::Close(ConnEntry& e) {
  absl::MutexLock l(&mu_);
  if (e.closed) return;
  e.closed = true;
  if (!e.evicted) FreeSlotLocked(e);
}

bool ConnTable::SetPhase(ConnEntry& e, ConnPhase phase, ConnClock::time_point now) {
  absl::MutexLock l(&mu_);
  if (e.evicted) return false;
  e.phase = phase;
  e.phase_since = e.last_progress = now;
  e.phase_bytes = 0;
  return true;
}

void ConnTable::Progress(ConnEntry& e, int64_t bytes, ConnClock::time_point now) {
  absl::MutexLock l(&mu_);
  e.phase_bytes += bytes;
  if (bytes > 0) e.last_progress = now;
}

void ConnTable::RequestDone(ConnEntry& e) {
  absl::MutexLock l(&mu_);
  ++e.requests;
}

bool ConnTable::Hold(ConnEntry& e, int64_t bytes, ConnClock::time_point now,
                     std::vector<Eviction>* evicted) {
  absl::MutexLock l(&mu_);
  if (e.evicted || e.closed) return bytes <= 0;
  const int64_t rise = bytes - e.held;
  const int64_t cap = CapFor(bytes);
  if (rise > 0 && inflight_ + rise > cap) {
    const int64_t need = inflight_ + rise - cap;
    if (EvictableBytesLocked(e, now) < need) return false;
    std::vector<ConnEntry*> slow;
    for (const auto& c : entries_) {
      if (c.get() != &e && c->held > 0 && SlowLocked(*c, now)) slow.push_back(c.get());
    }
    std::sort(slow.begin(), slow.end(),
              [](const ConnEntry* a, const ConnEntry* b) { return a->held > b->held; });
    for (ConnEntry* v : slow) {
      if (inflight_ + rise <= cap) break;
      EvictLocked(*v, ReasonOf(*v), now, evicted);
    }
  }
  SetHeldLocked(e, bytes);
  return true;
}

bool ConnTable::HasRoom(const ConnEntry& e, int64_t bytes, ConnClock::time_point now) {
  absl::MutexLock l(&mu_);
  const int64_t need = inflight_ + bytes - CapFor(e.held + bytes);
  return need <= 0 || EvictableBytesLocked(e, now) >= need;
}

int64_t ConnTable::CapFor(int64_t bytes) const {
  return bytes <= budget_.small_bytes ? budget_.max_bytes + budget_.lane_bytes : budget_.max_bytes;
}

bool ConnTable::evicted(const ConnEntry& e) {
  absl::MutexLock l(&mu_);
  return e.evicted;
}

ConnStats ConnTable::Stats(int listener) {
  absl::MutexLock l(&mu_);
  ConnStats st;
  const Slots& s = slots_[static_cast<size_t>(listener)];
  st.open = s.open;
  st.refused = s.refused;
  st.inflight_bytes = inflight_;
  st.peak_inflight_bytes = peak_inflight_;
  st.peak_held_by_one = peak_held_;
  st.evictions = evictions_;
  return st;
}

bool ConnTable::SlowLocked(const ConnEntry& e, ConnClock::time_point now) const {
  if (e.phase != ConnPhase::kBody && e.phase != ConnPhase::kAnswer) return false;
  if (now - e.last_progress >= budget_.slow_after) return true;
  const auto age = now - e.phase_since;
  if (age < budget_.slow_after) return false;
  const double secs = std::chrono::duration<double>(age).count();
  return static_cast<double>(e.phase_bytes) < static_cast<double>(budget_.min_rate) * secs;
}

int64_t ConnTable::EvictableBytesLocked(const ConnEntry& e, ConnClock::time_point now) const {
  int64_t total = 0;
  for (const auto& c : entries_) {
    if (c.get() != &e && c->held > 0 && SlowLocked(*c, now)) total += c->held;
  }
  return total;
}

int ConnTable::SlotRankLocked(const ConnEntry& e, ConnClock::time_point now) const {
  const bool body = e.phase == ConnPhase::kBody;
  if (e.phase == ConnPhase::kHeader || (body && e.phase_bytes == 0)) return 0;
  if ((body || e.phase == ConnPhase::kAnswer) && SlowLocked(e, now)) return 1;
  if (e.phase == ConnPhase::kIdle) return e.requests == 0 ? 2 : 3;
  return -1;
}

ConnEntry* ConnTable::SlotVictimLocked(int listener, const std::string& source,
                                       ConnClock::time_point now) const {
  ConnEntry* best = nullptr;
  int best_rank = 0;
  // Waiting since: the phase's start, or a slow transfer's last progress.
  auto since = [](const ConnEntry& e, int rank) {
    return rank == 1 ? e.last_progress : e.phase_since;
  };
  for (const auto& c : entries_) {
    if (c->listener != listener || c->refused) continue;
    if (!source.empty() && c->source != source) continue;
    const int rank = SlotRankLocked(*c, now);
    if (rank < 0) continue;
    if (best == nullptr || rank < best_rank ||
        (rank == best_rank && since(*c, rank) < since(*best, best_rank))) {
      best = c.get();
      best_rank = rank;
    }
  }
  return best;
}

void ConnTable::EvictLocked(ConnEntry& e, EvictReason reason, ConnClock::time_point now,
                            std::vector<Eviction>* out) {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      now - (reason == EvictReason::kBody || reason == EvictReason::kAnswer ? e.last_progress
                                                                            : e.phase_since));
  out->push_back(Eviction{e.cancel, reason, e.source, waited});
  ++evictions_[EvictReasonName(reason)];
  e.evicted = true;
  FreeSlotLocked(e);
}

void ConnTable::FreeSlotLocked(ConnEntry& e) {
  Slots& s = slots_[static_cast<size_t>(e.listener)];
  if (e.refused) {
    --s.refused;
  } else {
    --s.open;
    auto it = s.per_source.find(e.source);
    if (it != s.per_source.end() && --it->second == 0) s.per_source.erase(it);
  }
  SetHeldLocked(e, 0);
  // Swap-remove from entries_.
  const size_t i = e.index;
  if (i < entries_.size() && entries_[i].get() == &e) {
    entries_[i] = std::move(entries_.back());
    entries_[i]->index = i;
    entries_.pop_back();
  }
}

void ConnTable::SetHeldLocked(ConnEntry& e, int64_t bytes) {
  inflight_ += bytes - e.held;
  e.held = bytes;
  peak_inflight_ = std::max(peak_inflight_, inflight_);
  peak_held_ = std::max(peak_held_, bytes);
}

}  // namespace gpusched::http
