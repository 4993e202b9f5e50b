// Which PCI functions hostprep may touch: the selected GPUs and the companions that share their
// IOMMU groups, and the groups it must refuse (a foreign device, the root filesystem's disk).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"

namespace hostprep {

// Who provides the host driver module (--host-driver-provider). host: hostprep loads it from the
// host's lib/modules. operator: NVIDIA's GPU Operator's driver container loads it (its
// nvidia-driver-daemonset builds or ships nvidia.ko, loads it from inside the container and shares
// its root at /run/nvidia/driver; NVIDIA/gpu-operator assets/state-driver), so hostprep never
// loads it: container mode clears overrides, unbinds vfio, and probes once the module is loaded.
// auto: operator when the host's module tree lacks the module and the operator's driver root or
// validation files are present (resolveDriverProvider), else host.
enum class DriverProvider { kHost, kOperator, kAuto };
std::string_view toString(DriverProvider p);
std::optional<DriverProvider> parseDriverProvider(std::string_view s);
inline constexpr std::string_view kDriverProviderChoices = "host, operator, auto";

struct SelectionOptions {
  std::vector<Bdf> devices;           // --devices: only these (and their companions)
  std::vector<PciId> gpuIds;          // --gpu-ids: replaces the NVIDIA vendor/class rule
  std::string hostDriver = "nvidia";  // --host-driver: the datacenter driver
  // Every NVSwitch goes with the GPUs (whatever --devices picks: in full passthrough the fabric
  // goes to the VMs whole). prepare resolves --nvswitch into this (nvSwitchesWithGpus).
  bool withNvSwitches = false;
  DriverProvider hostDriverProvider = DriverProvider::kHost;  // --host-driver-provider
};

// An NVSwitch: NVIDIA vendor, class 0x0680 (bridge, other), not a VF. HGX/DGX boards carry
// four (H100/H200) or six (A100) of them, each in its own IOMMU group.
bool isNvSwitch(const PciFunction& f);

// NVIDIA Fabric Manager's FABRIC_MODE (usr/share/nvidia/nvswitch/fabricmanager.cfg; NVIDIA Fabric
// Manager User Guide, "Fabric Manager Config Options"): 0 bare metal or full passthrough (GPUs
// and NVSwitches go to the VM together), 1 shared NVSwitch (GPUs to VMs, NVSwitches stay on the
// host's nvidia driver with Fabric Manager on the host), 2 vGPU multitenancy.
enum class FabricMode { kFullPassthrough = 0, kSharedNvSwitch = 1, kVgpu = 2 };

// prepare --nvswitch: with-gpus (the NVSwitches move with the GPUs), leave (never touched), auto
// (follow FABRIC_MODE: 0 with the GPUs, 1 and 2 leave).
enum class NvSwitchPolicy { kAuto, kWithGpus, kLeave };
std::string_view toString(NvSwitchPolicy p);
std::optional<NvSwitchPolicy> parseNvSwitchPolicy(std::string_view s);
inline constexpr std::string_view kNvSwitchChoices = "auto, with-gpus, leave";
// The policy resolved against the host's Fabric Manager mode (absent config: mode 0, the
// Fabric Manager default).
bool nvSwitchesWithGpus(NvSwitchPolicy p, FabricMode m);

enum class Role { kGpu, kCompanion, kVf, kNvSwitch };
std::string_view toString(Role r);

struct Target {
  Bdf bdf;
  Role role = Role::kGpu;
  std::optional<int> group;
};

// A group hostprep will not take without --force.
struct GroupProblem {
  std::optional<int> group;
  Bdf gpu;
  std::vector<Bdf> foreign;    // devices that are neither the GPU's vendor nor companion class
  bool holdsRootDisk = false;  // the root filesystem's disk is in this group
  std::string describe(const Snapshot& s) const;
};

// A GPU that --devices did not name but that shares the IOMMU group of one it did (two GPUs
// behind a PCIe switch without ACS): it is a companion of the selected one, and moving it is
// refused without --force (agent/converge).
struct UnselectedGpu {
  Bdf gpu;       // the one not selected
  Bdf selected;  // the selected GPU whose group holds it
  std::optional<int> group;
  std::string describe(const Snapshot& s) const;
};

struct Selection {
  std::vector<Target> targets;  // GPUs first by BDF, then companions; no duplicates
  std::vector<GroupProblem> problems;
  std::vector<UnselectedGpu> unselectedGpus;

  std::vector<Bdf> gpus() const;
  const Target* find(const Bdf& b) const;
};

// Is this function a GPU under the default rule (vendor 0x10de, class 0x0300xx/0x0302xx, not a
// VF) or, with --gpu-ids, one of those ids (NVSwitch 0x0680xx only when its id is named)?
bool isSelectedGpu(const PciFunction& f, const SelectionOptions& opt);

// A function selectDevices may pick as a GPU or an NVSwitch, judged on its light attributes (a
// WholeFunction for readSnapshot: selectDevices and preflight's checks then see every attribute
// they read).
bool maySelect(const PciFunction& f, const SelectionOptions& opt);

// The snapshot a run plans from (prepare, the agent's converge, and the unit tests' rigs, so that
// they plan from the same read): every function light (id, class, driver, physfn), and whole only
// what a selection can reach: the functions it may pick as GPUs or NVSwitches, every VF (a plan
// tears VFs and vGPU devices down and puts VFs back on their driver and override, and vfsInUse
// reads their drivers), and the members of their IOMMU groups and their consumers (the
// companions, and what makes a group unsafe). selectDevices, makePlan and vfsInUse read nothing
// else; on a host of a few dozen functions this skips most of the reads of the NICs, disks and
// bridges that never move.
Result<Snapshot> readPlanSnapshot(const Host& host, const SelectionOptions& selection);
// What a plan reads of the vGPU view (PlanInputs::vgpuHost): the parents and per-VF vGPUs of the
// selected GPUs and of their VFs, and every mdev device. A plan looks at no other parent; looking
// costs a failed open per function.
VgpuHost readPlanVgpuHost(const Host& host, const Snapshot& s, const Selection& sel);

// Fails (exit 2) when --devices names a function that does not exist or is not a selected GPU.
Result<Selection> selectDevices(const Snapshot& s, const SelectionOptions& opt);

// "0000:3b:00.0 (10de:2236 3D controller)" for messages.
std::string describeFunction(const Snapshot& s, const Bdf& b);

}  // namespace hostprep
