// parseCreatableVgpuTypes ("ID : NAME" lines from <VF>/nvidia/creatable_vgpu_types): every entry
// it returns has a numeric id and a name, whatever the kernel (or a hostile file) wrote.
#include "drivers/model/vgpu.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  for (const auto& t : parseCreatableVgpuTypes(fuzz::asText(data, size))) {
    FUZZ_CHECK(!t.id.empty() && !t.name.empty());
    for (char c : t.id) FUZZ_CHECK(c >= '0' && c <= '9');
  }
  return 0;
}
