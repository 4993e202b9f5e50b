// Converging the host to a mode: the body of `hostprep prepare`, shared with `hostprep agent`
// (at start, on SIGHUP, and with --reconcile on drift) so both take exactly the same path:
// lock, resolve a leftover journal, select, refuse unsafe groups, plan, check holders, apply.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/option_values.hpp"
#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu_config.hpp"
#include "drivers/switch/executor.hpp"

namespace hostprep {

// What `hostprep prepare` takes on its command line (agent/options), and what the agent fills in
// from its config: one set of options for both.
struct ConvergeOptions {
  Mode mode = Mode::kContainer;  // every selected GPU's mode, unless a rule names another
  // The config's devices rules (a mixed node): the first that matches a GPU gives its mode.
  std::vector<DeviceRule> rules;
  bool dryRun = false;
  bool force = false;
  SelectionOptions selection;
  std::chrono::milliseconds lockTimeout{30'000};
  std::chrono::milliseconds unbindTimeout{30'000};
  // A glob of device nodes whose holders block unbinding the host driver; empty:
  // /dev/<host-driver>* (holderGlob).
  std::string holderNodes;
  // NVSwitches (HGX): auto follows Fabric Manager's FABRIC_MODE (0, full passthrough: with the
  // GPUs; 1 and 2: left on the host), resolved against the host when the run starts.
  NvSwitchPolicy nvSwitch = NvSwitchPolicy::kAuto;
  // vm-vgpu: a vgpu-device-manager config file (a host path, read under --root) and the config
  // in it; no file means the embedded defaults (the half-card profile x2 per GPU).
  std::string vgpuConfigFile;
  std::string vgpuConfigName{kDefaultVgpuConfigName};
  // Reset a function leaving vfio for a host driver (drivers/model/reset.hpp); --no-reset,
  // `reset-on-return: false` turn it off.
  bool resetOnReturn = true;
  // Called once per device as it moves (not in dry runs).
  std::function<void(const DeviceMove&, const Status&)> onDevice;
  // Test hook, see ApplyOptions::afterStep.
  std::function<bool(size_t)> afterStep;
};

// What happened, step by step, so callers can report however they like.
struct Convergence {
  std::optional<Snapshot> snapshot;       // the host the plan was made from
  std::optional<Plan> plan;               // set once planned
  DeviceModes modes;                      // the mode of each selected device, once resolved
  std::vector<std::string> ruleWarnings;  // rules that matched no GPU
  std::optional<size_t> recovered;        // devices put back from a journal of a run that died
  bool journalPending = false;  // dry run: a journal exists that a real run resolves first
  // The host driver comes from the GPU Operator (host-driver-provider, resolved against the host).
  bool operatorDriver = false;
  size_t stepsRun = 0;
  double seconds = 0;
  Status status;  // ok, or the error that stopped the run (host left as it was)
};

// The vGPU config: the named config of FILE, or nullopt for the embedded defaults. FILE is a host
// path, read through `host` (under --root, as every file option is). Errors name the file, where
// it was looked for, the config and the fix (exit 2).
Result<std::optional<std::vector<VgpuConfigEntry>>> loadVgpuConfig(const std::string& file,
                                                                   const std::string& name,
                                                                   const Host& host);

// Converges the host behind `k` to `opt.mode` and `opt.rules`, both ways in one run on a mixed
// node. After a real run that succeeds, the mode (and on a split each GPU's mode) is recorded in
// run/hostprep/last-mode (the status document's desired mode when no config names one) and the
// selection in run/hostprep/last-selection (the devices `hostprep status` shows when neither its
// flags nor the config name them).
Convergence converge(Kernel& k, const ConvergeOptions& opt);

// How runs name what they converge to, from the GPUs per mode (Plan::split): "vm-passthrough",
// or on a split "mixed (container: 1, vm-passthrough: 3)"; `fallback` when there is no GPU.
std::string modeSummary(const std::map<Mode, int>& split, Mode fallback);
// "in vm-passthrough mode", or on a split "in their modes, mixed (container: 1, ...)".
std::string inModes(const std::map<Mode, int>& split, Mode fallback);
// What a run with nothing to do says: "nothing to do: 4 device(s) already in vm-passthrough mode".
std::string nothingToDo(const Plan& plan);
// "waiting for the host driver from the GPU Operator's driver container (module nvidia not loaded
// yet): 0000:41:00.0" when the plan leaves GPUs waiting for it (DeviceMove::awaitsDriver).
std::optional<std::string> waitingText(const Plan& plan);
// What the agent converges to before it has a plan: "vm-passthrough", or with devices rules
// "vm-passthrough and 2 devices rule(s)".
std::string targetText(Mode mode, const std::vector<DeviceRule>& rules);

}  // namespace hostprep
