// libFuzzer target: every request decoder of the extender (ExtenderArgs,
// binding, preemption, cluster List, Pod and Node objects) on arbitrary bytes.
// A decoder must return a value or a Status, never crash, leak or hang; a
// decoded filter request is also run through the Framework on a small cluster.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpusched/core/extender_service.h"
#include "scheduler/codec/extender_codec.h"
#include "test/testing/builders.h"

namespace {

gpusched::ExtenderService& Service() {
  static gpusched::ClusterState* state = [] {
    auto s = gpusched::testing::MakeState({gpusched::testing::Dgx1V100("gpu-h100-001"),
                                           gpusched::testing::Pcie4xT4("t4-01"),
                                           gpusched::testing::Hgx8H100("gpu-h100-007")});
    return s.release();
  }();
  static gpusched::ExtenderService* svc = [] {
    auto* s = new gpusched::ExtenderService(
        state, *gpusched::policy::Framework::Create(gpusched::ScoringConfig{}));
    s->SetReady(true);
    return s;
  }();
  return *svc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gpusched::codec::RequestDecoder decoder(64);
  const std::string input(reinterpret_cast<const char*>(data), size);
  {
    std::string body = input;
    auto args = decoder.DecodeExtenderArgs(body);
    if (args.ok()) {
      gpusched::FilterOutcome out = Service().Filter(*args);
      (void)gpusched::codec::EncodeFilterResult(*args, out);
      (void)gpusched::codec::EncodePrioritizeResult(*args, Service().Prioritize(*args));
    }
  }
  {
    std::string body = input;
    (void)decoder.DecodeBindingArgs(body);
  }
  {
    std::string body = input;
    (void)decoder.DecodePreemptionArgs(body);
  }
  {
    std::string body = input;
    (void)decoder.DecodeClusterList(body);
  }
  {
    std::string body = input;
    (void)decoder.DecodePodObject(body);
  }
  {
    std::string body = input;
    (void)decoder.DecodeNodeObject(body);
  }
  return 0;
}
