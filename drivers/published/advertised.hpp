// What the device plugins will advertise on a host, read from its snapshot and vGPU devices, and
// what KubeVirt must permit for it: the status document's `advertised` and
// `permittedHostDevices`, and the vGPU devices it lists.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"

namespace hostprep {

// A vGPU device as the status reports it; `parent` is unset for an mdev whose parent is not a PCI
// function (the mtty sample, say).
struct ObservedVgpu {
  VgpuInterface interface = VgpuInterface::kMdev;
  std::string uuid;           // mdev UUID; empty for a per-VF vGPU
  std::optional<Bdf> parent;  // the PCI function it lives on (PF on Turing, VF on Ampere+)
  std::string typeId;         // mdev type directory ("nvidia-558") or per-VF type id ("1428")
  std::string typeName;       // "NVIDIA A10-12Q"; for a per-VF id with no listed name, the id
  bool operator==(const ObservedVgpu&) const = default;
};

// The vGPU devices of the host as the status lists them: mdev devices by UUID (on any parent),
// then per-VF vGPUs by VF address.
std::vector<ObservedVgpu> observedVgpus(const VgpuHost& v);

// A GPU is a vGPU host when it, or one of its VFs, offers vGPU types (mdev types, or a per-VF
// creatable_vgpu_types file) or carries a vGPU.
bool isVgpuHost(const PciFunction& gpu, const VgpuHost& v);

// The entries of the KubeVirt CR's spec.configuration.permittedHostDevices that the node's
// sandbox resources need (kubevirt/kubevirt, staging/src/kubevirt.io/api/core/v1/types.go:
// PermittedHostDevices{pciHostDevices: []PciHostDevice{pciVendorSelector, resourceName,
// externalResourceProvider}, mediatedDevices: []MediatedHostDevice{mdevNameSelector, ...}};
// https://kubevirt.io/user-guide/compute/host-devices/). externalResourceProvider is always true:
// the sandbox device plugin (NVIDIA/kubevirt-gpu-device-plugin), not KubeVirt, advertises them.
struct PermittedDevice {
  std::string selector;      // pciVendorSelector "10DE:2236", or mdevNameSelector "NVIDIA A10-12Q"
  std::string resourceName;  // as the plugin advertises it: "nvidia.com/GA102GL_A10"
  bool operator==(const PermittedDevice&) const = default;
};
struct PermittedHostDevices {
  std::vector<PermittedDevice> pci;       // pciHostDevices, one per resource name, sorted by it
  std::vector<PermittedDevice> mediated;  // mediatedDevices, likewise
  bool empty() const { return pci.empty() && mediated.empty(); }
  bool operator==(const PermittedHostDevices&) const = default;
};

struct Advertised {
  std::map<std::string, int> resources;  // resource name -> devices
  // One entry per sandbox resource of `resources` (none for nvidia.com/gpu):
  // - pci: per passthrough resource, the VENDOR:DEVICE (upper-case hex) of the function the
  //   plugin names it after (the first vfio-bound NVIDIA function of its IOMMU group);
  // - mediated: per vGPU resource, the type name as the kernel shows it (mdev_type/name, or the
  //   per-VF type's name in creatable_vgpu_types), which KubeVirt matches mdevNameSelector to.
  // The first device of the plugin's walk gives a resource's selector.
  PermittedHostDevices permitted;
};

// What the device plugins advertise on this host (NVIDIA/kubevirt-gpu-device-plugin,
// pkg/device_plugin/), the way they compute it:
// - the sandbox plugin walks PCI functions in address order, keeps vendor 10de bound to vfio-pci
//   (or nvgrace_gpu_vfio_pci) and counts one device per IOMMU group, under the resource of the
//   first such function of the group: a vfio-bound companion in a group of its own (or whose GPU
//   is not on vfio) gets its own resource; no pci.ids entry (or no pci.ids) gives the raw id;
// - each mdev device counts under its mdev_type/name, each per-VF vGPU under its type name;
// - the NVIDIA device plugin (container mode) counts `nvidia.com/gpu` per selected GPU on the
//   host driver that is not a vGPU host.
Advertised advertise(const Snapshot& s, const VgpuHost& v, const Selection& sel,
                     std::string_view hostDriver, std::optional<std::string_view> pciIds);
// advertise(...).resources
std::map<std::string, int> advertisedResources(const Snapshot& s, const VgpuHost& v,
                                               const Selection& sel, std::string_view hostDriver,
                                               std::optional<std::string_view> pciIds);

}  // namespace hostprep
