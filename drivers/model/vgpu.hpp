// vGPU devices on the host, both interfaces (mdev: kernel
// Documentation/driver-api/vfio-mediated-device.rst; per-VF: NVIDIA's vGPU software user guide):
//  - mdev: parents listed in sys/class/mdev_bus/ (the PF on Turing and older, each SR-IOV VF on
//    Ampere and newer); types in <parent>/mdev_supported_types/<id>/{name,available_instances};
//    a device is created by writing a UUID to <type>/create and appears as
//    sys/bus/mdev/devices/<uuid> (mdev_type -> its type dir); `remove` takes it away.
//  - per-VF (vGPU 17+, kernel 6.8+): <VF>/nvidia/creatable_vgpu_types ("ID : NAME" lines) and
//    <VF>/nvidia/current_vgpu_type (the ID, 0 = none).
// Pure helpers (name matching, parsers, deterministic UUIDs, VF addresses) and the one reader.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/pci.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

// Does a configured type ("T4-4Q", "mtty-2") name this sysfs type? vgpu-device-manager compares
// the LAST space-separated token of the type's name ("GRID T4-4Q" -> "T4-4Q"); hostprep also
// accepts the type's directory name ("nvidia-222", "mtty-2") and the whole name.
bool vgpuTypeMatches(std::string_view configured, std::string_view typeId,
                     std::string_view typeName);

struct VgpuTypeId {
  std::string id;    // "1428"
  std::string name;  // "NVIDIA H200X-141C"
  bool operator==(const VgpuTypeId&) const = default;
};
// creatable_vgpu_types: "ID : NAME" lines; a header ("ID    : vGPU Name") and blank lines are
// skipped, as is any line whose ID is not a number.
std::vector<VgpuTypeId> parseCreatableVgpuTypes(std::string_view text);

// A name-based UUID (RFC 4122 version 5: SHA-1 of a fixed hostprep namespace and the name), so
// the same parent, type and index always get the same UUID: re-runs are idempotent and a VM
// keeps its device identity across reboots.
std::string vgpuUuid(const Bdf& parent, std::string_view type, int index);
std::string sha1Hex(std::string_view data);  // exposed for its test vectors
bool isValidUuid(std::string_view s);        // 8-4-4-4-12 lower-case hex

// The address of VF `index` of a PF: routing id + sriov_offset + index * sriov_stride
// (PCIe SR-IOV spec, First VF Offset / VF Stride). nullopt when it leaves the bus range.
std::optional<Bdf> vfAddress(const Bdf& pf, int offset, int stride, int index);

struct MdevType {
  std::string id;     // directory name: "nvidia-558", "mtty-2"
  std::string name;   // "NVIDIA A10-12Q", "Dual port serial"; the id when absent
  int available = 0;  // available_instances
};

enum class VgpuInterface { kMdev, kPerVf };
std::string_view toString(VgpuInterface i);

// A vGPU device that exists now.
struct VgpuDevice {
  VgpuInterface iface = VgpuInterface::kMdev;
  Bdf parent;
  std::string uuid;          // mdev only
  std::string typeId;        // mdev type dir ("nvidia-558") or per-VF type ID ("1428")
  std::string typeName;      // "NVIDIA A10-12Q" when known
  std::optional<int> group;  // the IOMMU group a VM opens (/dev/vfio/<group>)
  bool operator==(const VgpuDevice&) const = default;
};

// What one PCI function offers as a vGPU parent.
struct VgpuParent {
  Bdf bdf;
  bool mdevParent = false;  // has mdev_supported_types
  std::vector<MdevType> mdevTypes;
  bool perVf = false;                 // has nvidia/creatable_vgpu_types
  std::vector<VgpuTypeId> creatable;  // creatable (and supported, when listed) types
  std::string currentType = "0";      // nvidia/current_vgpu_type
};

