// ExtenderService: the extender verbs, free of HTTP and JSON. Filter and
// prioritize take one snapshot and run the policy Framework over the nodes
// kube-scheduler sent; bind chooses devices with the same selector the score
// used and assumes the pod in ClusterState at once, so the next filter
// cannot hand out the same GPUs.
//
// A PodGate (the queue manager) may hold a pod back before any node is
// looked at: every node then fails with the gate's reason. With a gate
// installed, every device assumption of bind goes through the gate, so it
// can re-check quota and serialise allocations with its own reservations.
//
// Thread-safe: any number of requests may run concurrently; the framework
// and gate are swapped atomically on config reload.
#ifndef GPUSCHED_CORE_EXTENDER_SERVICE_H_
#define GPUSCHED_CORE_EXTENDER_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/extender_args.h"
#include "gpusched/policy/framework.h"

namespace gpusched {

// (node, reason) pairs: nodes a pod may not use whatever their product.
using HeldNodeList = std::vector<std::pair<std::string, std::string>>;

// Decides whether a pod may be placed at all right now (quota, queue order,
// gangs). Implementations must be thread-safe.
// A gate's answer for one pod: admitted now, or not with the reason (it
// starts with "gpusched: ") every node fails with.
struct Admission {
  bool admitted = true;
  std::string reason;  // empty when admitted
  // Admitted only: the node devices are reserved on for the pod (a gang
  // member; filter then passes only that node), or "".
  std::string reserved_node;
  // Admitted only: nodes the pod may not use whatever their product (e.g.
  // devices freed by reclaim for another pod), each with its reason. The
  // gate's own lists, shared: never copied per request.
  std::vector<std::shared_ptr<const HeldNodeList>> held_nodes;
  // Admitted only: per GPU product of the snapshot the gate was given (by
  // NodeInfo::product_id), "" where the pod may use it, else the reason its
  // nodes fail with (per-model quota). Shorter than the product list (or
  // empty): the products past its end are allowed.
  std::vector<std::string> product_refusals;
  static Admission Yes() { return {}; }
  static Admission No(std::string reason) { return {false, std::move(reason), {}, {}, {}}; }
};

class PodGate {
 public:
  virtual ~PodGate() = default;
  // Whether the pod may be placed now, and on which products and nodes: the
  // filter's one call into the gate. `snapshot` and `framework` are the
  // ones the filter uses (one reload can never give the gate and the filter
  // different scoring); the gate answers from its own state synced to at
  // least `snapshot`.
  virtual Admission Admit(const PodRequest& pod,
                          const std::shared_ptr<const ClusterSnapshot>& snapshot,
                          const policy::Framework& framework) = 0;
  // Called after a successful bind (usage changed).
  virtual void OnBound(const PodRequest& pod) = 0;

  // Returns the node devices are reserved on for `pod` (a gang member), or
  // "". Filter then passes only that node.
  virtual std::string ReservedNode(const PodRequest& pod) {
    (void)pod;
    return "";
  }
  // Checks admission again and assumes `pod` on `node` with `devices` in
  // `state` (or, for a pod holding a reservation, turns the reservation into
  // the pod and sets *devices). Returns "" or the bind Error; on error
  // nothing changed.
  virtual std::string AssumeForBind(ClusterState& state, const PodRequest& pod,
                                    std::string_view node, DeviceMask* devices) {
    absl::Status s = state.Assume(pod, node, *devices);
    return s.ok() ? "" : "gpusched: " + std::string(s.message());
  }
  // Returns the preemption result for `args` (the preempt verb).
  virtual PreemptionOutcome Preempt(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                    const policy::Framework& framework);
};

// Priority-only preemption (no quotas): keeps lower-priority victims of each
// candidate, most recently started first, minimal and usable. Used when no
// gate is installed and as PodGate's default.
PreemptionOutcome DefaultPreempt(const PreemptionArgs& args, const ClusterSnapshot& snapshot,
                                 const policy::Framework& framework);

class ExtenderService {
 public:
  ExtenderService(ClusterState* state, std::shared_ptr<const policy::Framework> framework);

  void SetFramework(std::shared_ptr<const policy::Framework> framework);
  std::shared_ptr<const policy::Framework> framework() const;
  // The gate must outlive the service; nullptr = admit everything.
  void SetGate(PodGate* gate);
  // Until ready (the cluster source has synced), filter answers with Error.
  void SetReady(bool ready) { ready_ = ready; }
  bool ready() const { return ready_; }

  // Each node once: a position repeating an earlier one's name is in no list.
  FilterOutcome Filter(const ExtenderArgs& args) const;
  // `names` resolved on the current node set, for ExtenderArgs::resolved.
  std::shared_ptr<const ResolvedNodeNames> Resolve(
      const std::vector<std::string_view>& names) const;
  // Returns one score per args.node_names entry, 0..10 (MaxExtenderPriority),
  // or kRepeatedNodeScore where the name repeats an earlier position's (the
  // encoder leaves it out: kube-scheduler would add both scores).
  std::vector<int64_t> Prioritize(const ExtenderArgs& args) const;
  static constexpr int64_t kRepeatedNodeScore = -1;
  // Where a bind is written back to the cluster (the API server's pods/binding
  // in --kube mode): "" or an error. Set once, before serving; unset: binds
  // are only assumed (--cluster mode, simulator).
  using BindWriteBack = std::function<std::string(const BindingArgs&, DeviceMask devices)>;
  void SetBindWriteBack(BindWriteBack write_back) { write_back_ = std::move(write_back); }

  // Returns "" on success, else the Error for ExtenderBindingResult. On
  // success the pod is assumed on the node with the chosen devices and
  // written back; a failed write-back takes the assumption back (the pod is
  // pending again) and is the error.
  std::string Bind(const BindingArgs& args, DeviceMask* devices = nullptr);
  // The preempt verb: kube-scheduler's candidates -> the victims gpusched
  // agrees to (through the gate if one is installed).
  PreemptionOutcome Preempt(const PreemptionArgs& args) const;

  ClusterState* state() const { return state_; }

 private:
  // After the assumption of `pod` with `chosen`: the write-back, and the
  // rollback if it fails; on success tells the gate the pod is bound.
  std::string Committed(const PodRequest& pod, const BindingArgs& args, DeviceMask chosen,
                        DeviceMask* devices);

  ClusterState* state_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const policy::Framework> framework_ ABSL_GUARDED_BY(mu_);
  std::atomic<PodGate*> gate_{nullptr};
  std::atomic<bool> ready_{false};
  BindWriteBack write_back_;
};

}  // namespace gpusched

#endif  // GPUSCHED_CORE_EXTENDER_SERVICE_H_
