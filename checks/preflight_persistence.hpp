// Preflight check that the mode survives a reboot: what hands the GPUs to vfio-pci at boot (or
// keeps them off it), judged from the boot configuration. Shared with the image checks.
#pragma once

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

}  // namespace hostprep
