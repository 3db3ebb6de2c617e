// `gpusched queue --explain NS/POD`: one pending pod's reason, queue
// position, estimated start (with how its runtime was estimated) and the
// what-if answers, as the extender's GET /debug/pods/<ns>/<name> page has
// them (nothing is recomputed here). Called by the queue command only.
#ifndef GPUSCHED_CLI_QUEUE_EXPLAIN_H_
#define GPUSCHED_CLI_QUEUE_EXPLAIN_H_

#include <string>

#include "scheduler/cli/flags.h"

namespace gpusched::cli {

// The flags --explain reads (valued ones; queue_cmd.cc adds them).
inline constexpr const char* kExplainFlags[] = {"explain",      "extender",    "extender-cert",
                                                "extender-key", "extender-ca", "output"};

// Prints the explanation of `target` ("NS/POD", or "POD" in `ns`) to stdout
// (text, or the page's JSON with -o json). Returns 0, or 1 with a message on
// stderr when the extender cannot be reached, the pod is unknown to it or
// not pending, or the page is malformed; 2 for a bad flag value.
int ExplainPod(const Flags& flags, const std::string& target, const std::string& ns);

}  // namespace gpusched::cli

#endif  // GPUSCHED_CLI_QUEUE_EXPLAIN_H_
