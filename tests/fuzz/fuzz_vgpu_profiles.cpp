// parseVgpuProfiles: the profile table format. Counts stay small and non-negative whatever the
// text says, and every entry can be looked up again.
#include "drivers/model/vgpu_profiles.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  auto t = parseVgpuProfiles(fuzz::asText(data, size));
  for (const auto& [name, n] : t.maxPerGpu) {
    FUZZ_CHECK(!name.empty());
    FUZZ_CHECK(n >= 0 && n <= 4096);
    FUZZ_CHECK(t.maxInstances(name).has_value());
  }
  for (const auto& d : t.defaults) {
    FUZZ_CHECK(d.count >= 0 && d.count <= 4096);
    FUZZ_CHECK(!t.defaultsFor(d.device).empty());
  }
  return 0;
}
