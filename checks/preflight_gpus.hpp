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
// gpu.bars: vm-passthrough; GPUs whose BARs need 64-bit MMIO above 4 GiB, and how large a
// 64-bit PCI window the VM needs (QEMU's q35 and OVMF default to 32 GiB; kubevirt/kubevirt issue
// 11093: the guest driver then finds "BAR0 is 0M @ 0x0").
CheckResult checkLargeBars(const Snapshot* s, const Selection* sel, Mode mode);

}  // namespace hostprep
