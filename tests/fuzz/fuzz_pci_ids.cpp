// pci.ids: the first two bytes pick a device id, the rest is the file. Resource names keep the
// device plugin's alphabet and prefix whatever the file holds.
#include "drivers/model/resource_names.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  if (size < 4) return 0;
  const auto vendor = static_cast<uint16_t>(data[0] << 8 | data[1]);
  const auto device = static_cast<uint16_t>(data[2] << 8 | data[3]);
  const auto text = fuzz::asText(data + 4, size - 4);
  const std::string r = passthroughResourceName(text, device);
  FUZZ_CHECK(r.rfind("nvidia.com/", 0) == 0);
  FUZZ_CHECK(r.size() > 11);
  for (char c : r.substr(11)) {
    FUZZ_CHECK((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.');
  }
  if (auto name = pciIdsDeviceName(text, vendor, device)) FUZZ_CHECK(!name->empty());
  const std::string v = vgpuResourceName(text.substr(0, 256));
  FUZZ_CHECK(v.rfind("nvidia.com/", 0) == 0);
  return 0;
}
