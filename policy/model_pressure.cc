#include "policy/model_pressure.h"

#include <algorithm>

namespace gpusched::policy {

bool HasConstrainedShapes(const std::vector<FragmentationShape>& target) {
  return std::any_of(target.begin(), target.end(), [](const FragmentationShape& s) {
    return s.gpu_count > 0 && !s.models.empty();
  });
}

std::vector<int64_t> CapacityByProduct(const ClusterSnapshot& snapshot) {
  std::vector<int64_t> out(snapshot.products().size(), 0);
  for (const NodeInfo* n : snapshot.nodes()) {
    if (n->product_id < out.size()) out[n->product_id] += int64_t{1000} * n->healthy_count();
  }
  return out;
}

namespace {

// By product id: 1 if the shape allows the product.
std::vector<uint8_t> Allows(const FragmentationShape& s, const std::vector<std::string>& products) {
  std::vector<uint8_t> out(products.size(), 0);
  for (size_t i = 0; i < products.size(); ++i) {
    for (const std::string& e : s.models) {
      if (ProductMatches(e, products[i])) out[i] = 1;
    }
  }
  return out;
}

}  // namespace

std::vector<double> ModelPressure(const std::vector<FragmentationShape>& target,
                                  const std::vector<std::string>& products,
                                  const std::vector<int64_t>& capacity) {
  std::vector<double> rho(products.size(), 0);
  double demand = 0, total = 0;
  for (const FragmentationShape& s : target) {
    if (s.gpu_count > 0) demand += s.weight * s.gpu_count * s.gpu_milli;
  }
  for (int64_t c : capacity) total += static_cast<double>(c);
  if (demand <= 0 || total <= 0) return rho;
  for (const FragmentationShape& s : target) {
    if (s.gpu_count <= 0 || s.models.empty()) continue;
    const std::vector<uint8_t> allows = Allows(s, products);
    double reach = 0;  // C_A(m)
    for (size_t i = 0; i < products.size(); ++i) {
      if (allows[i]) reach += static_cast<double>(capacity[i]);
    }
    if (reach <= 0) continue;
    const double share = s.weight * s.gpu_count * s.gpu_milli / demand;  // s_m
    for (size_t i = 0; i < products.size(); ++i) {
      if (allows[i]) rho[i] += share * total / reach;
    }
  }
  for (double& r : rho) r = std::min(1.0, r);
  return rho;
}

double PressurePenalty(const std::vector<double>& rho, const std::vector<int64_t>& capacity,
                       const std::vector<uint8_t>& allowed, uint16_t product, int64_t milli) {
  if (product >= rho.size()) return 0;
  double least = rho[product];
  for (size_t i = 0; i < rho.size(); ++i) {
    const bool ok = allowed.empty() || (i < allowed.size() && allowed[i] != 0);
    if (ok && capacity[i] > 0) least = std::min(least, rho[i]);
  }
  return (rho[product] * rho[product] - least * least) * static_cast<double>(milli);
}

}  // namespace gpusched::policy
