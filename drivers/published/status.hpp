// The status document: what the node actually is, as a pure function of the snapshot (plus the
// vGPU devices and a few inputs), and what the device plugins will advertise for it. Rendered as
// JSON (schema: agent/status.schema.json), as an NFD features.d file, and as a Prometheus
// textfile. The few host reads it needs (node name, pci.ids, the last prepared mode, the last
// document) are separate helpers at the bottom.
#pragma once

#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

inline constexpr int kStatusSchemaVersion = 2;
inline constexpr std::string_view kStatusPath = "run/hostprep/status.json";
inline constexpr std::string_view kLastModePath = "run/hostprep/last-mode";
inline constexpr std::string_view kNfdPrefix = "hostprep.";

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

struct StatusVgpu {
  ObservedVgpu device;
  std::string resource;  // "nvidia.com/NVIDIA_A10-12Q"
};

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
  std::map<std::string, int> advertised;
  // What KubeVirt must permit for the sandbox resources of `advertised` (none for nvidia.com/gpu):
  // - pci: per passthrough resource, the VENDOR:DEVICE (upper-case hex) of the function the plugin
  //   names it after (the first vfio-bound NVIDIA function of its IOMMU group);
  // - mediated: per vGPU resource, the type name as the kernel shows it (mdev_type/name, or the
  //   per-VF type's name in creatable_vgpu_types), which KubeVirt matches mdevNameSelector to.
  // One entry per resource name (the first device of the plugin's walk gives its selector).
  PermittedHostDevices permitted;
  std::vector<const StatusDevice*> drift() const;  // devices off their wanted driver
  bool pciIdsFound = false;
  bool iommufd = false;  // /dev/iommu exists (CONFIG_IOMMUFD): VMMs may use iommufd + device files

  const Condition* condition(std::string_view type) const;
  // The desired mode of the node as published: "mixed" when the split holds more than one mode,
  // else its one mode (the default when no GPU is selected); empty when there is none.
  std::string desiredSummary() const;
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
std::map<std::string, int> advertisedResources(const Snapshot& s, const VgpuHost& v,
                                               const Selection& sel, std::string_view hostDriver,
                                               std::optional<std::string_view> pciIds);

// The mode the selected GPUs are in: all on vfio -> vm-passthrough; all on the host driver ->
// container, or vm-vgpu where the driver offers vGPU types or vGPUs exist; a mix -> mixed; no
// GPU, or GPUs on no/another driver -> none.
ActualMode actualMode(const Snapshot& s, const VgpuHost& v, const Selection& sel,
                      std::string_view hostDriver);

StatusDocument buildStatus(const Snapshot& s, const VgpuHost& v, const StatusInputs& in);

nlohmann::ordered_json toJson(const StatusDocument& d);
std::string nfdFeatures(const StatusDocument& d);     // NFD local source, features.d format
std::string prometheusText(const StatusDocument& d);  // node_exporter textfile collector

// RFC 3339 UTC, "2024-05-01T12:00:00Z".
std::string formatTime(std::time_t t);
std::optional<std::time_t> parseTime(std::string_view s);

// Conditions of a previous document (empty when it is absent or unreadable).
std::vector<Condition> parseConditions(std::string_view statusJson);

// Host reads.
std::string readNodeName(const Host& host);  // proc/sys/kernel/hostname, else etc/hostname
// pci.ids under the root (usr/share/misc, usr/share/hwdata); nullopt when there is none.
std::optional<std::string> readPciIds(const Host& host);

// What the last prepare converged to (run/hostprep/last-mode): the node's mode, and on a split
// each GPU's mode. The file holds the mode on its first line (all a file from before splits
// holds, and all one with no split holds), then one "BDF MODE" line per GPU of a split.
struct LastMode {
  Mode mode = Mode::kContainer;
  std::map<Bdf, Mode> gpus;  // empty: every GPU in `mode`
  bool operator==(const LastMode&) const = default;
  // The GPUs' modes as devices rules over `mode` ({bdf: ...} each), for the status.
  std::vector<DeviceRule> rules() const;
};
std::string formatLastMode(const LastMode& m);
// Errors name the line and what is wrong with it; `file` names the file in them.
Result<LastMode> parseLastMode(std::string_view text, std::string_view file);
// nullopt: no file (no prepare since boot). A file that does not parse: an error naming it.
Result<std::optional<LastMode>> readLastMode(const Host& host);
Status writeLastMode(Host& host, const LastMode& m);

}  // namespace hostprep
