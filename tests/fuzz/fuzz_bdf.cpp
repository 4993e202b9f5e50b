// parseBdf: a Bdf that parses prints back to a canonical address that parses to itself and is a
// safe path component.
#include "drivers/common/pci.hpp"
#include "drivers/common/validate.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  auto b = parseBdf(fuzz::asText(data, size));
  if (!b) return 0;
  const std::string s = b->str();
  FUZZ_CHECK(s.size() == 12);
  FUZZ_CHECK(isSafePathComponent(s));
  FUZZ_CHECK(parseBdf(s) == b);
  return 0;
}
