// Image preflight: the same prerequisites, judged from an image root's configuration instead of
// a running kernel (hostprep preflight --image --root /mnt/image). The boot loader's kernel
// command line, modprobe.d, the modules loaded at boot and the installed kernels' configs and
// module indexes are checked; what needs the hardware (CPU flags, ACPI tables, IOMMU groups,
// SR-IOV, framebuffers) is SKIP with the reason. This is the gate an image pipeline runs.
#pragma once

#include <vector>

#include "checks/preflight.hpp"
#include "drivers/model/platform.hpp"
#include "drivers/published/bootconfig.hpp"

namespace hostprep {

struct ImageFacts {
  const BootConfig& boot;
  const std::vector<ImageKernel>& kernels;
};

// Runs every check against an image root. Check ids are the same as on a live host.
PreflightReport preflightImage(const ImageFacts& facts, const PreflightRequest& req);

}  // namespace hostprep
