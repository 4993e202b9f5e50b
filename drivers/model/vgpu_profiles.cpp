#include "drivers/model/vgpu_profiles.hpp"

#include "drivers/common/text.hpp"

namespace hostprep {

extern const char* const kEmbeddedVgpuProfiles;  // generated from drivers/data/vgpu-profiles.txt

std::optional<int> VgpuProfileTable::maxInstances(std::string_view type) const {
  for (const auto& [name, n] : maxPerGpu) {
    if (name == type) return n;
  }
  return std::nullopt;
}

std::vector<VgpuDefault> VgpuProfileTable::defaultsFor(PciId id) const {
  std::vector<VgpuDefault> out;
  for (const auto& d : defaults) {
    if (d.device == id) out.push_back(d);
  }
  return out;
}

VgpuProfileTable parseVgpuProfiles(std::string_view text) {
  // No GPU holds more vGPUs than this; a larger count is a typo, and must not wrap into an int.
  constexpr uint64_t kMaxCount = 4096;
  VgpuProfileTable t;
  for (auto raw : splitLines(text)) {
    auto line = trim(raw);
    if (line.empty() || startsWith(line, "#")) continue;
    // "default config ('default' key): device-filter 0x223610DE (GA102GL [A10]) -> A10-12Q x 2"
    if (startsWith(line, "default config")) {
      auto f = line.find("device-filter 0x");
      auto arrow = line.find("-> ");
      if (f == std::string_view::npos || arrow == std::string_view::npos) continue;
      auto filter = parseUnsigned(line.substr(f + 16, 8), 16);
      auto rhs = splitWords(line.substr(arrow + 3));
      if (!filter || rhs.size() != 3 || rhs[1] != "x") continue;
      auto count = parseUnsigned(rhs[2]);
      if (!count || *count > kMaxCount) continue;
      PciId id{static_cast<uint16_t>(*filter & 0xffff), static_cast<uint16_t>(*filter >> 16)};
      t.defaults.push_back({id, std::string(rhs[0]), static_cast<int>(*count)});
      continue;
    }
    // "Q-series: A10-1Q=24, A10-2Q=12" / "C-series: ..." / "MIG-backed: ..."
    auto colon = line.find(": ");
    if (colon == std::string_view::npos) continue;
    auto head = line.substr(0, colon);
    if (!(endsWith(head, "-series") || head == "MIG-backed")) continue;
    for (auto item : split(line.substr(colon + 2), ',')) {
      auto eq = item.find('=');
      if (eq == std::string_view::npos) continue;
      auto n = parseUnsigned(item.substr(eq + 1));
      auto name = trim(item.substr(0, eq));
      if (n && *n <= kMaxCount && !name.empty())
        t.maxPerGpu.emplace_back(std::string(name), static_cast<int>(*n));
    }
  }
  return t;
}

const VgpuProfileTable& vgpuProfiles() {
  static const VgpuProfileTable table = parseVgpuProfiles(kEmbeddedVgpuProfiles);
  return table;
}

}  // namespace hostprep
