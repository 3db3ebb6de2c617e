// A standalone `gpusched simulate` (same code as the subcommand) so the
// simulator can be built and run without the server's dependencies.
#include <string>
#include <vector>

#include "scheduler/cli/commands.h"

int main(int argc, char** argv) {
  return gpusched::cli::Simulate(std::vector<std::string>(argv + 1, argv + argc));
}
