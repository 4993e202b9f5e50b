#include "drivers/published/status_reads.hpp"

#include <cerrno>

#include "drivers/common/text.hpp"
#include "drivers/seam/state_file.hpp"

namespace hostprep {

std::string readNodeName(const Host& host) {
  for (const char* p : {"proc/sys/kernel/hostname", "etc/hostname"}) {
    auto n = readTrimmed(host, p);
    if (n && !n->empty()) return *n;
  }
  return {};
}

std::optional<std::string> readPciIds(const Host& host) {
  for (const char* p : {"usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids"}) {
    if (auto t = host.read(p, 16u << 20)) return *t;
  }
  return std::nullopt;
}

std::vector<DeviceRule> LastMode::rules() const {
  std::vector<DeviceRule> out;
  for (const auto& [bdf, m] : gpus) {
    DeviceMatch match;
    match.bdf = bdf;
    out.push_back({match, m});
  }
  return out;
}

std::string formatLastMode(const LastMode& m) {
  std::string out = std::string(toString(m.mode)) + "\n";
  for (const auto& [bdf, mode] : m.gpus)
    out += bdf.str() + " " + std::string(toString(mode)) + "\n";
  return out;
}

Result<LastMode> parseLastMode(std::string_view text, std::string_view file) {
  const std::string advice =
      "remove the file; the next 'hostprep prepare' or 'hostprep agent' writes it again";
  auto bad = [&](size_t line, const std::string& what) {
    return Error{std::string(file) + ": line " + std::to_string(line) + ": " + what, 0, advice};
  };
  std::optional<LastMode> out;
  const auto lines = splitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto words = splitWords(lines[i]);
    if (words.empty()) continue;
    if (!out) {  // the node's mode
      auto m = words.size() == 1 ? parseMode(words[0]) : std::nullopt;
      if (!m) return bad(i + 1, "'" + std::string(trim(lines[i])) + "' is not a mode");
      out = LastMode{*m, {}};
      continue;
    }
    auto bdf = words.size() == 2 ? parseBdf(words[0]) : std::nullopt;
    auto m = words.size() == 2 ? parseMode(words[1]) : std::nullopt;
    if (!bdf || !m) {
      return bad(i + 1, "'" + std::string(trim(lines[i])) + "' is not 'PCI-ADDRESS MODE'");
    }
    if (!out->gpus.emplace(*bdf, *m).second) return bad(i + 1, bdf->str() + " is listed twice");
  }
  if (!out) return Error{std::string(file) + ": empty, no mode", 0, advice};
  return *out;
}

Result<std::optional<LastMode>> readLastMode(const Host& host) {
  auto text = host.read(kLastModePath, 1u << 20);
  if (!text) {
    if (text.error().err == ENOENT) return std::optional<LastMode>{};
    return sysError("cannot read " + host.resolve(kLastModePath).string(), text.error().err);
  }
  auto m = parseLastMode(*text, "/" + std::string(kLastModePath));
  if (!m) return m.error();
  return std::optional<LastMode>{*m};
}

Status writeLastMode(Host& host, const LastMode& m) {
  return writeStateFile(host, kLastModePath, formatLastMode(m));
}

}  // namespace hostprep
