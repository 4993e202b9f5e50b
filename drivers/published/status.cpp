#include "drivers/published/status.hpp"

#include <algorithm>
#include <array>
#include <set>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/operator_driver.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {
namespace {

ActualMode asActual(Mode m) {
  switch (m) {
    case Mode::kContainer:
      return ActualMode::kContainer;
    case Mode::kVmPassthrough:
      return ActualMode::kVmPassthrough;
    case Mode::kVmVgpu:
      return ActualMode::kVmVgpu;
  }
  return ActualMode::kNone;
}

bool isGpuRole(Role r) { return r == Role::kGpu || r == Role::kNvSwitch; }

// The driver a device wants in a mode, by the same rules as the plan (drivers/model/plan.cpp): a
// vfio driver in passthrough; elsewhere, for GPUs, NVSwitches and vGPU VFs, the driver their host
// module gives them (host_module.hpp); any driver but vfio, or none, for a companion outside
// passthrough.
void judgeDriver(const Snapshot& s, Mode mode, Role role, const PciFunction& f,
                 const StatusInputs& in, StatusDevice& dev) {
  const bool host = (mode != Mode::kVmPassthrough && isGpuRole(role)) ||
                    (mode == Mode::kVmVgpu && role == Role::kVf);
  if (mode == Mode::kVmPassthrough && role != Role::kVf) {
    dev.wantedDriver = vfioDriverName(bestVfioModule(in.modulesAlias, f.modalias));
  } else if (host) {
    const std::string module = normalizeModuleName(in.selection.hostDriver);
    dev.wantedModule = module;
    if (auto d = hostDriverOf(s, f, module); !d.empty()) dev.wantedDriver = d;
  }
  if (role == Role::kVf && mode != Mode::kVmVgpu) return;  // not judged
  if (host && mode == Mode::kContainer && in.operatorDriver && !f.driver &&
      !s.loadedModules.count(*dev.wantedModule)) {
    return;  // waits for the GPU Operator's driver container: not drift (HostDriverProvided)
  }
  if (host) {
    dev.onWantedDriver = isDriverOfModule(s, f.driver.value_or(""), *dev.wantedModule);
  } else if (dev.wantedDriver) {
    dev.onWantedDriver = f.driver == dev.wantedDriver;
  } else {
    dev.onWantedDriver = !(f.driver && isVfioDriver(*f.driver));
  }
}

Condition makeCondition(const StatusInputs& in, std::string type, ConditionStatus st,
                        std::string reason, std::string message) {
  Condition c{std::move(type), st, std::move(reason), std::move(message), in.observedTime};
  for (const auto& p : in.previous) {
    if (p.type == c.type && p.status == c.status && p.lastTransitionTime != 0) {
      c.lastTransitionTime = p.lastTransitionTime;
    }
  }
  return c;
}

// Every member of a group given to vfio must be driverless, or on vfio, pci-stub or pcieport
// (letsVfioTakeGroup), or opening the group fails ("group N is not viable"; kernel
// Documentation/driver-api/vfio.rst).
std::vector<std::string> nonViableGroups(const Snapshot& s, const Selection& sel) {
  std::set<int> groups;
  for (const auto& t : sel.targets) {
    const auto* f = s.find(t.bdf);
    if (f && f->iommuGroup && f->driver && isVfioDriver(*f->driver)) groups.insert(*f->iommuGroup);
  }
  std::vector<std::string> bad;
  for (int g : groups) {
    std::vector<std::string> offenders;
    for (const auto* m : s.groupMembers(g)) {
      if (letsVfioTakeGroup(*m)) continue;
      offenders.push_back(m->bdf.str() + " on " + *m->driver);
    }
    if (!offenders.empty()) {
      bad.push_back("IOMMU group " + std::to_string(g) + ": " + join(offenders, ", "));
    }
  }
  return bad;
}

// DevicesResponsive: does every listed device still answer? A function whose config space reads
// 0xffff (PciFunction::responsive) was left so by a VM, fell off the bus or sits in D3cold without
// power: no driver can use it until it is reset, removed and rescanned, or the host reboots.
Condition responsiveCondition(const StatusInputs& in, const std::vector<StatusDevice>& devices) {
  std::vector<std::string> silent, bdfs;
  size_t known = 0;
  for (const auto& dv : devices) {
    const PciFunction& f = *dv.fn;
    if (!f.responsive) continue;
    ++known;
    if (*f.responsive) continue;
    bdfs.push_back(f.bdf.str());
    silent.push_back(f.bdf.str() + (f.powerState ? " (" + *f.powerState + ")" : ""));
  }
  if (!silent.empty()) {
    return makeCondition(in, "DevicesResponsive", ConditionStatus::kFalse, "DevicesNotAnswering",
                         join(silent, ", ") + (silent.size() == 1 ? " does" : " do") +
                             " not answer (config space reads 0xffff): run 'hostprep recover "
                             "--devices " +
                             join(bdfs, ",") + "', else reboot the host");
  }
  if (known == 0 && !devices.empty()) {
    return makeCondition(in, "DevicesResponsive", ConditionStatus::kUnknown, "ConfigUnreadable",
                         "no selected device's config space could be read");
  }
  return makeCondition(in, "DevicesResponsive", ConditionStatus::kTrue, "DevicesAnswer",
                       devices.empty() ? std::string("no selected device")
                                       : std::to_string(known) + " device(s) answer");
}

}  // namespace

