// Preflight checks of the CPU: virtualization extensions and KVM.
#pragma once

#include "checks/preflight.hpp"

namespace hostprep {

// cpu.virtualization: vmx or svm in /proc/cpuinfo (a VM without nested virtualization has none).
CheckResult checkCpu(const PlatformFacts& p, Mode mode);
// cpu.kvm: /dev/kvm, else whether kvm_intel/kvm_amd could be loaded.
CheckResult checkKvm(const PlatformFacts& p, Mode mode);

}  // namespace hostprep
