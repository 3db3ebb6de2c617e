#include "scheduler/queue/quota_objects.h"

#include <algorithm>
#include <tuple>

#include "gpusched/util/strings.h"
#include "scheduler/queue/quota_ledger.h"

namespace gpusched::queue {
namespace {

const char* KindName(QuotaObjectKind kind) {
  return kind == QuotaObjectKind::kGpuQuota ? "GPUQuota" : "ElasticQuota";
}

// Older first; the name breaks ties between objects created in one second.
bool Older(const QuotaObject& a, const QuotaObject& b) {
  return std::tie(a.created, a.name) < std::tie(b.created, b.name);
}

QuotaObjectVerdict VerdictOf(const QuotaObject& o, QuotaObjectState state, std::string message) {
  return {o.kind, o.ns, o.name, o.uid, o.generation, state, std::move(message), o.error};
}

std::string InvalidMessage(const QuotaObject& o) {
  if (!o.applied) return StrCat("spec is invalid, nothing of it applies: ", o.error);
  return StrCat("spec is invalid, the last valid one stays in force: ", o.error);
}

// The verdicts of one namespace's objects; sets its quota in `out`.
void ResolveNamespace(std::vector<const QuotaObject*>& objs, ResolvedQuotas& out) {
  std::sort(objs.begin(), objs.end(), [](const QuotaObject* a, const QuotaObject* b) {
    if (a->kind != b->kind) return a->kind == QuotaObjectKind::kGpuQuota;
    return Older(*a, *b);
  });
  const QuotaObject* winner = nullptr;
  for (const QuotaObject* o : objs) {
    const bool gpu_quota = o->kind == QuotaObjectKind::kGpuQuota;
    if (gpu_quota && !o->applied && !o->error.empty()) {
      out.verdicts.push_back(VerdictOf(*o, QuotaObjectState::kInvalid, InvalidMessage(*o)));
      continue;
    }
    if (!gpu_quota && !o->applied) {
      out.verdicts.push_back(VerdictOf(
          *o, o->error.empty() ? QuotaObjectState::kNoGpuQuota : QuotaObjectState::kInvalid,
          o->error.empty() ? "min and max do not name nvidia.com/gpu: no GPU quota from it"
                           : InvalidMessage(*o)));
      continue;
    }
    if (winner == nullptr) {
      winner = o;
      out.namespaces[o->ns] = *o->applied;
      out.verdicts.push_back(VerdictOf(*o, QuotaObjectState::kActive,
                                       o->error.empty() ? "enforced" : InvalidMessage(*o)));
      continue;
    }
    if (winner->kind == QuotaObjectKind::kGpuQuota && !gpu_quota) {
      out.verdicts.push_back(VerdictOf(
          *o, QuotaObjectState::kShadowed,
          StrCat("GPUQuota '", winner->name, "' of namespace ", o->ns, " applies instead")));
      continue;
    }
    out.verdicts.push_back(
        VerdictOf(*o, QuotaObjectState::kDuplicate,
                  StrCat("namespace ", o->ns, " already has ", KindName(winner->kind), " '",
                         winner->name, "' (the oldest); this one is ignored")));
  }
}

}  // namespace

void KeepLastValid(const QuotaObject* prev, QuotaObject& next) {
  if (next.spec) {
    next.applied = next.spec;
  } else if (next.error.empty()) {
    next.applied.reset();  // valid, but names no GPU quota (an ElasticQuota)
  } else if (prev != nullptr && prev->uid == next.uid) {
    next.applied = prev->applied;
  }
}

ResolvedQuotas ResolveQuotaObjects(std::vector<QuotaObject> objects) {
  std::sort(objects.begin(), objects.end(), [](const QuotaObject& a, const QuotaObject& b) {
    return std::tie(a.ns, a.kind, a.name) < std::tie(b.ns, b.kind, b.name);
  });
  ResolvedQuotas out;
  for (size_t i = 0; i < objects.size();) {
    size_t j = i;
    std::vector<const QuotaObject*> group;
    while (j < objects.size() && objects[j].ns == objects[i].ns) group.push_back(&objects[j++]);
    ResolveNamespace(group, out);
    i = j;
  }
  std::sort(out.verdicts.begin(), out.verdicts.end(), [](const auto& a, const auto& b) {
    return std::tie(a.ns, a.kind, a.name) < std::tie(b.ns, b.kind, b.name);
  });
  return out;
}

std::map<std::string, int64_t> LentByNamespace(const QueueReport& report) {
  struct Cohort {
    int64_t borrowed = 0, idle = 0;
    std::vector<std::pair<std::string, int64_t>> lenders;  // (ns, idle guarantee)
  };
  std::map<std::string, Cohort> cohorts;
  for (const NamespaceQueue& n : report.namespaces) {
    if (n.cohort.empty()) continue;
    Cohort& c = cohorts[n.cohort];
    c.borrowed += std::max<int64_t>(0, n.usage_milli - n.guaranteed_milli);
    const int64_t idle = std::max<int64_t>(0, n.guaranteed_milli - n.usage_milli);
    if (idle > 0) {
      c.idle += idle;
      c.lenders.emplace_back(n.ns, idle);
    }
  }
  std::map<std::string, int64_t> lent;
  for (const auto& [name, c] : cohorts) {
    if (c.borrowed == 0 || c.idle == 0) continue;
    const int64_t total = std::min(c.borrowed, c.idle);
    for (const auto& [ns, idle] : c.lenders) {
      // 128-bit: guarantees up to 2^24 GPUs in milli, squared, overflow 64.
      lent[ns] = static_cast<int64_t>(static_cast<__int128>(total) * idle / c.idle);
    }
  }
  return lent;
}

std::vector<QuotaObjectStatus> QuotaObjectStatuses(const ResolvedQuotas& resolved,
                                                   const QueueReport& report) {
  std::map<std::string, const NamespaceQueue*> by_ns;
  std::map<std::string, std::vector<QuotaBorrower>> borrowers;  // cohort -> members over
  for (const NamespaceQueue& n : report.namespaces) {
    by_ns[n.ns] = &n;
    if (!n.cohort.empty() && n.borrowed_milli > 0) {
      borrowers[n.cohort].push_back({n.ns, FormatGpus(n.borrowed_milli)});
    }
  }
  const std::map<std::string, int64_t> lent = LentByNamespace(report);
  std::vector<QuotaObjectStatus> out;
  for (const QuotaObjectVerdict& v : resolved.verdicts) {
    if (v.kind != QuotaObjectKind::kGpuQuota) continue;
    QuotaObjectStatus s;
    s.ns = v.ns;
    s.name = v.name;
    s.observed_generation = v.generation;
    const bool active = v.state == QuotaObjectState::kActive;
    std::string message = v.message;
    if (active && report.guaranteed_milli > report.capacity_milli) {
      // Accepted (nodes come and go), but said where the team looks.
      StrAppend(&message, message.empty() ? "" : "; ", "the cluster's guarantees add up to ",
                FormatGpus(report.guaranteed_milli), " GPUs, ",
                FormatGpus(report.guaranteed_milli - report.capacity_milli), " more than its ",
                FormatGpus(report.capacity_milli), ": they cannot all be honoured at once");
    }
    s.conditions.push_back({"Active", active,
                            active                                    ? "Enforced"
                            : v.state == QuotaObjectState::kDuplicate ? "Duplicate"
                                                                      : "Invalid",
                            std::move(message)});
    s.conditions.push_back({"Valid", v.error.empty(), v.error.empty() ? "Valid" : "Invalid",
                            v.error.empty() ? "spec is valid" : v.error});
    auto n = by_ns.find(v.ns);
    if (active && n != by_ns.end()) {
      const NamespaceQueue& q = *n->second;
      s.guaranteed = FormatGpus(q.guaranteed_milli);
      s.limit = FormatGpus(q.limit_milli);
      s.cohort = q.cohort;
      s.used = FormatGpus(q.usage_milli);
      s.borrowed = FormatGpus(q.borrowed_milli);
      auto l = lent.find(v.ns);
      s.lent = FormatGpus(l == lent.end() ? 0 : l->second);
      if (!q.cohort.empty()) {
        for (const QuotaBorrower& b : borrowers[q.cohort]) {
          if (b.ns != v.ns) s.borrowers.push_back(b);
        }
      }
      s.pending_pods = q.pending_pods;
      s.pending_gpus = FormatGpus(q.pending_milli);
      if (!q.queue.empty()) {
        const QueuedPod& head = q.queue.front();
        s.head = head.gang.empty() ? StrCat(head.ns, "/", head.name)
                                   : StrCat(head.ns, "/", head.name, " (gang ", head.gang, ")");
        s.head_reason = head.reason;
        if (head.estimated_start_unix >= 0) {
          s.head_estimated_start = head.estimated_start_unix / 60 * 60;
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpusched::queue
