// Request decoding: simdjson DOM (what gpusched uses) against nlohmann's DOM,
// on kube-scheduler ExtenderArgs with N NodeNames; and response encoding.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "gpusched/core/extender_service.h"
#include "scheduler/codec/extender_codec.h"
#include "test/testing/builders.h"

namespace gpusched {
namespace {

void BM_Decode_Simdjson(benchmark::State& state) {
  const std::string body = testing::SyntheticFilterRequest(static_cast<int>(state.range(0)), 4);
  codec::RequestDecoder decoder;
  for (auto _ : state) {
    std::string copy = body;
    auto args = decoder.DecodeExtenderArgs(copy);
    benchmark::DoNotOptimize(args);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_Decode_Simdjson)->Arg(500)->Arg(5000)->Arg(20000);

void BM_Decode_NlohmannDom(benchmark::State& state) {
  const std::string body = testing::SyntheticFilterRequest(static_cast<int>(state.range(0)), 4);
  for (auto _ : state) {
    auto j = nlohmann::json::parse(body);
    std::vector<std::string> names = j["NodeNames"].get<std::vector<std::string>>();
    benchmark::DoNotOptimize(names);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_Decode_NlohmannDom)->Arg(500)->Arg(5000)->Arg(20000);

void BM_Encode_FilterResult(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(testing::SyntheticNodeName(i));
  ExtenderArgs args;
  for (const auto& s : names) args.node_names.push_back(s);
  FilterOutcome out;
  const int32_t reason = out.AddReason("gpusched: 2 of 8 GPUs free, pod needs 4");
  for (int i = 0; i < n; ++i) {
    if (i % 3 == 0) {
      out.failed.push_back({i, reason});
    } else {
      out.passed.push_back(i);
    }
  }
  for (auto _ : state) benchmark::DoNotOptimize(codec::EncodeFilterResult(args, out));
}
BENCHMARK(BM_Encode_FilterResult)->Arg(5000);

}  // namespace
}  // namespace gpusched

BENCHMARK_MAIN();
