// parseProcModules: every name it returns is a valid, normalised module name.
#include "drivers/common/parsers.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  for (const auto& m : parseProcModules(fuzz::asText(data, size))) {
    FUZZ_CHECK(isValidModuleName(m));
    FUZZ_CHECK(m.find('-') == std::string::npos);
  }
  return 0;
}