std::string_view toString(ActualMode m) {
  constexpr std::array<std::string_view, 5> kNames{"container", "vm-passthrough", "vm-vgpu",
                                                   "mixed", "none"};
  return kNames[static_cast<size_t>(m)];
}

std::string_view toString(ConditionStatus s) {
  constexpr std::array<std::string_view, 3> kNames{"True", "False", "Unknown"};
  return kNames[static_cast<size_t>(s)];
}

ActualMode actualMode(const Snapshot& s, const VgpuHost& v, const Selection& sel,
                      std::string_view hostDriver) {
  std::set<ActualMode> seen;
  for (const auto& t : sel.targets) {
    if (!isGpuRole(t.role)) continue;
    const auto* f = s.find(t.bdf);
    if (!f) continue;
    if (f->driver && isVfioDriver(*f->driver)) {
      seen.insert(ActualMode::kVmPassthrough);
    } else if (isDriverOfModule(s, f->driver.value_or(""), hostDriver)) {
      seen.insert(isVgpuHost(*f, v) ? ActualMode::kVmVgpu : ActualMode::kContainer);
    } else {
      seen.insert(ActualMode::kNone);
    }
  }
  if (seen.empty()) return ActualMode::kNone;
  if (seen.size() == 1) return *seen.begin();
  return ActualMode::kMixed;
}

std::string StatusDevice::wanted() const {
  if (wantedDriver) return *wantedDriver;
  if (wantedModule) return "a driver of module " + *wantedModule;
  return "a non-vfio driver";
}

