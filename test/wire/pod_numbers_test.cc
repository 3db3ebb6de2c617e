// Integer fields of a pod never wrap: GPU counts, CPU and memory sums and
// spec.priority are bounded or rejected with an error naming the field.
#include <gtest/gtest.h>

#include <string>

#include "scheduler/codec/extender_codec.h"

namespace gpusched {
namespace {

// A filter request for a pod with `containers` (JSON array text) and `spec_extra`
// (more members of spec, each followed by a comma).
std::string Request(const std::string& containers, const std::string& spec_extra = "") {
  return R"({"Pod":{"metadata":{"name":"p","namespace":"ns"},"spec":{)" + spec_extra +
         R"("containers":)" + containers + R"(}},"NodeNames":["a"]})";
}

std::string Gpus(const std::string& a, const std::string& b) {
  return R"([{"resources":{"limits":{"nvidia.com/gpu":")" + a +
         R"("}}},{"resources":{"limits":{"nvidia.com/gpu":")" + b + R"("}}}])";
}

std::string Resource(const std::string& key, const std::string& v) {
  const std::string one = R"({"resources":{"requests":{")" + key + R"(":")" + v + R"("}}})";
  return "[" + one + "," + one + "]";
}

TEST(PodNumbersTest, Table) {
  struct Case {
    const char* name;
    std::string body;
    std::string error;  // a substring of the error; "" = decodes
    int gpus = 0;
    int priority = 0;
  } cases[] = {
      {"2^62 GPUs twice would wrap to 0",
       Request(Gpus("4611686018427387904", "4611686018427387904")),
       R"(spec.containers[0].resources.limits["nvidia.com/gpu"]: '4611686018427387904' GPUs; at most 1024 per container)"},
      {"int64 max GPUs", Request(Gpus("1", "9223372036854775807")),
       R"(spec.containers[1].resources.limits["nvidia.com/gpu"])"},
      {"past int64", Request(Gpus("1", "9223372036854775808")),
       R"(spec.containers[1].resources.limits["nvidia.com/gpu"]: quantity '9223372036854775808': too large)"},
      {"1025 in one container", Request(Gpus("1025", "0")), "at most 1024 per container"},
      {"1024 in one container is past a pod's 64", Request(Gpus("1024", "0")),
       "at most 64 per pod"},
      {"64 over two containers", Request(Gpus("32", "32")), "", 64},
      {"cpu sum overflows", Request(Resource("cpu", "9223372036854775807m")),
       "spec.containers: total cpu overflows"},
      {"memory sum overflows", Request(Resource("memory", "9223372036854775807Mi")),
       "spec.containers: total memory overflows"},
      {"priority 2^32+5 would become 5", Request("[]", R"("priority":4294967301,)"),
       "spec.priority: 4294967301 is not a 32-bit integer"},
      {"priority below int32", Request("[]", R"("priority":-2147483649,)"),
       "spec.priority: -2147483649 is not a 32-bit integer"},
      {"priority past int64", Request("[]", R"("priority":9223372036854775808,)"), "spec.priority"},
      {"int32 max priority", Request("[]", R"("priority":2147483647,)"), "", 0, 2147483647},
      {"int32 min priority", Request("[]", R"("priority":-2147483648,)"), "", 0, -2147483647 - 1},
  };
  codec::RequestDecoder d;
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = d.DecodeExtenderArgs(c.body);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->pod.gpu.count, c.gpus);
      EXPECT_EQ(r->pod.priority, c.priority);
      continue;
    }
    ASSERT_FALSE(r.ok()) << "gpus " << r->pod.gpu.count << ", priority " << r->pod.priority;
    EXPECT_NE(std::string(r.status().message()).find(c.error), std::string::npos) << r.status();
    // A bad pod is not malformed JSON: the extender answers it in Error.
    EXPECT_FALSE(codec::IsMalformedJson(r.status()));
  }
}

}  // namespace
}  // namespace gpusched
