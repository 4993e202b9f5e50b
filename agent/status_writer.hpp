// Observing the host and publishing what was seen: the status document (JSON, atomic), and the
// optional NFD features file and Prometheus textfile named in the config. Used by `hostprep
// status` and by the agent after every convergence and every batch of kernel events.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/config.hpp"
#include "drivers/published/status.hpp"

namespace hostprep {

// Inputs no device event changes, kept by the agent between observations and dropped when it
// converges or reloads: the node name, pci.ids and modules.alias (a hostname change, a pci.ids
// update or a depmod shows in the next status after one of those).
struct StaticInputs {
  std::optional<std::string> nodeName;
  std::optional<std::optional<std::string>> pciIds;  // outer: read yet; inner: the host has one
  // Kernel release, and the lines of its modules.alias the VFIO lookups read (vfioAliasLines).
  std::optional<std::pair<std::string, std::string>> modulesAlias;
};

struct Observation;

struct StatusRequest {
  AgentConfig config;                 // selection, host driver, output paths, mode
  std::optional<Mode> modeOverride;   // --mode wins over the config
  std::optional<std::string> pciIds;  // --pci-ids text; nullopt: the root's own pci.ids
  std::optional<std::string> convergeError;
  std::time_t now = 0;
  // The PreflightPassed condition. Unset: run preflight's host checks for the desired mode (and
  // its split: each mode's checks on its GPUs) now.
  // The agent passes a cache here: the checks read the whole platform, and nothing they look at
  // changes when a device is rebound, so it recomputes them only after it converges or reloads.
  std::function<std::optional<PreflightOutcome>(
      const Host&, const Snapshot&, Mode, const SelectionOptions&, const std::vector<DeviceRule>&)>
      preflight;
  // The agent's shortcut after a burst of bind/unbind events: the previous observation and the
  // functions the events named (refreshSnapshot). Unset: read the whole host. The previous
  // conditions then come from `previous` instead of the status file.
  const Observation* previous = nullptr;
  std::set<Bdf> changed;
  std::set<Bdf> rebound;  // of `changed`, those only bound or unbound (their binding read again)
  StaticInputs* statics = nullptr;  // unset: read them
};

// Preflight's host checks for a mode, split by `rules` as `hostprep preflight` splits it (each
// mode's checks on its GPUs), summed up as the status condition.
std::optional<PreflightOutcome> preflightOutcome(const Host& host, const Snapshot& s, Mode mode,
                                                 const SelectionOptions& sel,
                                                 const std::vector<DeviceRule>& rules = {});

// A document and the snapshot it points into (not copyable: the document holds pointers).
struct Observation {
  Snapshot snapshot;
  VgpuHost vgpu;
  StatusDocument doc;
  // Read on a whole read only, kept by a scoped one (a bind or unbind changes neither): whether
  // the GPU Operator provides the host driver, and its agents seen in proc/.
  bool operatorDriver = false;
  std::vector<std::string> otherAgents;
  Observation() = default;
  Observation(const Observation&) = delete;
  Observation& operator=(const Observation&) = delete;
};

// The desired mode and where it comes from: --mode, the config, or the last prepare; `rules`
// (when given) receives the split over it: the config's devices rules, or the GPUs' modes the
// last prepare recorded. A last-mode file that does not parse is a warning, and no desired mode.
std::pair<std::optional<Mode>, std::string> desiredMode(const Host& host, const StatusRequest& r,
                                                        std::vector<DeviceRule>* rules = nullptr);

Result<std::unique_ptr<Observation>> observe(const Host& host, const StatusRequest& r);

// Writes the JSON document to `path` (a host path), and the NFD and Prometheus files when the
// config names them; each by temp file + fsync + rename.
Status publish(Host& host, const Observation& o, const AgentConfig& c, const std::string& path);

// A one-line summary for logs and sd_notify STATUS=.
std::string summary(const StatusDocument& d);

}  // namespace hostprep
