#include "checks/preflight_cmdline.hpp"

#include <algorithm>

#include "drivers/text.hpp"

namespace hostprep {

bool paramTruthy(std::string_view v) { return v == "1" || v == "Y" || v == "y" || v == "on"; }

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

std::optional<std::string> iommuOffArg(const Cmdline& c) {
  if (auto v = cmdlineValue(c, "intel_iommu")) {
    for (auto part : split(*v, ',')) {
      if (trim(part) == "off") return "intel_iommu=" + *v;
    }
  }
  if (auto v = cmdlineValue(c, "amd_iommu"); v && *v == "off") return "amd_iommu=off";
  if (auto v = cmdlineValue(c, "iommu"); v && *v == "off") return "iommu=off";
  return std::nullopt;
}

bool intelIommuOn(const Cmdline& c) {
  auto v = cmdlineValue(c, "intel_iommu");
  if (!v) return false;
  bool on = false;
  for (auto part : split(*v, ',')) {
    auto p = trim(part);
    if (p == "on") on = true;
    if (p == "off") return false;
  }
  return on;
}

bool iommuPassthrough(const Cmdline& c) {
  if (auto v = cmdlineValue(c, "iommu"); v && *v == "pt") return true;
  if (auto v = cmdlineValue(c, "iommu.passthrough"); v && paramTruthy(*v)) return true;
  return false;
}

}  // namespace hostprep
