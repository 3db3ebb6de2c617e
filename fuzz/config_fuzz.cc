// libFuzzer target: the scheduler-policy config decoder (gpusched validate,
// start-up and hot reload). Any input must give a config or an error naming
// the field, never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "scheduler/codec/config_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpusched::codec::DecodeConfig(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
