// Preflight check of iommufd and the VFIO device files (Linux 6.6+: /dev/iommu, CONFIG_IOMMUFD;
// /dev/vfio/devices/vfioN, CONFIG_VFIO_DEVICE_CDEV; Documentation/driver-api/vfio.rst "VFIO
// Device cdev" and Documentation/userspace-api/iommufd.rst). VMMs use them when present (QEMU's
// iommufd backend, KubeVirt, NVIDIA's DRA driver); without them a VM uses the VFIO group
// interface (/dev/vfio/<group>), so this check never fails a node.
#pragma once

#include "checks/preflight.hpp"

namespace hostprep {

// iommu.iommufd: INFO where the kernel has neither; PASS where it has them and every selected
// function on vfio-pci has its device file; WARN (with the remedy) where the kernel config has
// them but /dev/iommu or a device file is missing. `sel` may be null (no snapshot).
CheckResult checkIommufd(const PlatformFacts& p, const Snapshot* s, const Selection* sel,
                         Mode mode);

// The same for an image root: what each installed kernel's config says.
CheckResult checkImageIommufd(const std::vector<ImageKernel>& kernels, Mode mode);

}  // namespace hostprep
