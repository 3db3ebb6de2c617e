// ConnTable: the HTTP server's book of open connections and of the memory
// they hold. Beast-free, so its admission and eviction rules are unit-tested
// without sockets; only HttpServer (server.cc, session.h) calls it.
//
//  - Slots: each listener serves at most `max_connections` connections, and
//    at most `max_per_source` from one remote address. A new connection past
//    either cap evicts one that waits on its client (the source's own, when
//    over the source cap): a header pending or a body not begun (the oldest
//    first), then a slow body or answer (see below; the longest stalled
//    first), then connections that never sent a byte, then idle keep-alive
//    ones (the longest idle first). Only if none may go is it refused (a
//    refusal slot answers 503) or, past the refusal slots too, dropped.
//  - Memory budget: one count of bytes in flight, shared by request bodies
//    (charged as their bytes arrive, never as announced) and answers (charged
//    from when they are made until their last byte is written). Holdings of
//    at most `small_bytes` may also use `lane_bytes` past `max_bytes`, so
//    one large request being handled cannot make kube-scheduler's small ones
//    wait. A charge that does not fit evicts connections whose body or
//    answer stalls (no progress for `slow_after`, or slower on average than
//    `min_rate` once older than that), largest holding first, and only if
//    that makes the room.
//
// Thread-safe: one mutex, held for a scan of the connections at most.
#ifndef GPUSCHED_HTTP_CONN_TABLE_H_
#define GPUSCHED_HTTP_CONN_TABLE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpusched::http {

using ConnClock = std::chrono::steady_clock;

// What a connection is doing, for eviction choices.
enum class ConnPhase {
  kIdle,      // waiting for the first byte of a request
  kHeader,    // part of a request header received
  kBody,      // reading a request body
  kHandling,  // the router is computing the answer
  kAnswer,    // writing an answer
  kClosing,   // closing (a refusal's drain included)
};

// Why a connection was evicted (metric label, log text).
enum class EvictReason { kHeader, kFresh, kIdle, kBody, kAnswer };
const char* EvictReasonName(EvictReason r);

// One connection. Its fields are the table's to read and write.
struct ConnEntry {
  int listener = 0;
  std::string source;
  bool refused = false;  // in a refusal slot
  ConnPhase phase = ConnPhase::kIdle;
  ConnClock::time_point phase_since;
  ConnClock::time_point last_progress;
  int64_t phase_bytes = 0;  // bytes moved in this phase (body read, answer written)
  int64_t held = 0;         // budget bytes
  int64_t requests = 0;     // requests answered so far
  bool evicted = false;     // slot and budget already given back
  bool closed = false;
  std::function<void()> cancel;  // closes the connection on its own thread
  size_t index = 0;              // in ConnTable::entries_
};

struct ListenerLimits {
  int max_connections = 128;
  int max_per_source = 128;
  int refusal_slots = 64;
};

struct BudgetLimits {
  int64_t max_bytes = 32 << 20;
  int64_t lane_bytes = 4 << 20;
  int64_t small_bytes = 1 << 20;
  std::chrono::milliseconds slow_after{250};
  int64_t min_rate = 1 << 20;  // bytes per second
};

// A connection to close: call `cancel` (may be empty if the session has not
// registered yet; it then sees `evicted` at its next step).
struct Eviction {
  std::function<void()> cancel;
  EvictReason reason;
  std::string source;
  std::chrono::milliseconds waited;  // in the phase that made it evictable
};

struct ConnStats {
  int open = 0;     // served slots in use (one listener)
  int refused = 0;  // refusal slots in use
  int64_t inflight_bytes = 0;
  int64_t peak_inflight_bytes = 0;
  int64_t peak_held_by_one = 0;              // the largest holding of any one connection
  std::map<std::string, int64_t> evictions;  // by EvictReasonName
};

class ConnTable {
 public:
  enum class Admission { kServe, kRefuse, kDrop };
  struct Opened {
    Admission admission = Admission::kDrop;
    std::shared_ptr<ConnEntry> entry;  // null for kDrop
    std::vector<Eviction> evicted;
  };

  ConnTable(std::vector<ListenerLimits> listeners, BudgetLimits budget);

  // A connection accepted on `listener` from `source`.
  Opened Open(int listener, const std::string& source, ConnClock::time_point now);
  // Registers how to close `e` (called once, right after Open). Returns false
  // if `e` was evicted meanwhile.
  bool SetCancel(ConnEntry& e, std::function<void()> cancel);
  // The connection is gone: frees its slot and budget unless eviction did.
  void Close(ConnEntry& e);
  // Enters `phase` (resets progress). Returns false if `e` was evicted.
  bool SetPhase(ConnEntry& e, ConnPhase phase, ConnClock::time_point now);
  // `bytes` more of the body read or the answer written.
  void Progress(ConnEntry& e, int64_t bytes, ConnClock::time_point now);
  void RequestDone(ConnEntry& e);
  // Sets e's holding to `bytes`. A rise that does not fit (in max_bytes, or
  // with the lane for a small holding), even after evicting slow holders,
  // leaves the holding unchanged and returns false.
  bool Hold(ConnEntry& e, int64_t bytes, ConnClock::time_point now, std::vector<Eviction>* evicted);
  // True if `bytes` more could be charged now or after evicting slow holders
  // (nothing is charged or evicted).
  bool HasRoom(const ConnEntry& e, int64_t bytes, ConnClock::time_point now);
  bool evicted(const ConnEntry& e);
  ConnStats Stats(int listener);

 private:
  struct Slots {
    ListenerLimits limits;
    int open = 0;
    int refused = 0;
    std::map<std::string, int> per_source;
  };
  // The cap a holding of `bytes` is charged against.
  int64_t CapFor(int64_t bytes) const;
  bool SlowLocked(const ConnEntry& e, ConnClock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t EvictableBytesLocked(const ConnEntry& e, ConnClock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Slot eviction order (lower first); -1 = not evictable for a slot.
  int SlotRankLocked(const ConnEntry& e, ConnClock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The best connection to evict for a slot (`source` empty = any source).
  ConnEntry* SlotVictimLocked(int listener, const std::string& source,
                              ConnClock::time_point now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked(ConnEntry& e, EvictReason reason, ConnClock::time_point now,
                   std::vector<Eviction>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeSlotLocked(ConnEntry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetHeldLocked(ConnEntry& e, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<Slots> slots_ ABSL_GUARDED_BY(mu_);
  const BudgetLimits budget_;
  int64_t inflight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_inflight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_held_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> evictions_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<ConnEntry>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpusched::http

#endif  // GPUSCHED_HTTP_CONN_TABLE_H_
