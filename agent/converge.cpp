#include "agent/converge.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <system_error>

#include "agent/config.hpp"
#include "agent/local_file.hpp"
#include "agent/phase_clock.hpp"
#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/operator_driver.hpp"
#include "drivers/model/platform.hpp"
#include "drivers/published/status.hpp"
#include "drivers/published/status_reads.hpp"
#include "drivers/seam/holders.hpp"
#include "drivers/switch/recover.hpp"

namespace hostprep {

Result<std::optional<std::vector<VgpuConfigEntry>>> loadVgpuConfig(const std::string& file,
                                                                   const std::string& name,
                                                                   const Host& host) {
  using Out = std::optional<std::vector<VgpuConfigEntry>>;
  if (file.empty()) {
    if (name != "default") {
      return usageError("--vgpu-config-name: '" + name +
                            "' needs --vgpu-config; the embedded defaults only have 'default'",
                        "pass --vgpu-config FILE");
    }
    return Out{};
  }
  constexpr size_t kMaxConfig = size_t{1} << 20;
  auto text = readHostFile(host, "--vgpu-config", file, kMaxConfig);
  if (!text) return text.error();
  auto cfg = parseVgpuConfig(*text, file);
  if (!cfg) return cfg.error();
  const auto* entries = cfg->find(name);
  if (!entries) {
    return usageError("--vgpu-config-name: '" + name + "' is not a config in " + file +
                          " (it has: " + join(cfg->names(), ", ") + ")",
                      "pass one of those names");
  }
  return Out{*entries};
}

namespace {

// After a run that reached its plan: the mode (each GPU's, when one differs from the default)
// and the selection, for `hostprep status`.
void remember(Host& host, const ConvergeOptions& opt, const Plan& plan) {
  LastMode last{opt.mode, {}};
  for (const auto& mv : plan.moves) {
    if (mv.role == Role::kGpu) last.gpus[mv.bdf] = mv.mode;
  }
  const bool split = std::any_of(last.gpus.begin(), last.gpus.end(),
                                 [&](const auto& g) { return g.second != opt.mode; });
  if (!split) last.gpus.clear();  // one mode: the file as it always was
  if (auto s = writeLastMode(host, last); !s) spdlog::warn("{}", s.error().describe());
  if (auto s = writeLastSelection(host, opt.selection); !s)
    spdlog::warn("{}", s.error().describe());
}

}  // namespace

std::string modeSummary(const std::map<Mode, int>& split, Mode fallback) {
  if (split.size() <= 1)
    return std::string(toString(split.empty() ? fallback : split.begin()->first));
  std::vector<std::string> parts;
  for (const auto& [m, n] : split)
    parts.push_back(std::string(toString(m)) + ": " + std::to_string(n));
  return "mixed (" + join(parts, ", ") + ")";
}

std::string inModes(const std::map<Mode, int>& split, Mode fallback) {
  if (split.size() <= 1) return "in " + modeSummary(split, fallback) + " mode";
  return "in their modes, " + modeSummary(split, fallback);
}

std::string nothingToDo(const Plan& plan) {
  return "nothing to do: " + std::to_string(plan.moves.size()) + " device(s) already " +
         inModes(plan.split(), plan.mode);
}

std::optional<std::string> waitingText(const Plan& plan) {
  const auto waiting = plan.awaitingDriver();
  if (waiting.empty()) return std::nullopt;
  std::string module;
  std::vector<std::string> bdfs;
  for (const auto& mv : plan.moves) {
    if (!mv.awaitsDriver) continue;
    module = mv.toModule;
    bdfs.push_back(mv.bdf.str());
  }
  return waitingForOperatorDriver(module) + ": " + join(bdfs, ", ");
}

std::string targetText(Mode mode, const std::vector<DeviceRule>& rules) {
  std::string s(toString(mode));
  if (!rules.empty()) s += " and " + std::to_string(rules.size()) + " devices rule(s)";
  return s;
}

Convergence converge(Kernel& k, const ConvergeOptions& opt) {
  Convergence c;
  PhaseClock clock;
  Host& host = k.host;
  auto failed = [&](Error e) {
    c.status = std::move(e);
    return std::move(c);
  };

  // 1. One run at a time (a dry run only reads).
  std::optional<RunLock> lock;
  if (!opt.dryRun) {
    auto l = RunLock::acquire(host, opt.lockTimeout);
    if (!l) return failed(l.error());
    lock.emplace(std::move(*l));
  }

  ApplyOptions apply;
  apply.unbindTimeout = opt.unbindTimeout;
  apply.hostDriver = opt.selection.hostDriver;
  apply.holderNodes = {holderGlob(opt.holderNodes, opt.selection.hostDriver)};
  apply.onDevice = opt.onDevice;
  apply.afterStep = opt.afterStep;

  // 2. A journal left by a run that died is resolved first: the host goes back to where it was.
  if (opt.dryRun) {
    if (auto jr = readJournal(host); jr && *jr) c.journalPending = true;
  } else {
    auto rec = recoverJournal(k, apply);
    if (!rec) return failed(rec.error());
    if (*rec) {
      c.recovered = **rec;
      spdlog::warn("rolled back an interrupted run: {} device(s) restored", **rec);
    }
    // A recover killed between removing functions and rescanning their bus.
    auto rescan = resolveInterruptedRescan(host);
    if (!rescan) return failed(rescan.error());
    if (*rescan) spdlog::warn("rescanned the PCI bus an interrupted recover left removed");
  }

  clock.lap("lock and journal");

  // Who holds what under /dev/ (every process's descriptors), scanned on a second thread while
  // the host is read and the plan made; the plan then says which nodes matter (step 7). A run
  // that fails or has nothing to do waits for the scan at its return (the future's destructor).
  std::future<std::vector<OpenNode>> openNodes;
  if (!opt.dryRun) {
    try {
      openNodes = std::async(std::launch::async, [&host] { return openDeviceNodes(host); });
    } catch (const std::system_error&) {  // no thread to be had: the scan runs at step 7
    }
  }

  // 3. Read the host, once, as the recovery left it: whole only what the selection can reach.
  SelectionOptions selection = opt.selection;
  if (const auto fabric = readFabricManager(host).mode()) {
    selection.withNvSwitches = nvSwitchesWithGpus(opt.nvSwitch, *fabric);
  } else {  // a FABRIC_MODE that is no mode: preflight's gpu.fabric reports it; leave them
    selection.withNvSwitches = opt.nvSwitch == NvSwitchPolicy::kWithGpus;
  }
  auto read = readPlanSnapshot(host, selection);
  if (!read) return failed(read.error());
  const Snapshot& snap = c.snapshot.emplace(std::move(*read));  // kept for the caller, not copied

  clock.lap("read the host");

  // 4. Select the GPUs and their companions; refuse unsafe groups.
  auto sel = selectDevices(snap, selection);
  if (!sel) return failed(sel.error());
  if (sel->targets.empty()) {
    std::string what = opt.selection.gpuIds.empty() ? "NVIDIA GPU (vendor 10de, class 0300/0302)"
                                                    : "device with the given --gpu-ids";
    return failed(sysError("no " + what + " found on this host", ENODEV,
                           "check 'lspci -nn'; for other devices pass --gpu-ids VVVV:DDDD"));
  }
  // 5. The mode of each device (the rules; companions follow their GPU), and the mixes refused:
  //    container with vm-vgpu (exit 2), one IOMMU group in two modes (exit 3).
  auto resolved = resolveModes(snap, *sel, opt.mode, opt.rules);
  for (const auto& w : resolved.warnings) spdlog::warn("config: {}", w);
  c.modes = resolved.modes;
  c.ruleWarnings = resolved.warnings;
  const auto split = modeSplit(*sel, c.modes);
  if (auto st = checkModeMix(split); !st) return failed(st.error());
  if (auto st = checkGroupModes(snap, *sel, c.modes); !st) return failed(st.error());
  // Only vm-passthrough hands whole groups to vfio; vm-vgpu keeps the GPU on its host driver.
  std::vector<std::string> unsafe;
  for (const auto& p : sel->problems) {
    if (modeOf(c.modes, p.gpu, opt.mode) == Mode::kVmPassthrough)
      unsafe.push_back(p.describe(snap));
  }
  if (!unsafe.empty() && !opt.force) {
    return failed(refusal("refusing to give these IOMMU groups to vfio: " + join(unsafe, "; "),
                          "a VM would take the other devices with the GPU; move the GPU to "
                          "another slot, or pass --force if you really mean it"));
  }

  // 6. Plan (vm-vgpu: against the vGPU config and the live vGPU view; other modes tear vGPU
  //    devices and VFs down first).
  // modules.alias (a megabyte on a distribution kernel) names the VFIO variant driver of a
  // device moving to vm-passthrough; no other mode reads it.
  PlanInputs in{opt.mode, opt.selection.hostDriver, {}};
  in.operatorDriver = c.operatorDriver = operatorProvidesDriver(
      host, opt.selection.hostDriverProvider, snap.kernelRelease, opt.selection.hostDriver);
  const bool passthrough = opt.mode == Mode::kVmPassthrough ||
                           std::any_of(c.modes.begin(), c.modes.end(), [](const auto& m) {
                             return m.second == Mode::kVmPassthrough;
                           });
  if (passthrough) {
    in.modulesAlias = vfioAliasLines(
        host.read(hostPath("lib/modules", snap.kernelRelease, "modules.alias"), 64u << 20)
            .value_or(""));
  }
  in.vgpuHost = readPlanVgpuHost(host, snap, *sel);
  in.vgpuConfigName = opt.vgpuConfigName;
  in.modes = c.modes;
  in.resetOnReturn = opt.resetOnReturn;
  if (split.count(Mode::kVmVgpu)) {
    auto cfg = loadVgpuConfig(opt.vgpuConfigFile, opt.vgpuConfigName, host);
    if (!cfg) return failed(cfg.error());
    in.vgpuConfig = std::move(*cfg);
    in.vgpuVfioAvailable = k.modules.available("nvidia_vgpu_vfio");
  }
  auto made = makePlan(snap, *sel, in);
  clock.lap("select and plan");
  if (!made) return failed(made.error());
  // A GPU that --devices left out moves only as the companion of a selected one with --force.
  std::vector<std::string> dragged;
  for (const auto& u : sel->unselectedGpus) {
    for (const auto& mv : made->moves) {
      if (mv.bdf == u.gpu && mv.changes) dragged.push_back(u.describe(snap));
    }
  }
  if (!dragged.empty() && !opt.force) {
    return failed(refusal("refusing to move a GPU that was not selected: " + join(dragged, "; "),
                          "select it too (--devices), or pass --force to move it with the other"));
  }
  const Plan& plan = c.plan.emplace(std::move(*made));
  if (opt.dryRun) return c;
  if (plan.noop()) {
    remember(host, opt, plan);
    return c;
  }

  // 7. Nobody may be holding what we are about to unbind, nor using a VF we would remove.
  if (auto used = vfsInUse(snap, plan, opt.selection.hostDriver); !used.empty() && !opt.force) {
    return failed(refusal("the plan disables SR-IOV under VFs that are in use: " + join(used, "; "),
                          "stop the VMs using those VFs and unbind them, or pass --force to "
                          "remove them anyway"));
  }
  auto holders =
      planHolders(host, plan, apply, openNodes.valid() ? openNodes.get() : openDeviceNodes(host));
  if (!holders.empty() && !opt.force) {
    std::vector<std::string> who;
    for (const auto& h : holders) who.push_back(h.describe());
    return failed(refusal("devices are in use: " + join(who, "; "),
                          "stop those processes (e.g. systemctl stop nvidia-persistenced, or "
                          "the VMs using the vGPU devices), or pass --force"));
  }

  clock.lap("holders");

  // 8. Apply.
  auto started = std::chrono::steady_clock::now();
  auto res = applyPlan(k, plan, apply);
  clock.lap("apply");
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!res) return failed(res.error());
  c.stepsRun = res->stepsRun;
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("time: {} journal write(s) {:.1f} ms", res->journalWrites, res->journalMs);
    for (const auto& [i, ms] : res->stepMs) {
      spdlog::debug("time: step {} ({}) {:.1f} ms", i + 1, plan.steps[i].describe(), ms);
    }
  }
  clock.lap("report");
  remember(host, opt, plan);
  clock.lap("remember the mode and selection");
  return c;
}

}  // namespace hostprep
