// Preflight check of confidential computing, when the node asks for it (config key cc-mode):
// the host's confidential-VM technology and the GPUs' CC support.
#pragma once

#include <optional>

#include "checks/preflight.hpp"

namespace hostprep {

// Which GPUs can run in CC mode, by PCI device id (NVIDIA: Hopper and newer). The ranges follow
// the NVIDIA entries of the PCI ID Repository (pci.ids): 0x2300-0x23ff GH100/GH200 (H100 0x2330
// 0x2331, H800 0x2322, H200 0x2335, GH200 0x2342), 0x2900 and up Blackwell (GB100/GB102 B200
// 0x2901, GB202 0x2bxx) and later; below: Ampere (GA10x 0x20xx-0x25xx) and Ada (AD10x
// 0x26xx-0x28xx), which have no CC mode.
enum class CcCapable { kNo, kHopper, kBlackwell };
CcCapable ccCapable(PciId id);

// gpu.cc: SKIP unless CC is asked for (and in container mode: CC runs in confidential VMs). TDX
// (kvm_intel tdx=Y) or SEV-SNP (kvm_amd sev_snp=Y) must be enabled, and every selected GPU CC
// capable.
CheckResult checkConfidentialComputing(const PlatformFacts& p, const Snapshot* s,
                                       const Selection* sel, Mode mode, CcMode cc);

}  // namespace hostprep
