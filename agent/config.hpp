// The agent's YAML config, default etc/hostprep/config.yaml under the root:
//
//   mode: vm-passthrough            # container | vm-passthrough | vm-vgpu: the node's default
//   devices:                        # per-GPU rules, first match wins (drivers/model/device_rules)
//     - match: {bdf: "0000:41:00.0"}  # also model: "10de:2330", index: 0, numa: 1
//       mode: container
//   selection:
//     gpu-ids: ["10de:2236"]        # instead of every NVIDIA GPU
//     devices: ["0000:3b:00.0"]     # only these GPUs (companions follow)
//   host-driver: nvidia
//   host-driver-provider: host     # host | operator | auto: who loads the host driver module
//   holder-nodes: /dev/nvidia*
//   vgpu:
//     config-file: /etc/hostprep/vgpu-config.yaml
//     config-name: default
//   status:
//     path: /run/hostprep/status.json
//     nfd-features: /etc/kubernetes/node-feature-discovery/features.d/hostprep
//     prometheus: /var/lib/prometheus/node-exporter/hostprep.prom
//   reconcile: false
//   cc-mode: off                    # off | on | devtools | ppcie (confidential computing)
//
// Every key is optional; an unknown key is an error (a typo must not be ignored silently). Paths
// are host paths (absolute, under --root). Errors name the file and the key and exit 2.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "agent/option_values.hpp"
#include "drivers/common/error.hpp"
#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/platform.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

struct AgentConfig {
  std::optional<Mode> mode;
  std::vector<DeviceRule> rules;  // devices: GPUs a rule matches take its mode instead of `mode`
  SelectionOptions selection;
  std::string holderNodes;  // empty: /dev/<host-driver>*
  std::string vgpuConfigFile;
  std::string vgpuConfigName{kDefaultVgpuConfigName};
  std::string statusPath{"/run/hostprep/status.json"};
  std::string nfdFeaturesPath;  // empty: not written
  std::string prometheusPath;   // empty: not written
  bool reconcile = false;
  bool resetOnReturn = true;  // reset-on-return: reset what leaves vfio (drivers/model/reset.hpp)
  CcMode ccMode = CcMode::kOff;  // confidential computing asked for (preflight's gpu.cc)

  // The holder-nodes glob in effect.
  std::string holderGlob() const { return hostprep::holderGlob(holderNodes, selection.hostDriver); }
};

// Parses config text over `defaults` (each key the text names replaces its value there); `source`
// names the file in errors ("config.yaml: selection.gpu-ids[1]: ..."). The values are checked by
// agent/option_values, as the command line's are.
Result<AgentConfig> parseConfig(std::string_view text, std::string_view source,
                                const AgentConfig& defaults = {});

// Reads the config from a host path. A missing file is `defaults` when `required` is false
// (the default path), an error when it was named explicitly. Running as root, a file writable by
// group or others (or owned by another user) is refused: it decides which devices get unbound.
Result<AgentConfig> loadConfig(const Host& host, std::string_view path, bool required,
                               const AgentConfig& defaults = {});

// The permission rule, pure: nullopt when fine, else the problem.
std::optional<std::string> configPermissionProblem(uid_t owner, mode_t mode, bool runningAsRoot);

// The mode the config names, for preflight and status: nullopt when there is no config, it
// names no mode, or it does not parse.
std::optional<Mode> configuredMode(const Host& host, std::string_view path = kConfigPath);
// The cc-mode the config names; off likewise.
CcMode configuredCcMode(const Host& host, std::string_view path = kConfigPath);

// The selection of the last run that converged (prepare, or the agent), kept beside the last mode
// in run/hostprep/last-selection, in this file's format (selection.gpu-ids, selection.devices,
// host-driver, host-driver-provider), so `hostprep status` shows the devices that run moved.
inline constexpr std::string_view kLastSelectionPath = "run/hostprep/last-selection";
std::string formatSelection(const SelectionOptions& s);
// nullopt when no run recorded one; an error when the file does not parse.
Result<std::optional<SelectionOptions>> readLastSelection(const Host& host);
Status writeLastSelection(Host& host, const SelectionOptions& s);

}  // namespace hostprep