const Condition* StatusDocument::condition(std::string_view type) const {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

std::vector<const StatusDevice*> StatusDocument::drift() const {
  std::vector<const StatusDevice*> out;
  for (const auto& d : devices) {
    if (d.onWantedDriver == false) out.push_back(&d);
  }
  return out;
}

std::string StatusDocument::desiredSummary() const {
  if (desiredSplit.size() > 1) return "mixed";
  if (auto m = singleMode(desiredSplit)) return std::string(toString(*m));
  return desiredMode ? std::string(toString(*desiredMode)) : std::string();
}

StatusDocument buildStatus(const Snapshot& s, const VgpuHost& v, const StatusInputs& in) {
  StatusDocument d;
  d.nodeName = in.nodeName;
  d.observedTime = in.observedTime;
  d.agentVersion = in.agentVersion;
  d.desiredMode = in.desiredMode;
  d.desiredModeSource = in.desiredMode ? in.desiredModeSource : std::string();
  d.pciIdsFound = in.pciIds.has_value();
  d.iommufd = s.iommufd;

  // 1. The devices hostprep manages: the selection, plus the VFs of selected GPUs.
  auto sel = selectDevices(s, in.selection);
  Selection selection = sel ? *sel : Selection{};
  std::vector<Target> listed = selection.targets;
  for (const auto& t : selection.targets) {
    const auto* f = s.find(t.bdf);
    if (!f || !isGpuRole(t.role)) continue;
    for (const auto& vf : f->virtfns) {
      if (!selection.find(vf)) listed.push_back({vf, Role::kVf, std::nullopt});
    }
  }
  // The desired mode of each device: the default, or the rule that matches its GPU.
  DeviceModes modes;
  if (in.desiredMode) {
    modes = resolveModes(s, selection, *in.desiredMode, in.rules).modes;
    d.desiredSplit = modeSplit(selection, modes);
  }
  // pci.ids is a megabyte searched per name, and a node's GPUs are mostly of one model: each
  // vendor:device is looked up once per document.
  std::map<std::pair<uint16_t, uint16_t>, std::optional<std::string>> names;
  for (const auto& t : listed) {
    const auto* f = s.find(t.bdf);
    if (!f) continue;
    StatusDevice dev;
    dev.fn = f;
    dev.role = t.role;
    if (in.pciIds) {
      auto [name, fresh] = names.try_emplace({f->id.vendor, f->id.device});
      if (fresh) name->second = pciIdsDeviceName(*in.pciIds, f->id.vendor, f->id.device);
      dev.name = name->second;
    }
    if (in.desiredMode) {
      const Mode mode = modeOf(modes, f->physfn.value_or(t.bdf), *in.desiredMode);  // VF: its PF's
      dev.desiredMode = mode;
      judgeDriver(s, mode, t.role, *f, in, dev);
    }
    d.devices.push_back(std::move(dev));
  }
  for (auto& vg : observedVgpus(v)) {
    std::string resource = vgpuResourceName(vg.typeName);
    d.vgpu.push_back({std::move(vg), std::move(resource)});
  }

  // 2. Mode, advertised resources, and what KubeVirt must permit of them.
  d.actualMode = actualMode(s, v, selection, in.selection.hostDriver);
  auto advertised = advertise(s, v, selection, in.selection.hostDriver, in.pciIds);
  d.advertised = std::move(advertised.resources);
  d.permitted = std::move(advertised.permitted);

  // 3. Converged: the desired mode is the actual one and the plan prepare would make is empty.
  bool gpus = !selection.gpus().empty();
  std::optional<std::string> planProblem;
  bool planNoop = false;
  if (in.desiredMode && sel && gpus) {
    PlanInputs pin{*in.desiredMode, in.selection.hostDriver, in.modulesAlias};
    pin.modes = modes;
    pin.operatorDriver = in.operatorDriver;
    auto plan = makePlan(s, selection, pin);
    if (plan) {
      planNoop = plan->noop();
      if (!planNoop) planProblem = std::to_string(plan->steps.size()) + " step(s) pending";
    } else if (d.desiredSplit.count(Mode::kVmVgpu) && plan.error().exit == Exit::kUsage) {
      planNoop = true;  // this build plans no vGPU moves: judge by drivers and mode alone
    } else {
      planProblem = plan.error().describe();
    }
  }
  auto drift = d.drift();
  const auto single = singleMode(d.desiredSplit);
  const ActualMode wantedActual =
      d.desiredSplit.size() > 1
          ? ActualMode::kMixed
          : asActual(single.value_or(in.desiredMode.value_or(Mode::kContainer)));
  // GPUs waiting for the GPU Operator's host driver (container mode, its module not loaded).
  const std::string hostModule = normalizeModuleName(in.selection.hostDriver);
  std::vector<std::string> waiting;
  for (const auto& dev : d.devices) {
    if (dev.wantedModule && !dev.onWantedDriver.has_value() && isGpuRole(dev.role) &&
        dev.desiredMode && *dev.desiredMode == Mode::kContainer)
      waiting.push_back(dev.fn->bdf.str());
  }
  d.converged = in.desiredMode && sel && gpus && drift.empty() && planNoop &&
                d.actualMode == wantedActual && !in.convergeError && waiting.empty();

  // 4. Conditions.
  if (in.preflight) {
    d.conditions.push_back(makeCondition(
        in, "PreflightPassed",
        in.preflight->passed ? ConditionStatus::kTrue : ConditionStatus::kFalse,
        in.preflight->passed ? "ChecksPassed" : "ChecksFailed", in.preflight->message));
  } else {
    d.conditions.push_back(makeCondition(in, "PreflightPassed", ConditionStatus::kUnknown,
                                         "NotEvaluated",
                                         "run 'hostprep preflight' for the host checks"));
  }
  if (!sel) {
    d.conditions.push_back(makeCondition(in, "DevicesOnWantedDriver", ConditionStatus::kUnknown,
                                         "SelectionFailed", sel.error().describe()));
  } else if (!gpus) {
    d.conditions.push_back(makeCondition(in, "DevicesOnWantedDriver", ConditionStatus::kUnknown,
                                         "NoDevices", "no selected GPU on this host"));
  } else if (!in.desiredMode) {
    d.conditions.push_back(makeCondition(in, "DevicesOnWantedDriver", ConditionStatus::kUnknown,
                                         "NoDesiredMode",
                                         "no mode in the config and no prepare run since boot"));
  } else if (!drift.empty()) {
    std::vector<std::string> what;
    for (const auto* dv : drift) {
      what.push_back(dv->fn->bdf.str() + " on " + dv->fn->driver.value_or("no driver") +
                     ", wants " + dv->wanted());
    }
    std::string msg = join(what, "; ");
    if (in.convergeError) msg += "; last convergence failed: " + *in.convergeError;
    d.conditions.push_back(makeCondition(in, "DevicesOnWantedDriver", ConditionStatus::kFalse,
                                         "DevicesOffWantedDriver", msg));
  } else if (in.convergeError) {
    d.conditions.push_back(makeCondition(in, "DevicesOnWantedDriver", ConditionStatus::kFalse,
                                         "ConvergeFailed", *in.convergeError));
  } else if (!waiting.empty()) {
    d.conditions.push_back(makeCondition(
        in, "DevicesOnWantedDriver", ConditionStatus::kUnknown, "WaitingForHostDriver",
        waitingForOperatorDriver(hostModule) + ": " + join(waiting, ", ")));
  } else if (planProblem) {
    d.conditions.push_back(makeCondition(in, "DevicesOnWantedDriver", ConditionStatus::kFalse,
                                         "StepsPending", *planProblem));
  } else {
    d.conditions.push_back(makeCondition(in, "DevicesOnWantedDriver", ConditionStatus::kTrue,
                                         "AllOnWantedDriver",
                                         std::to_string(d.devices.size()) + " device(s) on their " +
                                             d.desiredSummary() + " driver"));
  }
  if (in.operatorDriver) {
    // Not a failure: the GPU Operator's driver container loads the module when it starts.
    if (s.loadedModules.count(hostModule)) {
      d.conditions.push_back(makeCondition(
          in, "HostDriverProvided", ConditionStatus::kTrue, "OperatorDriverLoaded",
          "module " + hostModule + " from the GPU Operator's driver container is loaded"));
    } else {
      d.conditions.push_back(makeCondition(in, "HostDriverProvided", ConditionStatus::kFalse,
                                           "WaitingForOperatorDriver",
                                           waitingForOperatorDriver(hostModule)));
    }
  }
  if (!in.otherAgents.empty()) {
    d.conditions.push_back(makeCondition(
        in, "SingleOwner", ConditionStatus::kFalse, "OperatorAgentActive",
        "the GPU Operator's agents move this node's GPUs too: " + join(in.otherAgents, "; ") +
            "; set vfioManager.enabled=false and vgpuDeviceManager.enabled=false in the "
            "ClusterPolicy (or keep hostprep off this node)"));
  }
  auto bad = nonViableGroups(s, selection);
  if (bad.empty()) {
    d.conditions.push_back(makeCondition(in, "GroupsViable", ConditionStatus::kTrue, "GroupsViable",
                                         "every IOMMU group with a vfio-bound device is viable"));
  } else {
    d.conditions.push_back(makeCondition(in, "GroupsViable", ConditionStatus::kFalse,
                                         "DeviceOnHostDriver", join(bad, "; ")));
  }
  d.conditions.push_back(responsiveCondition(in, d.devices));
  return d;
}

}  // namespace hostprep
