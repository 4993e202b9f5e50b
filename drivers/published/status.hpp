// The status document: what the node actually is, as a pure function of the snapshot (plus the
// vGPU devices and a few inputs): its mode, each device against the driver its desired mode wants,
// the conditions, and what the device plugins will advertise (advertised.hpp). Rendered by
// status_formats.hpp; the host files it reads beside the snapshot are in status_reads.hpp.
#pragma once

#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/published/advertised.hpp"

namespace hostprep {

inline constexpr int kStatusSchemaVersion = 2;
inline constexpr std::string_view kStatusPath = "run/hostprep/status.json";

enum class ActualMode { kContainer, kVmPassthrough, kVmVgpu, kMixed, kNone };
std::string_view toString(ActualMode m);

enum class ConditionStatus { kTrue, kFalse, kUnknown };
std::string_view toString(ConditionStatus s);  // "True" | "False" | "Unknown"

// Kubernetes-style condition.
struct Condition {
  std::string type;  // PreflightPassed, DevicesOnWantedDriver, GroupsViable, HostDriverProvided,
                     // SingleOwner, DevicesResponsive
  ConditionStatus status = ConditionStatus::kUnknown;
  std::string reason;  // CamelCase
  std::string message;
  std::time_t lastTransitionTime = 0;
};

struct StatusDevice {
  const PciFunction* fn = nullptr;  // into the snapshot the document was built from
  Role role = Role::kGpu;
  std::optional<std::string> name;          // pci.ids name, e.g. "GA102GL [A10]"
  std::optional<Mode> desiredMode;          // its own (companions and VFs: their GPU's)
  std::optional<std::string> wantedDriver;  // nullopt: any driver but vfio, or not judged, or
                                            // whichever driver of wantedModule takes it
  std::optional<std::string> wantedModule;  // the host module whose driver it wants (host_module)
  std::optional<bool> onWantedDriver;       // nullopt: no desired mode (or a VF outside vm-vgpu)

  // "vfio-pci", "nvidia", "a driver of module nvidia", "a non-vfio driver": for messages.
  std::string wanted() const;
};

struct StatusVgpu {
  ObservedVgpu device;
  std::string resource;  // "nvidia.com/NVIDIA_A10-12Q"
};

struct PreflightOutcome {
  bool passed = false;
  std::string message;
};

struct StatusInputs {
  std::string nodeName;
  std::string agentVersion;
  std::time_t observedTime = 0;
  std::optional<Mode> desiredMode;
  std::string desiredModeSource;  // "flag", "config", "last-prepare"; empty when none
  std::vector<DeviceRule> rules;  // the config's devices rules over desiredMode (a mixed node)
  SelectionOptions selection;
  std::string modulesAlias;  // to name the VFIO driver a device wants (or its vfioAliasLines)
  std::optional<std::string_view> pciIds;     // nullopt: no pci.ids on the host; a megabyte, viewed
  std::vector<Condition> previous;            // the last document's conditions (lastTransitionTime)
  std::optional<PreflightOutcome> preflight;  // nullopt: not evaluated
  std::optional<std::string> convergeError;   // the last convergence failed with this
  // The host driver comes from the GPU Operator (resolved): its absence is waiting, not drift.
  bool operatorDriver = false;
  // Other agents seen acting on this node's GPUs (operatorAgents): the OtherAgents condition.
  std::vector<std::string> otherAgents;
};

struct StatusDocument {
  int schemaVersion = kStatusSchemaVersion;
  std::string nodeName;
  std::time_t observedTime = 0;
  std::string agentVersion;
  std::optional<Mode> desiredMode;  // the node's default (the config's mode)
  std::string desiredModeSource;
  std::map<Mode, int> desiredSplit;  // GPUs (role gpu) per desired mode; empty: no desired mode
  ActualMode actualMode = ActualMode::kNone;
  bool converged = false;
  std::vector<Condition> conditions;
  std::vector<StatusDevice> devices;
  std::vector<StatusVgpu> vgpu;
  std::map<std::string, int> advertised;  // Advertised::resources
  // What KubeVirt must permit for the sandbox resources of `advertised` (Advertised::permitted).
  PermittedHostDevices permitted;
  std::vector<const StatusDevice*> drift() const;  // devices off their wanted driver
  bool pciIdsFound = false;
  bool iommufd = false;  // /dev/iommu exists (CONFIG_IOMMUFD): VMMs may use iommufd + device files

  const Condition* condition(std::string_view type) const;
  // The desired mode of the node as published: "mixed" when the split holds more than one mode,
  // else its one mode (the default when no GPU is selected); empty when there is none.
  std::string desiredSummary() const;
};

// The mode the selected GPUs are in: all on vfio -> vm-passthrough; all on the host driver ->
// container, or vm-vgpu where the driver offers vGPU types or vGPUs exist; a mix -> mixed; no
// GPU, or GPUs on no/another driver -> none.
ActualMode actualMode(const Snapshot& s, const VgpuHost& v, const Selection& sel,
                      std::string_view hostDriver);

StatusDocument buildStatus(const Snapshot& s, const VgpuHost& v, const StatusInputs& in);

}  // namespace hostprep
