// Preflight checks of the selected GPUs: present, isolated in their IOMMU groups, SR-IOV for
// vGPU, and not held by a firmware framebuffer.
#pragma once

#include <string>

#include "checks/preflight.hpp"

namespace hostprep {

CheckResult checkGpusPresent(const Snapshot* s, const std::string& snapErr, const Selection* sel,
                             const SelectionOptions& opt);
CheckResult checkGroups(const Snapshot* s, const Selection* sel, Mode mode);
CheckResult checkSriov(const Snapshot* s, const Selection* sel, Mode mode);
CheckResult checkBootVga(const PlatformFacts& p, const Snapshot* s, const Selection* sel,
                         const BootConfig& boot, Mode mode);

}  // namespace hostprep
