// Model pressure: the share of each GPU product's capacity that the target
// workload's model-constrained pods are expected to need.
//
// With M's GPU shapes m (weight p_m, request g_m = gpu_count * gpu_milli), the
// demand share of m is s_m = p_m g_m / sum_k p_k g_k. If the future workload
// asks for as much GPU as the cluster has (C milli in all), a constrained
// shape m needs s_m * C, spread over the products it allows, A(m), in
// proportion to their capacity C_Y. Product X then expects
//
//   rho_X = min(1, sum over constrained m with X in A(m) of s_m * C / C_A(m))
//
// of its capacity to be asked for by pods that can go nowhere else (or only to
// products as scarce). Unconstrained shapes put no pressure on any product.
// A pod that uses X's GPUs although a less pressed product would take it
// risks displacing constrained pods that need X: PressurePenalty charges
// (rho_X^2 - rho_min^2) per milli it takes, rho_min the least pressure among
// the products the pod allows. Squared: a lightly pressed product (rho 0.3:
// 0.09 per milli) keeps most of its spare capacity in use, a nearly full
// one (rho -> 1) costs about the GPU taken.
//
// Example: 10 % of the GPU demand is constrained to T4, 842 of 6,212 GPUs:
// rho_T4 = 0.10 * 6212 / 842 = 0.74; every other product 0; a 1-GPU pod
// free to go anywhere is charged 0.74^2 * 1000 = 547 milli on a T4 node, a
// pod that only takes T4 nothing.
//
// Callers: FragLookaheadScorer (frag_lookahead.h), tests. Pure functions;
// thread-safe.
#ifndef GPUSCHED_POLICY_MODEL_PRESSURE_H_
#define GPUSCHED_POLICY_MODEL_PRESSURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/model/snapshot.h"
#include "gpusched/policy/scoring_spec.h"

namespace gpusched::policy {

// True if some GPU shape of `target` names models (only then can any
// product be pressed).
bool HasConstrainedShapes(const std::vector<FragmentationShape>& target);

// GPU milli of the healthy devices of each product, by product id.
std::vector<int64_t> CapacityByProduct(const ClusterSnapshot& snapshot);

// rho by product id (see above); `capacity` is by product id.
std::vector<double> ModelPressure(const std::vector<FragmentationShape>& target,
                                  const std::vector<std::string>& products,
                                  const std::vector<int64_t>& capacity);

// (rho[product]^2 - rho_min^2) * milli, rho_min the least rho among the
// products `allowed` (by product id; empty = every product) that have
// capacity: the charge for placing `milli` GPU milli on `product`.
double PressurePenalty(const std::vector<double>& rho, const std::vector<int64_t>& capacity,
                       const std::vector<uint8_t>& allowed, uint16_t product, int64_t milli);

}  // namespace gpusched::policy

#endif  // GPUSCHED_POLICY_MODEL_PRESSURE_H_
