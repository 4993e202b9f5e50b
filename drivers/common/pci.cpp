#include "drivers/common/pci.hpp"

#include <charconv>
#include <cstdio>

#include "drivers/common/text.hpp"

namespace hostprep {

std::string Bdf::str() const {
  return hexDigits(domain, 4) + ":" + hexDigits(bus, 2) + ":" + hexDigits(device, 2) + "." +
         hexDigits(function, 1);
}

std::optional<Bdf> parseBdf(std::string_view s) {
  // Strictly hex digits in fixed positions: a Bdf must never smuggle "/" or ".." into a path.
  auto hexField = [](std::string_view f, size_t width) -> std::optional<uint32_t> {
    if (f.size() != width) return std::nullopt;
    for (char c : f) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
        return std::nullopt;
      }
    }
    auto v = parseUnsigned(f, 16);
    if (!v) return std::nullopt;
    return static_cast<uint32_t>(*v);
  };
  Bdf b;
  if (s.size() == 7) {  // BB:DD.F
    if (s[2] != ':' || s[5] != '.') return std::nullopt;
  } else if (s.size() == 12) {
    if (s[4] != ':' || s[7] != ':' || s[10] != '.') return std::nullopt;
    auto d = hexField(s.substr(0, 4), 4);
    if (!d) return std::nullopt;
    b.domain = *d;
    s.remove_prefix(5);
  } else {
    return std::nullopt;
  }
  auto bus = hexField(s.substr(0, 2), 2);
  auto dev = hexField(s.substr(3, 2), 2);
  auto fn = hexField(s.substr(6, 1), 1);
  if (!bus || !dev || !fn || *dev > 0x1f || *fn > 7) return std::nullopt;
  b.bus = static_cast<uint8_t>(*bus);
  b.device = static_cast<uint8_t>(*dev);
  b.function = static_cast<uint8_t>(*fn);
  return b;
}

std::optional<PciId> parsePciId(std::string_view s) {
  auto parts = split(trim(s), ':');
  if (parts.size() != 2) return std::nullopt;
  auto v = parseUnsigned(parts[0], 16);
  auto d = parseUnsigned(parts[1], 16);
  if (!v || !d || *v > 0xffff || *d > 0xffff) return std::nullopt;
  return PciId{static_cast<uint16_t>(*v), static_cast<uint16_t>(*d)};
}

std::string toString(PciId id) { return hexDigits(id.vendor, 4) + ":" + hexDigits(id.device, 4); }

bool isBridge(uint32_t cls) { return baseClass(cls) == 0x06; }

bool isVfioDriver(std::string_view driver) {
  return driver == "vfio-pci" || driver.find("vfio") != std::string_view::npos;
}

bool letsVfioTakeGroup(const PciFunction& f) {
  if (!f.driver) return true;
  const std::string& d = *f.driver;
  return isVfioDriver(d) || d == "pci-stub" || d == "pcieport";
}

bool isCompanionClass(uint32_t cls) {
  uint16_t p = classPrefix(cls);
  return p == 0x0403 || p == 0x0c03 || p == 0x0c80;
}

std::string className(uint32_t cls) {
  switch (classPrefix(cls)) {
    case 0x0300:
      return "VGA controller";
    case 0x0302:
      return "3D controller";
    case 0x0403:
      return "audio device";
    case 0x0c03:
      return "USB controller";
    case 0x0c80:
      return "serial bus controller";
    case 0x0108:
      return "NVMe controller";
    case 0x0106:
      return "SATA controller";
    case 0x0104:
      return "RAID controller";
    case 0x0200:
      return "Ethernet controller";
    case 0x0207:
      return "InfiniBand controller";
    case 0x0604:
      return "PCI bridge";
    case 0x0600:
      return "host bridge";
    case 0x0680:
      return "bridge";
    default:
      break;
  }
  switch (baseClass(cls)) {
    case 0x01:
      return "storage controller";
    case 0x02:
      return "network controller";
    case 0x03:
      return "display controller";
    case 0x04:
      return "multimedia device";
    case 0x06:
      return "bridge";
    case 0x0c:
      return "serial bus controller";
    default:
      return "device";
  }
}

std::optional<PciModalias> parsePciModalias(std::string_view text) {
  text = trim(text);
  size_t at = 0;
  bool ok = true;
  // The next field: its tag, then exactly `width` hex digits (from_chars takes no sign, space or
  // 0x prefix, so the whole slice must be digits).
  auto field = [&](std::string_view tag, size_t width) -> uint32_t {
    if (!ok || text.substr(at, tag.size()) != tag || text.size() - at - tag.size() < width) {
      ok = false;
      return 0;
    }
    const char* first = text.data() + at + tag.size();
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(first, first + width, v, 16);
    ok = ec == std::errc() && end == first + width;
    at += tag.size() + width;
    return v;
  };
  const uint32_t vendor = field("pci:v", 8);
  const uint32_t device = field("d", 8);
  const uint32_t subVendor = field("sv", 8);
  const uint32_t subDevice = field("sd", 8);
  const uint32_t base = field("bc", 2);
  const uint32_t sub = field("sc", 2);
  const uint32_t progIf = field("i", 2);
  if (!ok || at != text.size() || vendor > 0xffff || device > 0xffff || subVendor > 0xffff ||
      subDevice > 0xffff)
    return std::nullopt;
  return PciModalias{{static_cast<uint16_t>(vendor), static_cast<uint16_t>(device)},
                     {static_cast<uint16_t>(subVendor), static_cast<uint16_t>(subDevice)},
                     base << 16 | sub << 8 | progIf};
}

std::optional<std::string> parseDriverOverride(std::string_view raw) {
  auto t = trim(raw);
  if (t.empty() || t == "(null)") return std::nullopt;
  return std::string(t);
}

std::optional<bool> configAnswers(std::string_view config) {
  if (config.size() < 2) return std::nullopt;
  return !(static_cast<unsigned char>(config[0]) == 0xff &&
           static_cast<unsigned char>(config[1]) == 0xff);
}

std::string joinBdfs(const std::vector<Bdf>& bdfs) {
  std::string out;
  for (const auto& b : bdfs) out += (out.empty() ? "" : ", ") + b.str();
  return out;
}

}  // namespace hostprep
