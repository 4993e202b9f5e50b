#include "checks/preflight_cmdline.hpp"

#include <algorithm>

#include "drivers/common/text.hpp"

namespace hostprep {

bool paramTruthy(std::string_view v) {
  if (v.empty()) return false;
  switch (v[0]) {
    case 'y':
    case 'Y':
    case 't':
    case 'T':
    case '1':
      return true;
    case 'o':
    case 'O':
      return v.size() > 1 && (v[1] == 'n' || v[1] == 'N');
    default:
      return false;
  }
}

std::optional<std::string> intremapOffArg(const Cmdline& c) {
  std::optional<std::string> off;
  for (const auto& [key, value] : c.params) {
    if (key == "nointremap") off = "nointremap";
    if (key != "intremap" || !value) continue;
    for (auto part : split(*value, ',')) {
      const auto opt = trim(part);
      if (opt == "on") off.reset();
      if (opt == "off") off = "intremap=" + *value;
    }
  }
  return off;
}

std::vector<CmdlineView> configuredCmdlines(const BootConfig& boot) {
  std::vector<CmdlineView> out;
  for (const auto& c : boot.cmdlines) out.push_back({c.origin, c.args});
  return out;
}

namespace {
bool hasSource(const BootConfig& boot, std::string_view prefix) {
  return std::any_of(boot.cmdlines.begin(), boot.cmdlines.end(),
                     [&](const CmdlineSource& c) { return startsWith(c.origin, prefix); });
}
bool hasLoaderEntries(const BootConfig& boot) {
  return std::any_of(boot.cmdlines.begin(), boot.cmdlines.end(), [](const CmdlineSource& c) {
    return c.origin.find("loader/entries/") != std::string::npos;
  });
}
}  // namespace

std::string addKernelArgsRemedy(std::string_view args, const BootConfig& boot) {
  const std::string a(args);
  const std::string grub = "add \"" + a +
                           "\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run update-grub "
                           "(or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot";
  const std::string kernelInstall = "add \"" + a +
                                    "\" to /etc/kernel/cmdline, then run 'kernel-install add "
                                    "$(uname -r) /boot/vmlinuz-$(uname -r)' (Proxmox: "
                                    "proxmox-boot-tool refresh) and reboot";
  const std::string bls = "run grubby --update-kernel=ALL --args=\"" + a + "\" and reboot";
  const bool g = hasSource(boot, "etc/default/grub");
  const bool k = hasSource(boot, "etc/kernel/cmdline");
  const bool b = hasLoaderEntries(boot);
  std::vector<std::string> parts;
  if (g || (!k && !b)) parts.push_back(grub);
  if (k) parts.push_back(kernelInstall);
  if (b && g) {
    parts.push_back("on Boot Loader Specification entries (boot/loader/entries) also " + bls);
  } else if (b && !k) {
    parts.push_back(bls);
  }
  if (parts.size() == 1) return parts[0];
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += "; " + parts[i];
  return out;
}

std::string removeKernelArgRemedy(std::string_view arg, const BootConfig& boot) {
  const std::string a(arg);
  std::vector<std::string> where;
  for (const auto& c : boot.cmdlines) {
    auto eq = a.find('=');
    const std::string key = a.substr(0, eq);
    if (cmdlineHas(c.args, key)) where.push_back(c.origin);
  }
  std::string in = where.empty()
                       ? "the boot loader configuration (GRUB_CMDLINE_LINUX in /etc/default/grub)"
                       : join(where, ", ");
  return "remove \"" + a + "\" from " + in +
         ", regenerate the boot configuration (update-grub, or grub2-mkconfig -o "
         "/boot/grub2/grub.cfg, or "
         "grubby --update-kernel=ALL --remove-args=\"" +
         a + "\") and reboot";
}

namespace {

// Every comma-separated option of every occurrence of `key`, in command-line order, each with
// the whole value it came from.
struct CmdlineOption {
  std::string option;
  std::string value;
};
std::vector<CmdlineOption> cmdlineOptions(const Cmdline& c, const char* key) {
  std::vector<CmdlineOption> out;
  for (const auto& v : cmdlineValues(c, key)) {
    for (auto part : split(v, ',')) out.push_back({std::string(trim(part)), v});
  }
  return out;
}

// Whether intel_iommu= leaves the Intel IOMMU on (true), off (false) or unsaid, and the value
// that said it last.
std::pair<std::optional<bool>, std::string> intelIommuSetting(const Cmdline& c) {
  std::pair<std::optional<bool>, std::string> out;
  for (const auto& o : cmdlineOptions(c, "intel_iommu")) {
    if (o.option == "on" || o.option == "off") out = {o.option == "on", o.value};
  }
  return out;
}

// The first value of `key` with an "off" option, as "key=value".
std::optional<std::string> offOption(const Cmdline& c, const char* key) {
  for (const auto& o : cmdlineOptions(c, key)) {
    if (o.option == "off") return std::string(key) + "=" + o.value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> iommuOffArg(const Cmdline& c, IommuVendor vendor) {
  if (vendor != IommuVendor::kAmd) {
    if (auto [on, value] = intelIommuSetting(c); on == false) return "intel_iommu=" + value;
  }
  if (vendor != IommuVendor::kIntel) {
    if (auto off = offOption(c, "amd_iommu")) return off;
  }
  return offOption(c, "iommu");
}

bool intelIommuOn(const Cmdline& c) { return intelIommuSetting(c).first == true; }

bool iommuPassthrough(const Cmdline& c, bool arm64) {
  if (arm64) {
    auto v = cmdlineValue(c, "iommu.passthrough");
    return v && paramTruthy(*v);
  }
  bool pt = false;
  for (const auto& o : cmdlineOptions(c, "iommu")) {
    if (o.option == "pt" || o.option == "nopt") pt = o.option == "pt";
  }
  if (pt) return true;
  auto v = cmdlineValue(c, "iommu.passthrough");
  return v && paramTruthy(*v);
}

}  // namespace hostprep
