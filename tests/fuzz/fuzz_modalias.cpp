// A device's modalias (first line) against a modules.alias text (the rest): bestVfioModule and
// parseModulesAlias. The chosen module becomes a driver directory, so it must always be a valid
// module name, and hostile patterns must not make matching explode.
#include "drivers/parsers.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  auto [modalias, aliases] = fuzz::splitFirstLine(fuzz::asText(data, size));
  for (const auto& a : parseModulesAlias(aliases)) {
    FUZZ_CHECK(!a.pattern.empty() && !a.module.empty());
  }
  const std::string best = bestVfioModule(aliases, modalias);
  FUZZ_CHECK(isValidModuleName(best));
  return 0;
}
