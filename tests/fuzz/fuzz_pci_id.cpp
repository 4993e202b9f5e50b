// parsePciId: an id that parses prints back as "vvvv:dddd" and parses to itself.
#include "drivers/common/pci.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  auto id = parsePciId(fuzz::asText(data, size));
  if (!id) return 0;
  const std::string s = toString(*id);
  FUZZ_CHECK(s.size() == 9);
  FUZZ_CHECK(parsePciId(s) == id);
  return 0;
}
