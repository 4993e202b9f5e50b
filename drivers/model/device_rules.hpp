// Per-device modes on a mixed node: the config's `devices:` rules resolved against the host into
// the mode each selected function should be in (a pure function, computed once and handed to the
// plan, preflight and the status), and the mixes hostprep refuses.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "drivers/common/error.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"

namespace hostprep {

// What a rule matches; every key given must match. `index` is the GPU's position in BDF order
// among the selected GPUs, from 0.
struct DeviceMatch {
  std::optional<Bdf> bdf;
  std::optional<PciId> model;  // vendor:device
  std::optional<int> index;
  std::optional<int> numa;       // the function's numa_node
  std::string describe() const;  // "{bdf: 0000:41:00.0, numa: 1}"
  bool operator==(const DeviceMatch&) const = default;
};

struct DeviceRule {
  DeviceMatch match;
  Mode mode = Mode::kContainer;
  bool operator==(const DeviceRule&) const = default;
};

// The desired mode of every selected function.
using DeviceModes = std::map<Bdf, Mode>;

struct ResolvedModes {
  DeviceModes modes;
  std::vector<std::string> warnings;  // "devices[1] {model: 10de:2330} matches no selected GPU"
};

// GPUs take the mode of the first rule that matches them, else `defaultMode`; a companion takes
// its GPU's (the GPU it shares an IOMMU group or a device link with; the first by BDF when
// several do: checkGroupModes refuses a group whose GPUs disagree); NVSwitches take the default.
ResolvedModes resolveModes(const Snapshot& s, const Selection& sel, Mode defaultMode,
                           const std::vector<DeviceRule>& rules);

// Every selected function in one mode (prepare --mode M).
DeviceModes uniformModes(const Selection& sel, Mode m);

// How many GPUs (role gpu) each mode has: {container: 2, vm-passthrough: 2}.
std::map<Mode, int> modeSplit(const Selection& sel, const DeviceModes& modes);

// The node summary: the one mode of the GPUs, or nullopt when they differ (a mixed node) or there
// is none.
std::optional<Mode> singleMode(const std::map<Mode, int>& split);

// container + vm-vgpu on one node: a config error (exit 2). One `nvidia` module is either the
// datacenter driver or the vGPU manager (NVIDIA vGPU software: the vGPU manager replaces the
// host driver), so GPUs cannot be on both.
Status checkModeMix(const std::map<Mode, int>& split);

// Two GPUs of one IOMMU group in different modes: refused (exit 3), naming both and the group. A
// group is the unit vfio hands to a VM (Documentation/driver-api/vfio.rst, "Groups, Devices,
// and IOMMUs"), so its GPUs cannot go two ways.
Status checkGroupModes(const Snapshot& s, const Selection& sel, const DeviceModes& modes);

// The mode of one function; `fallback` when `modes` does not list it.
Mode modeOf(const DeviceModes& modes, const Bdf& b, Mode fallback);

// The part of a selection in one mode: its targets, and the group problems and unselected GPUs
// of its GPUs (preflight checks each mode on its own GPUs).
Selection selectionInMode(const Selection& sel, const DeviceModes& modes, Mode m);

// "container: 1, vm-passthrough: 3"
std::string splitText(const std::map<Mode, int>& split);

}  // namespace hostprep
