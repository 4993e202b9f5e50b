// A device's modalias (first line) against a modules.alias text (the rest): bestVfioModule (on
// the text and on its vfioAliasLines, which must agree) and parseModulesAlias. The chosen module
// becomes a driver directory, so it must always be a valid module name, and hostile patterns must
// not make matching explode. parsePciModalias takes the first line only when the kernel's format
// prints it back.
#include <strings.h>

#include <cstdio>
#include <cstring>

#include "drivers/common/parsers.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/common/text.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  auto [modalias, aliases] = fuzz::splitFirstLine(fuzz::asText(data, size));
  if (auto m = parsePciModalias(modalias)) {
    char back[64];
    std::snprintf(back, sizeof back, "pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", m->id.vendor,
                  m->id.device, m->subsystem.vendor, m->subsystem.device,
                  (m->classCode >> 16) & 0xff, (m->classCode >> 8) & 0xff, m->classCode & 0xff);
    const std::string_view t = trim(modalias);
    FUZZ_CHECK(t.size() == std::strlen(back) && ::strncasecmp(t.data(), back, t.size()) == 0);
  }
  for (const auto& a : parseModulesAlias(aliases)) {
    FUZZ_CHECK(!a.pattern.empty() && !a.module.empty());
  }
  const std::string best = bestVfioModule(aliases, modalias);
  FUZZ_CHECK(isValidModuleName(best));
  // The agent and the plan look devices up in the vfio_pci: lines alone: the same answer.
  FUZZ_CHECK(bestVfioModule(vfioAliasLines(aliases), modalias) == best);
  return 0;
}
