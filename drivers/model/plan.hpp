// The switch plan: a pure function of the snapshot and the selection that lists, in order, every
// write the executor will make and every check it will make after. Dry runs print it; the
// executor journals it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/step.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/model/vgpu_config.hpp"

namespace hostprep {

struct DeviceMove {
  Bdf bdf;
  Role role = Role::kGpu;
  std::optional<int> group;
  DeviceState from;
  std::string toDriver;          // the driver it must end on; "" = any driver but vfio (companions)
                                 // or, with toModule, whichever driver of that module takes it
  bool changes = false;          // false when the device is already where it should be
  Mode mode = Mode::kContainer;  // the mode it goes to (on a mixed node, not every device's)
  std::string toModule{};        // the host module whose driver it must end on (GPUs, NVSwitches)
  // Container mode with the host driver from the GPU Operator and its module not loaded yet: the
  // device is left without override and without driver until the module appears.
  bool awaitsDriver = false;

  // Where it goes, for people: "vfio-pci", "nvidia", "a driver of module nvidia" (the probe picks
  // which), "its own driver" (a companion).
  std::string target() const;
};

struct PlanInputs {
  Mode mode = Mode::kContainer;       // every selected device's, unless `modes` names another
  std::string hostDriver = "nvidia";  // the host module: each function on the driver it gives it
  std::string modulesAlias;           // lib/modules/<release>/modules.alias text ("" if absent)
  // The host module comes from the GPU Operator's driver container (DriverProvider::kOperator,
  // resolved): never loaded by a plan; a GPU waits driverless while the module is not loaded.
  bool operatorDriver = false;
  // vGPU: the live vGPU view (nullopt: no vGPU parents or devices on this host), the selected
  // config's entries (nullopt: the embedded defaults per GPU model), and whether the vGPU
  // manager's nvidia_vgpu_vfio module exists for this kernel.
  std::optional<VgpuHost> vgpuHost{};
  std::optional<std::vector<VgpuConfigEntry>> vgpuConfig{};
  std::string vgpuConfigName = "default";
  bool vgpuVfioAvailable = false;
  DeviceModes modes{};  // a mixed node: the mode of each device (resolveModes)
  // Reset a function leaving a VFIO driver for a host driver between its unbind and its probe
  // (reset.hpp); false: --no-reset, `reset-on-return: false`.
  bool resetOnReturn = true;
};

// A vGPU device the plan wants to exist at the end.
struct PlannedVgpu {
  Bdf gpu;
  Bdf parent;            // the PF (Turing and older) or a VF (Ampere and newer)
  std::string type;      // as configured: "A10-12Q"
  std::string typeName;  // as the kernel will name it: "NVIDIA A10-12Q" (predicted if unseen)
  std::string uuid;      // the deterministic mdev UUID (unused on the per-VF interface)
  std::optional<VgpuInterface> iface;  // nullopt: decided when the parent appears (VFs not yet on)
  bool exists = false;                 // already there: no step
};

// A VF that was enabled before the run and that the plan moves to the host driver (it carries a
// vGPU): not a selected device, but the journal restores it like one.
struct VfMove {
  Bdf bdf;
  std::optional<int> group;
  DeviceState from;
};

// A VF as it was before a plan disabled its PF's VFs. The kernel removes the VF with its driver
// binding and driver_override; enabling the VFs again creates them as new devices, which the
// kernel binds to their default driver (or to none, with sriov_drivers_autoprobe off), not to the
// one they had (pci_iov_add_virtfn() in drivers/pci/iov.c).
struct VfState {
  Bdf bdf;
  DeviceState state;
};

struct SriovChange {
  Bdf pf;
  int from = 0;
  int to = 0;
  std::vector<VfState> vfs;  // the VFs enabled before the change, as they were
};

struct Plan {
  Mode mode = Mode::kContainer;   // the default; each move carries its own (a mixed node)
  std::vector<DeviceMove> moves;  // every selected device, in order
  std::vector<Step> steps;
  std::vector<PlannedVgpu> vgpus;        // vm-vgpu: every vGPU device at the end
  std::vector<VgpuDevice> vgpuRemovals;  // existing vGPU devices the plan removes
  std::vector<SriovChange> sriov;        // PFs whose sriov_numvfs the plan changes
  std::vector<Bdf> vgpuGpus;             // GPUs whose vGPU state the journal must cover
  std::vector<VfMove> vfMoves;           // enabled VFs it moves to the host driver
  std::map<Bdf, Bdf> vfGpu;  // the GPU of each VF a step names: its steps run in the GPU's lane
  std::set<std::string> hostDrivers;  // the host module's PCI drivers, as the snapshot showed them
  // Functions leaving a VFIO driver that go back without a reset, and why ("no reset method,
  // ...", "--no-reset"): the run says so.
  std::vector<std::pair<Bdf, std::string>> notReset;

  bool noop() const { return steps.empty(); }
  // Devices left waiting for the operator's host driver (DeviceMove::awaitsDriver).
  std::vector<Bdf> awaitingDriver() const;
  // How many GPUs (role gpu) go to each mode; more than one entry on a mixed node.
  std::map<Mode, int> split() const;
};

// What the sandbox device plugin will advertise once a vm-vgpu plan is applied:
// "nvidia.com/NVIDIA_A10-12Q" -> 4 for two A10s with the default config. For the lead to
// cross-check against `hostprep status` after a run.
std::map<std::string, int> expectedAdvertised(const Plan& plan);
// The driver a vfio module registers: "vfio_pci" -> "vfio-pci".
std::string vfioDriverName(std::string_view module);

// VFs the plan's SR-IOV changes would remove while a driver other than the host driver has them
// ("0000:03:00.1 on vfio-pci"): a VF given to a VM, or to another host driver, is in use, and
// the kernel's pci_disable_sriov() would yank it (vfio-pci refuses a PF with VFs for this reason).
// The caller refuses the plan without --force.
std::vector<std::string> vfsInUse(const Snapshot& s, const Plan& plan, std::string_view hostDriver);

// Fails (exit 1, nothing touched) when the mode cannot be reached from this host, e.g. a device
// without an IOMMU group for vm-passthrough, or a GPU held by a third driver for container.
Result<Plan> makePlan(const Snapshot& s, const Selection& sel, const PlanInputs& in);

}  // namespace hostprep
