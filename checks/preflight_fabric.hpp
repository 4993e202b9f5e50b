// Preflight check of the NVLink fabric on HGX/DGX systems: the NVSwitches and NVIDIA Fabric
// Manager's FABRIC_MODE against the workload mode.
#pragma once

#include "checks/preflight.hpp"

namespace hostprep {

// gpu.fabric: SKIP without NVSwitches. vm-passthrough with FABRIC_MODE 0 passes the NVSwitches
// through with the GPUs (and no Fabric Manager may hold them on the host); with 1 they stay on
// nvidia and Fabric Manager runs on the host; vm-vgpu needs 2 (otherwise cuInit fails with
// error 802 in the guests, NVIDIA/gpu-operator issue 2923).
CheckResult checkFabric(const PlatformFacts& p, const Snapshot* s, Mode mode,
                        std::string_view hostDriver = "nvidia");

}  // namespace hostprep
