// Kernel arguments, as preflight reads them and as it tells users to change them. Shared by the
// live-host checks and the image checks (checks/image.cpp): both judge the boot loader's command
// lines and both hand out the same remedies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/parsers.hpp"
#include "drivers/published/bootconfig.hpp"

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

// The IOMMU driver a host's firmware table selects: DMAR (intel-iommu, intel_iommu=), IVRS
// (amd-iommu, amd_iommu=), or unknown (an image, no tables): then both vendors' arguments count.
enum class IommuVendor { kIntel, kAmd, kAny };

// The argument that turns the IOMMU off for `vendor`, as written ("intel_iommu=off",
// "amd_iommu=pgtbl_v2,off", "iommu=off"), or nullopt. Every occurrence counts, in order:
// intel_iommu= takes the last of "on" and "off" (drivers/iommu/intel/iommu.c,
// intel_iommu_setup()); amd_iommu= has no "on" to undo an "off" (drivers/iommu/amd/init.c,
// parse_amd_iommu_options()); iommu=off (arch/x86/kernel/pci-dma.c, no_iommu) stops both.
std::optional<std::string> iommuOffArg(const Cmdline& c, IommuVendor vendor = IommuVendor::kAny);
bool intelIommuOn(const Cmdline& c);  // intel_iommu=on last (also "on,sm_on" lists)
// iommu=pt or iommu.passthrough=1, the last that says; on arm64 only iommu.passthrough=1 (iommu=pt
// is x86's, arch/x86/kernel/pci-dma.c).
bool iommuPassthrough(const Cmdline& c, bool arm64 = false);

// The argument that turns interrupt remapping off, as written ("intremap=off", "nointremap"), or
// nullopt: both apply in command-line order, and "intremap=on" undoes them
// (drivers/iommu/irq_remapping.c, setup_irqremapping() and setup_nointremap()).
std::optional<std::string> intremapOffArg(const Cmdline& c);

// A boolean kernel or module parameter that is set, as the kernel's kstrtobool() reads it
// (lib/kstrtox.c): a value starting with y, Y, t, T or 1, or "on" (any case).
bool paramTruthy(std::string_view v);

}  // namespace hostprep
