// parseVgpuConfig (vgpu-device-manager's YAML): either an error that says what is wrong, or
// configs whose type names are valid and whose counts are positive.
#include "drivers/model/vgpu_config.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  if (size > 64 * 1024) return 0;
  auto cfg = parseVgpuConfig(fuzz::asText(data, size), "fuzz.yaml");
  if (!cfg) {
    FUZZ_CHECK(!cfg.error().message.empty());
    return 0;
  }
  for (const auto& name : cfg->names()) {
    const auto* entries = cfg->find(name);
    FUZZ_CHECK(entries != nullptr);
    for (const auto& e : *entries) {
      for (const auto& [type, count] : e.vgpuDevices) {
        FUZZ_CHECK(isValidVgpuTypeName(type));
        FUZZ_CHECK(count >= 0);
      }
    }
  }
  return 0;
}
