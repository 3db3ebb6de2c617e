// gpusched: GPU-aware scheduler extender for Kubernetes.
#include <iostream>
#include <string>
#include <vector>

#include "scheduler/cli/commands.h"
#include "scheduler/cli/flags.h"

namespace {

constexpr char kVersion[] = "0.1.0";

void Usage(std::ostream& out) {
  out << "usage: gpusched <command> [flags]     (gpusched <command> --help: its flags)\n"
         "\n"
         "commands:\n"
         "  serve           run the HTTP extender over one cluster source:\n"
         "                    --cluster LIST.json (a `kubectl get nodes,pods -A -o json` file),\n"
         "                    --kube (in-cluster API) or --kubeconfig PATH [--context NAME];\n"
         "                  --config FILE, --listen HOST:PORT, --health-listen HOST:PORT,\n"
         "                  TLS: --tls-cert PEM --tls-key PEM [--tls-client-ca PEM] (mTLS)\n"
         "  validate        check a policy config (--config) and optionally a cluster (--cluster)\n"
         "  simulate        run the simulator (--protocol fgd|replay; see docs/simulator.md)\n"
         "  node-agent      on a GPU node: kubelet device plugin, the kubelet's truth for\n"
         "                  gpusched.io/gpu-ids, topology (--node; see --help)\n"
         "  topology-agent  the node agent's topology job alone (--node, --interval, --once)\n"
         "  queue           pending GPU pods in queue order with position and reason\n"
         "                  (-n NAMESPACE | -A; also `kubectl gpusched queue` with\n"
         "                  kubectl-gpusched on the PATH)\n"
         "  quota export    the policy file's quotas as GPUQuota objects (YAML)\n"
         "  version         print the version\n"
         "  help            print this text\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Installed (or linked) as kubectl-gpusched on the PATH, kubectl runs it
  // for `kubectl gpusched queue ...` with the same arguments.
  if (argc < 2) {
    Usage(std::cerr);
    return 2;
  }
  const std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "serve") {
    // serve parses its own flags; its usage is printed here.
    if (gpusched::cli::WantsHelp(args)) {
      std::cout << gpusched::cli::ServeUsage();
      return 0;
    }
    return gpusched::cli::Serve(args);
  }
  if (cmd == "validate") return gpusched::cli::Validate(args);
  if (cmd == "simulate") return gpusched::cli::Simulate(args);
  if (cmd == "topology-agent") return gpusched::cli::TopologyAgent(args);
  if (cmd == "node-agent") return gpusched::cli::NodeAgent(args);
  if (cmd == "queue") return gpusched::cli::Queue(args);
  if (cmd == "quota") return gpusched::cli::Quota(args);
  if (cmd == "version" || cmd == "--version") {
    std::cout << "gpusched " << kVersion << "\n";
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    Usage(std::cout);
    return 0;
  }
  std::cerr << "gpusched: unknown command '" << cmd << "'\n";
  Usage(std::cerr);
  return 2;
}
