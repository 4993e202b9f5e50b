// Preflight check that the mode survives a reboot: what hands the GPUs to vfio-pci at boot (or
// keeps them off it), judged from the boot configuration. Shared with the image checks.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checks/preflight.hpp"
#include "checks/preflight_cmdline.hpp"

namespace hostprep {

// The mode's boot persistence, from the boot configuration (and the running cmdline, if any).
// `targets` are the ids the mode must hand to vfio-pci at boot (GPUs and companions).
CheckResult checkBootPersistence(Mode mode, const BootConfig& boot,
                                 const std::vector<CmdlineView>& cmdlines,
                                 const std::vector<PciId>& targets,
                                 const std::optional<KernelConfig>& config,
                                 const std::string& hostDriver);

// A mixed node: `targets` holds the ids of each mode's functions (GPUs and companions). vfio-pci
// ids name every device with the id, so an id that vm-passthrough functions share with
// functions in another mode cannot hand out only the passthrough ones: then
// hostprep-prepare.service (driver_override at boot) is the mechanism, and the check asks for
// it to be enabled. Without a shared id, vfio-pci ids for the passthrough ids (what 'hostprep
// persist' writes) or the unit will do, as in vm-passthrough mode. A vm-vgpu part needs the
// unit; ids that would hand the other modes' GPUs to vfio-pci are a warning.
CheckResult checkBootPersistenceSplit(const std::map<Mode, std::vector<PciId>>& targets,
                                      const BootConfig& boot,
                                      const std::vector<CmdlineView>& cmdlines,
                                      const std::optional<KernelConfig>& config,
                                      const std::string& hostDriver);

}  // namespace hostprep
