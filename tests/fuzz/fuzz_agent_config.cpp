// The agent's YAML config: a bad one is an error naming the file (exit 2, host untouched); a good
// one has only validated names and paths.
#include "agent/config.hpp"
#include "drivers/common/parsers.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  if (size > 64 * 1024) return 0;
  auto c = parseConfig(fuzz::asText(data, size), "/etc/hostprep/config.yaml");
  if (!c) {
    FUZZ_CHECK(c.error().message.find("config.yaml") != std::string::npos);
    FUZZ_CHECK(c.error().exit == Exit::kUsage);
    return 0;
  }
  FUZZ_CHECK(isValidModuleName(c->selection.hostDriver));
  return 0;
}
