#include "checks/resource_kinds.hpp"

#include <algorithm>
#include <array>

#include "drivers/common/text.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {
namespace {

struct KindNames {
  std::string_view json;   // toString
  std::string_view prose;  // kindWord
};
// Indexed by ResourceKind.
constexpr std::array<KindNames, 4> kKindNames{{
    {"container", "container"},
    {"passthrough", "passthrough"},
    {"vgpu", "vGPU"},
    {"other", "other"},
}};

// Indexed by Mode.
constexpr std::array<std::string_view, 3> kModeRules{
    "a container node advertises nvidia.com/gpu and no sandbox resources",
    "a vm-passthrough node advertises PCI-name resources such as nvidia.com/GA102GL_A10 and never "
    "nvidia.com/gpu",
    "a vm-vgpu node advertises vGPU type resources such as nvidia.com/NVIDIA_A10-12Q only",
};

// Indexed by Mode.
constexpr std::array kModeKinds{ResourceKind::kContainer, ResourceKind::kPassthrough,
                                ResourceKind::kVgpu};

bool isUpperAlnum(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool isAlnum(char c) { return isUpperAlnum(c) || (c >= 'a' && c <= 'z'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isLowerHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f'); }

// vgpu-device-manager's type names: time-sliced "<GPU>-<GB><Series>" ("A10-4Q", "H200X-141C"),
// MIG-backed "<GPU>-<G>-<GB>C[ME|NOME|MEALL|GFX]" ("A100-1-5C", "A100-1-5CME").
bool isVgpuTypeName(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && isAlnum(s[i])) ++i;
  if (i == 0) return false;
  int groups = 0;
  while (i < s.size() && s[i] == '-') {
    size_t start = ++i;
    while (i < s.size() && isDigit(s[i])) ++i;
    if (i == start) return false;
    ++groups;
  }
  if (groups < 1 || groups > 2 || i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < 'A' || s[i] > 'Z') return false;
  }
  return true;
}

std::string_view stripVendorPrefix(std::string_view suffix) {
  for (std::string_view p : {"NVIDIA_", "GRID_"}) {
    if (startsWith(suffix, p)) return suffix.substr(p.size());
  }
  return suffix;
}

}  // namespace

std::string_view toString(ResourceKind k) { return kKindNames[static_cast<size_t>(k)].json; }
std::string_view kindWord(ResourceKind k) { return kKindNames[static_cast<size_t>(k)].prose; }
std::string_view modeRule(Mode m) { return kModeRules[static_cast<size_t>(m)]; }

ResourceKind kindOfMode(Mode m) { return kModeKinds[static_cast<size_t>(m)]; }

std::optional<uint16_t> rawDeviceId(std::string_view resource) {
  if (!startsWith(resource, kResourcePrefix)) return std::nullopt;
  auto s = resource.substr(kResourcePrefix.size());
  if (s.size() != 4 || !std::all_of(s.begin(), s.end(), isLowerHex)) return std::nullopt;
  return static_cast<uint16_t>(*parseUnsigned(s, 16));
}

ResourceKind classifyResource(std::string_view name) {
  if (!startsWith(name, kResourcePrefix)) return ResourceKind::kOther;
  auto s = name.substr(kResourcePrefix.size());
  if (s.empty()) return ResourceKind::kOther;
  if (s == "gpu" || s == "gpu.shared" || startsWith(s, "mig-")) return ResourceKind::kContainer;
  // A PCI name is sanitized to [A-Z0-9_.]: a '-' only ever appears in a vGPU type.
  if (s.find('-') != std::string_view::npos) {
    return isVgpuTypeName(stripVendorPrefix(s)) ? ResourceKind::kVgpu : ResourceKind::kOther;
  }
  if (rawDeviceId(name)) return ResourceKind::kPassthrough;
  bool pciName = std::all_of(s.begin(), s.end(),
                             [](char c) { return isUpperAlnum(c) || c == '_' || c == '.'; });
  return pciName ? ResourceKind::kPassthrough : ResourceKind::kOther;
}

std::optional<std::string> vgpuTypeOf(std::string_view resource) {
  if (classifyResource(resource) != ResourceKind::kVgpu) return std::nullopt;
  return std::string(stripVendorPrefix(resource.substr(kResourcePrefix.size())));
}

std::optional<int64_t> parseCount(const nlohmann::json& v) {
  if (v.is_number_integer()) {
    auto n = v.get<int64_t>();
    return n >= 0 ? std::optional<int64_t>(n) : std::nullopt;
  }
  if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
  if (!v.is_string()) return std::nullopt;
  std::string_view s = trim(v.get_ref<const std::string&>());
  int64_t mul = 1;
  if (endsWith(s, "k"))
    mul = 1000, s.remove_suffix(1);
  else if (endsWith(s, "M"))
    mul = 1000'000, s.remove_suffix(1);
  auto n = parseUnsigned(s);
  if (!n || *n > (uint64_t{1} << 40)) return std::nullopt;
  return static_cast<int64_t>(*n) * mul;
}

}  // namespace hostprep
