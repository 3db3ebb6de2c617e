// YieldPoint: lets a low-priority background thread that computes for long
// stretches without a system call hand its core over at regular points.
// On this kernel a running low-priority thread (nice 19, or even
// SCHED_IDLE) may keep its core until the next scheduler tick, several
// milliseconds, while a request's thread that woke there waits; sched_yield
// at each point puts any such thread first. The reclaim planner's thread
// owns one and passes it to the planning loops (QueueManager::PlanInputs);
// planning elsewhere passes none. Not thread-safe: one per thread.
#ifndef GPUSCHED_QUEUE_YIELD_POINT_H_
#define GPUSCHED_QUEUE_YIELD_POINT_H_

#include <sched.h>

#include <chrono>
#include <cstdint>

namespace gpusched::queue {

class YieldPoint {
 public:
  explicit YieldPoint(std::chrono::microseconds every) : every_(every) {}

  // Cheap to call per node: reads the clock every kCallsPerClockRead calls
  // and yields the core once `every` has passed since the last yield.
  void Pass() {
    if (++calls_ % kCallsPerClockRead != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < every_) return;
    sched_yield();
    ++yields_;
    last_ = std::chrono::steady_clock::now();
  }
  int64_t yields() const { return yields_; }

 private:
  static constexpr uint32_t kCallsPerClockRead = 16;
  const std::chrono::microseconds every_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  uint32_t calls_ = 0;
  int64_t yields_ = 0;
};

}  // namespace gpusched::queue

#endif  // GPUSCHED_QUEUE_YIELD_POINT_H_
