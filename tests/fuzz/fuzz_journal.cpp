// parseJournal: a journal drives writes during recovery, so whatever it holds either fails to
// parse or holds only valid names, and a parsed journal survives a round trip through toJson.
#include "drivers/common/validate.hpp"
#include "drivers/model/journal.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  auto j = parseJournal(fuzz::asText(data, size));
  if (!j) {
    FUZZ_CHECK(!j.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(j->next <= j->steps.size());
  for (const auto& d : j->devices) FUZZ_CHECK(checkDeviceState(d.bdf.str(), d.original).ok());
  for (const auto& s : j->steps) FUZZ_CHECK(checkStep(s).ok());
  auto again = parseJournal(toJson(*j));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->devices.size() == j->devices.size());
  FUZZ_CHECK(again->steps.size() == j->steps.size());
  FUZZ_CHECK(again->next == j->next && again->mode == j->mode && again->pid == j->pid);
  for (size_t i = 0; i < j->devices.size(); ++i) {
    FUZZ_CHECK(again->devices[i].bdf == j->devices[i].bdf);
    FUZZ_CHECK(again->devices[i].original == j->devices[i].original);
  }
  return 0;
}
