// Kernel arguments, as preflight reads them and as it tells users to change them. Shared by the
// live-host checks and the image checks (checks/image.cpp): both judge the boot loader's command
// lines and both hand out the same remedies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/bootconfig.hpp"
#include "drivers/parsers.hpp"

namespace hostprep {

// A kernel command line as one boot configuration source has it.
struct CmdlineView {
  std::string origin;  // "running kernel (/proc/cmdline)", "etc/default/grub (...)"
  Cmdline args;
};
std::vector<CmdlineView> configuredCmdlines(const BootConfig& boot);

// The exact instruction to add kernel arguments, for the boot loader the configuration shows
// (GRUB by default; kernel-install's /etc/kernel/cmdline; BLS entries via grubby).
std::string addKernelArgsRemedy(std::string_view args, const BootConfig& boot);
std::string removeKernelArgRemedy(std::string_view arg, const BootConfig& boot);

// Does the argument turn the IOMMU off ("intel_iommu=off", "amd_iommu=off", "iommu=off")?
std::optional<std::string> iommuOffArg(const Cmdline& c);
bool intelIommuOn(const Cmdline& c);      // intel_iommu=on (also "on,sm_on" lists)
bool iommuPassthrough(const Cmdline& c);  // iommu=pt or iommu.passthrough=1

// A boolean kernel or module parameter that is set: "1", "Y", "y" or "on".
bool paramTruthy(std::string_view v);

}  // namespace hostprep
