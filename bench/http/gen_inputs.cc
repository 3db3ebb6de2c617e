// Writes the HTTP load-test inputs into DIR: cluster-N.json (a synthetic
// `kubectl get nodes,pods -A -o json` List of N GPU nodes) and
// filter-K.json (ExtenderArgs naming the first K nodes, pod asking for 4 GPUs).
// Usage: gen_inputs DIR NODES K [K ...]
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "test/testing/builders.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: gen_inputs DIR NODES K [K ...]\n";
    return 2;
  }
  const std::string dir = argv[1];
  const int nodes = std::atoi(argv[2]);
  std::ofstream(dir + "/cluster-" + std::to_string(nodes) + ".json")
      << gpusched::testing::SyntheticClusterJson(nodes, 7);
  for (int i = 3; i < argc; ++i) {
    const int k = std::atoi(argv[i]);
    std::ofstream(dir + "/filter-" + std::to_string(k) + ".json")
        << gpusched::testing::SyntheticFilterRequest(k, 4);
  }
  return 0;
}
