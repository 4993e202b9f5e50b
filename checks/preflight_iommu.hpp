// Preflight checks of the IOMMU: the firmware's table, the kernel's groups, the kernel arguments
// that turn it on, and interrupt remapping (without it vfio_iommu_type1 refuses to attach).
#pragma once

#include "checks/preflight.hpp"

namespace hostprep {

CheckResult checkIommuFirmware(const PlatformFacts& p, const Snapshot* s, Mode mode);
CheckResult checkIommuKernel(const PlatformFacts& p, const Snapshot* s, const Cmdline& running,
                             const BootConfig& boot, Mode mode);
// cmdline.iommu: the running kernel's IOMMU argument, and whether the next boot keeps it.
CheckResult checkCmdlineIommu(const PlatformFacts& p, const Snapshot* s, const Cmdline& running,
                              const BootConfig& boot, Mode mode);
CheckResult checkIommuPt(const PlatformFacts& p, const Cmdline& running, const BootConfig& boot,
                         Mode mode);
CheckResult checkInterruptRemapping(const PlatformFacts& p, const Cmdline& running,
                                    const BootConfig& boot, Mode mode);

}  // namespace hostprep
