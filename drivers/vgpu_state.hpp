// What vGPU devices exist on the host, read from sysfs (reading only: creating them is the vGPU
// engineer's drivers/vgpu code). Two interfaces exist (DOMAIN.md §2, §3):
// - mdev: sys/bus/mdev/devices/<uuid> links to <parent PCI function>/<uuid>; its mdev_type/name
//   is the type name ("NVIDIA A10-12Q", "GRID T4-4Q").
// - per-VF (vGPU 17+, kernel 6.8+): <VF>/nvidia/current_vgpu_type holds the active type id
//   (0 = none) and <VF>/nvidia/creatable_vgpu_types lists "ID : NAME" lines.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/host.hpp"
#include "drivers/pci.hpp"
#include "drivers/snapshot.hpp"
#include "drivers/vgpu.hpp"

namespace hostprep {

// A vGPU device as the status reports it; `parent` is unset for an mdev whose parent is not a PCI
// function (the mtty sample, say).
struct ObservedVgpu {
  VgpuInterface interface = VgpuInterface::kMdev;
  std::string uuid;           // mdev UUID; empty for a per-VF vGPU
  std::optional<Bdf> parent;  // the PCI function it lives on (PF on Turing, VF on Ampere+)
  std::string typeId;         // mdev type directory ("nvidia-558") or per-VF type id ("1428")
  std::string typeName;       // "NVIDIA A10-12Q"; for a per-VF id with no listed name, the id
};

struct VgpuState {
  std::vector<ObservedVgpu> devices;  // mdev devices by UUID, then per-VF by BDF
  // PCI functions that offer vGPU types (mdev_supported_types or nvidia/creatable_vgpu_types):
  // the mark of the vGPU host driver.
  std::vector<Bdf> vgpuCapable;
};

// Reads every vGPU device of the host. Absent directories mean "no vGPU", never an error.
VgpuState readVgpuState(const Host& host, const Snapshot& s);

}  // namespace hostprep