// An mdev device whose parent is not among the host's PCI functions (the kernel's mtty sample
// hangs off a virtual device): the status lists it, the plan never touches it.
struct OtherMdev {
  std::string uuid;
  std::optional<Bdf> parent;  // the parent's name when it reads as a PCI address
  std::string typeId;         // mdev type directory
  std::string typeName;
  bool operator==(const OtherMdev&) const = default;
};

// The vGPU view of the host, read once next to the Snapshot: the one reader of vGPU state, for
// the plan, the executor and the status alike.
struct VgpuHost {
  std::map<Bdf, VgpuParent> parents;  // every function with either interface
  std::vector<VgpuDevice> devices;    // every existing vGPU device on a PCI function
  std::vector<OtherMdev> otherMdevs;  // mdev devices on anything else
  std::vector<Bdf> unbindLocks;       // GPUs with /proc/driver/nvidia/gpus/<BDF>/unbindLock

  const VgpuParent* parent(const Bdf& b) const;
  std::vector<const VgpuDevice*> devicesOn(const Bdf& parent) const;
};

// Reads every mdev parent, per-VF vGPU directory and vGPU device among the snapshot's functions.
VgpuHost readVgpuHost(const Host& host, const Snapshot& s);
// The same with the parents and per-VF vGPUs looked for among `candidates` (functions of `s`)
// only: a plan's GPUs and their VFs (readPlanVgpuHost), the functions refreshVgpuHost reads again.
// Every mdev device is read.
VgpuHost readVgpuHost(const Host& host, const Snapshot& s, const std::vector<Bdf>& candidates);
// The same after the functions in `changed` were read again (the agent, after uevents that named
// them), without four failed lookups per function of the host: `changed` and the parents,
// unbind locks and vGPU devices of `before` are read again, and every mdev device (they come
// and go with mdev uevents, which make the agent read everything anyway). A function no event
// named keeps `before`'s answer: it becomes a parent only when a driver binds it, and a bind is
// an event that names it (drivers/base/dd.c driver_bound: KOBJ_BIND). What changes without an
// event (a per-VF vGPU type written, an mdev type's available instances) is a parent's own
// state, and parents are always read again.
VgpuHost refreshVgpuHost(const Host& host, const Snapshot& s, const VgpuHost& before,
                         const std::set<Bdf>& changed);
// The live vGPU devices on these parents (used by the executor for journal and rollback).
std::vector<VgpuDevice> readVgpuDevices(const Host& host, const std::vector<Bdf>& parents);

// Host paths.
inline constexpr std::string_view kMdevDevices = "sys/bus/mdev/devices";
std::string mdevTypePath(const Bdf& parent,
                         std::string_view typeId);            // <dev>/mdev_supported_types/<id>
std::string perVfPath(const Bdf& vf, std::string_view file);  // <dev>/nvidia/<file>
std::string unbindLockPath(const Bdf& gpu);  // proc/driver/nvidia/gpus/<BDF>/unbindLock
// The driver whose files the last two are, there while it holds the function (NVIDIA vGPU
// software user guide, "Creating an NVIDIA vGPU on a Linux with KVM Hypervisor"; sriov-manage).
inline constexpr std::string_view kNvidiaDriver = "nvidia";

}  // namespace hostprep

namespace hostprep {

// The types among `types` (anything with .id and .name) that a configured name picks: an exact
// directory id or whole name wins outright; otherwise every type whose last name token matches
// (more than one is ambiguous: "Single port serial" and "Dual port serial" both end in "serial").
template <class T>
std::vector<size_t> matchVgpuTypes(const std::vector<T>& types, std::string_view want) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].id == want || types[i].name == want) return {i};
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (vgpuTypeMatches(want, types[i].id, types[i].name)) out.push_back(i);
  }
  return out;
}

// "T4-1Q, T4-2Q (nvidia-222)" for messages: each type's name and directory id.
template <class T>
std::string describeVgpuTypes(const std::vector<T>& types) {
  std::string s;
  for (const auto& t : types) {
    if (!s.empty()) s += ", ";
    s += t.name == t.id ? t.id : t.name + " (" + t.id + ")";
  }
  return s.empty() ? "none" : s;
}

}  // namespace hostprep
