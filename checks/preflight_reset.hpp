// Preflight check of the way back from a VM: can each selected GPU and companion be reset before
// it goes back to its host driver, and what on this host makes that return risky.
#pragma once

#include "checks/preflight.hpp"

namespace hostprep {

// gpu.reset (vm-passthrough, vm-vgpu; SKIP in container mode and on an image): per selected
// function (GPUs, NVSwitches, companions; not VFs) how `prepare` can reset it on its way back from
// a VM (drivers/reset.hpp resetOptionOf, its IOMMU group moving with it): its own reset methods
// (`reset_method`, Linux 5.15+; before that the presence of `reset`), or a secondary bus reset
// through its bridge. INFO listing them; WARN for a function without any, with what would give it
// one. Also named where the host shows them: GPUs whose `d3cold_allowed` is 1 while vfio-pci's
// `disable_idle_d3` is N (vfio-pci then puts an idle GPU in D3, D3cold where the platform can cut
// the slot's power), and WARN for such a GPU that `power_state` shows in D3cold.
CheckResult checkReset(const PlatformFacts& p, const Snapshot* s, const Selection* sel, Mode mode);

}  // namespace hostprep
