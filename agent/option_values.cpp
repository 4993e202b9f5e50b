#include "agent/option_values.hpp"

#include <cctype>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"

namespace hostprep {
namespace {

// "<where>: '<value>' is not <what>" with the advice; the value quoted (it is untrusted text).
Error isNot(std::string_view where, std::string_view text, std::string_view what,
            std::string advice) {
  return usageError(
      std::string(where) + ": '" + quoteUntrusted(text) + "' is not " + std::string(what),
      std::move(advice));
}

bool hasControl(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

bool isAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

}  // namespace

Result<Mode> parseModeValue(std::string_view where, std::string_view text) {
  if (auto m = parseMode(text)) return *m;
  return isNot(where, text, "a mode", "choose one of " + std::string(kModeChoices));
}

Result<CcMode> parseCcModeValue(std::string_view where, std::string_view text) {
  if (auto m = parseCcMode(text)) return *m;
  return isNot(where, text, "a CC mode", "choose one of " + std::string(kCcModeChoices));
}

Result<NvSwitchPolicy> parseNvSwitchValue(std::string_view where, std::string_view text) {
  if (auto p = parseNvSwitchPolicy(text)) return *p;
  return isNot(where, text, "an NVSwitch policy", "choose one of " + std::string(kNvSwitchChoices));
}

Result<DriverProvider> parseDriverProviderValue(std::string_view where, std::string_view text) {
  if (auto p = parseDriverProvider(text)) return *p;
  return isNot(where, text, "a host driver provider",
               "choose one of " + std::string(kDriverProviderChoices));
}

Result<PciId> parsePciIdValue(std::string_view where, std::string_view text) {
  if (auto id = parsePciId(text)) return *id;
  return isNot(where, text, "a vendor:device id", "write VVVV:DDDD in hex, e.g. 10de:2236");
}

Result<Bdf> parseBdfValue(std::string_view where, std::string_view text) {
  if (auto b = parseBdf(text)) return *b;
  return isNot(where, text, "a PCI address", "write DDDD:BB:DD.F, e.g. 0000:3b:00.0");
}

Result<std::string> parseDriverValue(std::string_view where, std::string_view text) {
  if (auto s = checkDriverName(where, text); !s) return s.error();
  return std::string(text);
}

Result<std::string> parseHolderNodes(std::string_view where, std::string_view text) {
  if (!startsWith(text, "/dev/") || text.size() > 255 ||
      text.find("..") != std::string_view::npos || hasControl(text)) {
    return isNot(where, text, "a /dev pattern", "write a glob under /dev, e.g. /dev/nvidia*");
  }
  return std::string(text);
}

std::string holderGlob(std::string_view holderNodes, std::string_view hostDriver) {
  if (!holderNodes.empty()) return std::string(holderNodes);
  return "/dev/" + std::string(hostDriver) + "*";
}

Result<std::string> parseVgpuConfigName(std::string_view where, std::string_view text) {
  bool ok = !text.empty() && text.size() <= 63 && isAlnum(text.front()) && isAlnum(text.back());
  for (char c : text) ok = ok && (isAlnum(c) || c == '-' || c == '_' || c == '.');
  if (!ok) {
    return isNot(where, text, "a config name",
                 "use a label value: at most 63 letters, digits, '-', '_' and '.', beginning "
                 "and ending with a letter or digit");
  }
  return std::string(text);
}

Result<std::string> parseHostFilePath(std::string_view where, std::string_view text) {
  bool dots = false;
  for (auto part : split(text, '/')) dots = dots || part == "..";
  const bool wellFormed =
      !text.empty() && text.back() != '/' && !dots && !hasControl(text) && text.size() <= 4096;
  if (wellFormed && text.front() == '/') return std::string(text);
  // The example is the value made absolute where that is all it lacks (run/x.json), else none:
  // never a path of another option's kind.
  std::string advice = "write a file's absolute path under --root, without '..'";
  if (wellFormed) advice += ", e.g. /" + std::string(text);
  return isNot(where, text, "an absolute file path", advice);
}

}  // namespace hostprep
