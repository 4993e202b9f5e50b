// Preflight checks of kernel modules: vfio, the vGPU manager, the host driver, nouveau, and
// whether lockdown lets an unsigned NVIDIA module load. The module checks take one kernel's module
// facts, so that the image checks (checks/image.cpp) run them for every installed kernel.
#pragma once

#include <map>
#include <string>

#include "checks/preflight.hpp"

namespace hostprep {

CheckResult checkVfioModules(const std::map<std::string, ModuleFacts>& mods,
                             const std::string& release, Mode mode);
CheckResult checkVgpuModules(const std::map<std::string, ModuleFacts>& mods, Mode mode);
// modules.host-driver; with `operatorDriver` (the GPU Operator's driver container provides the
// module) a module this kernel's tree lacks is INFO, not WARN.
CheckResult checkHostDriver(const std::map<std::string, ModuleFacts>& mods,
                            const std::string& driver, Mode mode, bool operatorDriver = false);
// modules.vgpu-firmware: vm-vgpu; the GSP firmware of the vGPU manager's version is installed
// (lib/firmware/nvidia/<version>/gsp_*.bin; the version from the loaded nvidia module).
CheckResult checkVgpuFirmware(const PlatformFacts& p, Mode mode);
// modules.nouveau: loaded, or built in and driving a device (the snapshot shows it).
CheckResult checkNouveauLoaded(const PlatformFacts& p, const Snapshot* s, const BootConfig& boot);
// kernel.lockdown: lockdown, Secure Boot or forced signatures refuse an unsigned NVIDIA module.
CheckResult checkLockdown(const PlatformFacts& p, Mode mode, const std::string& hostDriver);

// The exact lines that keep nouveau off the GPUs.
std::string nouveauBlacklistRemedy();

}  // namespace hostprep
