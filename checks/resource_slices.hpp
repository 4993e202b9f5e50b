// The DRA check of check-node: the devices NVIDIA's DRA driver (gpu.nvidia.com) publishes in
// ResourceSlices ('kubectl get resourceslices -o json') against the nodes' modes and, when given,
// the hosts' status documents. A device of type vfio is a GPU for passthrough; one of type gpu, a
// GPU on the host driver (NVIDIA/k8s-dra-driver-gpu).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checks/check_node.hpp"
#include "checks/cluster_inputs.hpp"

namespace hostprep {

inline constexpr std::string_view kNvidiaDraDriver = "gpu.nvidia.com";
inline constexpr std::string_view kPciBusIdAttribute = "resource.kubernetes.io/pciBusID";
// The driver's own attribute for the same address: the resource.k8s.io/v1 devices of
// NVIDIA/k8s-dra-driver-gpu's cmd/gpu-kubelet-plugin/deviceinfo.go (GetDevice of a GPU, a MIG
// device and a vfio device) carry it; the standard one is read first.
inline constexpr std::string_view kDriverPciBusIdAttribute = "pcieBusID";

// One device of a gpu.nvidia.com ResourceSlice.
struct SliceDevice {
  std::string slice;                    // the slice's metadata.name, else its document
  std::string node;                     // the slice's spec.nodeName
  std::string name;                     // spec.devices[].name
  std::optional<std::string> type;      // attribute "type": "gpu", "vfio", "mig", ...
  std::optional<std::string> pciBusId;  // attribute resource.kubernetes.io/pciBusID, else pcieBusID
  std::optional<std::string> uuid;      // attribute uuid
  std::optional<std::string> parentUuid;  // attribute parentUUID (a mig device's GPU)
};

// What the DRA driver publishes on one node: its advertisement when the device plugin is off
// (the node's capacity then holds no nvidia.com/* resource).
struct DraNodeDevices {
  int64_t gpus = 0;       // GPUs on the host driver: type gpu, and each mig device's GPU once
  bool gpusKnown = true;  // false: a mig device without parentUUID, its GPU cannot be told
  int64_t vfio = 0;       // GPUs for passthrough: type vfio
  std::string slice;      // the first slice that has them, for messages
};
std::map<std::string, DraNodeDevices> draDevicesByNode(const std::vector<SliceDevice>& devices);

// Reads ResourceSlice documents and Lists of them, resource.k8s.io/v1 (attributes under
// spec.devices[].attributes) and v1beta1 (under spec.devices[].basic.attributes). Slices of other
// drivers, and slices not bound to one node, are skipped. A document that is not a ResourceSlice
// is a usage error naming it.
Result<std::vector<SliceDevice>> readResourceSlices(const std::vector<Document>& docs);

// vfio devices only on vm-passthrough nodes, gpu devices never there; with a node's status
// document, every vfio device is one hostprep moved to vfio-pci. Adds findings to the nodes of
// report, and a cluster finding for slices of nodes the input lacks.
void checkResourceSlices(CheckNodeReport& report, const std::vector<SliceDevice>& devices,
                         const Statuses& statuses);

}  // namespace hostprep
