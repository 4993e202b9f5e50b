// parseCmdline: /proc/cmdline as words and key=value pairs. Keys never hold unquoted blanks, and
// parsing is linear (no quadratic blow-up on long lines).
#include "drivers/common/parsers.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  auto c = parseCmdline(fuzz::asText(data, size));
  size_t total = 0;
  for (const auto& [key, value] : c.params) {
    total += key.size() + (value ? value->size() + 1 : 0);
    FUZZ_CHECK(key.find('=') == std::string::npos);
    FUZZ_CHECK(c.has(key));
  }
  FUZZ_CHECK(total <= size);
  return 0;
}
