// parseDriverOverride: "(null)" and blanks are unset; anything else comes back trimmed. What the
// name checks accept never leaves its directory.
#include "drivers/common/parsers.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/seam/host.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  const auto text = fuzz::asText(data, size);
  if (auto o = parseDriverOverride(text)) {
    FUZZ_CHECK(!o->empty() && *o != "(null)");
    FUZZ_CHECK(trim(*o) == *o);
  }
  if (checkDriverName("fuzz", text).ok()) {
    FUZZ_CHECK(isSafePathComponent(text));
    FUZZ_CHECK(hostPathProblem(hostPath("sys/bus/pci/drivers", text, "bind")).empty());
  }
  if (isSafePathComponent(text)) {
    FUZZ_CHECK(hostPathProblem(hostPath("sys/bus/pci/devices", text)).empty());
  }
  return 0;
}
