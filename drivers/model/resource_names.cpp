#include "drivers/model/resource_names.hpp"

#include <cctype>
#include <cstdio>

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

std::string hex4(uint16_t v) { return hexDigits(v, 4); }

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Replaces each run of whitespace with one '_'.
std::string underscoreSpaces(std::string_view s) {
  std::string out;
  bool inRun = false;
  for (char c : s) {
    if (isSpace(c)) {
      if (!inRun) out += '_';
      inRun = true;
    } else {
      out += c;
      inRun = false;
    }
  }
  return out;
}

// Walks the device lines of one vendor section, the way the plugin does: skip '#' lines, stop at
// the first line that does not start with a tab. Returns the text after "\t<device>".
std::optional<std::string> findDevice(std::string_view pciIds, std::string_view vendorHex,
                                      std::string_view deviceHex) {
  bool inVendor = false;
  const std::string prefix = "\t" + std::string(deviceHex);
  std::optional<std::string> found;
  // Line by line as far as the vendor's section: pci.ids has some 37,000 lines (1.3 MB), and the
  // status asks once per device.
  eachLine(pciIds, '\n', [&](std::string_view line) {
    if (!inVendor) {
      inVendor = startsWith(line, vendorHex);
      return true;
    }
    if (startsWith(line, "#")) return true;
    if (!startsWith(line, "\t")) return false;
    if (!startsWith(line, prefix)) return true;
    found = std::string(trim(line.substr(prefix.size())));
    return false;
  });
  return found;
}

}  // namespace

std::optional<std::string> pciIdsDeviceName(std::string_view pciIds, uint16_t vendor,
                                            uint16_t device) {
  auto name = findDevice(pciIds, hex4(vendor), hex4(device));
  if (!name || name->empty()) return std::nullopt;
  return name;
}

std::string sanitizePciDeviceName(std::string_view raw) {
  std::string s(trim(raw));
  for (char& c : s) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (c == '/' || c == '.') c = '_';
  }
  std::string out;
  for (char c : underscoreSpaces(s)) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.') out += c;
  }
  return out;
}

std::string passthroughResourceName(std::string_view pciIds, uint16_t device) {
  auto name = findDevice(pciIds, "10de", hex4(device));
  std::string suffix = name ? sanitizePciDeviceName(*name) : std::string();
  if (suffix.empty()) suffix = hex4(device);
  return std::string(kResourcePrefix) + suffix;
}

std::string vgpuResourceName(std::string_view typeName) {
  return std::string(kResourcePrefix) + underscoreSpaces(trim(typeName));
}

std::string pciVendorSelector(const PciId& id) {
  std::string s = hexDigits(id.vendor, 4) + ":" + hexDigits(id.device, 4);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace hostprep
