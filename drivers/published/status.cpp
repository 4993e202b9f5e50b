#include "drivers/published/status.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <set>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/operator_driver.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/model/resource_names.hpp"
#include "drivers/seam/state_file.hpp"

namespace hostprep {
namespace {

using ojson = nlohmann::ordered_json;

std::string hex4(uint16_t v) { return hexDigits(v, 4); }
std::string hex6(uint32_t v) { return hexDigits(v & 0xffffff, 6); }

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

// The device plugin's drivers (kubevirt-gpu-device-plugin; nvgrace for Grace Hopper).
bool isPluginVfioDriver(const std::optional<std::string>& d) {
  return d && (*d == "vfio-pci" || *d == "nvgrace_gpu_vfio_pci" || *d == "nvgrace-gpu-vfio-pci");
}

// The mark of the vGPU host driver: the function offers vGPU types (mdev types, or a per-VF
// creatable_vgpu_types file).
bool vgpuCapable(const VgpuParent& p) { return !p.mdevTypes.empty() || p.perVf; }

// A GPU is a vGPU host when it, or one of its VFs, offers vGPU types or carries a vGPU.
bool isVgpuHost(const PciFunction& gpu, const VgpuHost& v) {
  auto related = [&](const Bdf& b) {
    return b == gpu.bdf ||
           std::find(gpu.virtfns.begin(), gpu.virtfns.end(), b) != gpu.virtfns.end();
  };
  for (const auto& [b, p] : v.parents) {
    if (vgpuCapable(p) && related(b)) return true;
  }
  for (const auto& d : v.devices) {
    if (related(d.parent)) return true;
  }
  for (const auto& d : v.otherMdevs) {
    if (d.parent && related(*d.parent)) return true;
  }
  return false;
}

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

std::string promEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// The devices the sandbox plugin advertises for passthrough: it walks PCI functions in address
// order, keeps vendor 10de bound to a vfio driver, and counts one device per IOMMU group under
// the resource of the group's first such function (each device id's name looked up in pci.ids
// once).
struct PluginPassthrough {
  const PciFunction* fn;  // the function the group's resource is named after
  std::string resource;
};
std::vector<PluginPassthrough> pluginPassthrough(const Snapshot& s,
                                                 std::optional<std::string_view> pciIds) {
  std::vector<PluginPassthrough> out;
  std::set<int> seenGroups;
  std::map<uint16_t, std::string> resourceOf;
  for (const auto& f : s.pci) {  // sorted by address, as the plugin's directory walk is
    if (f.id.vendor != kNvidiaVendor || !isPluginVfioDriver(f.driver) || !f.iommuGroup) continue;
    if (!seenGroups.insert(*f.iommuGroup).second) continue;
    auto [resource, fresh] = resourceOf.try_emplace(f.id.device);
    if (fresh) resource->second = passthroughResourceName(pciIds.value_or(""), f.id.device);
    out.push_back({&f, resource->second});
  }
  return out;
}

std::map<std::string, int> advertisedFrom(const std::vector<PluginPassthrough>& passthrough,
                                          const Snapshot& s, const VgpuHost& v,
                                          const Selection& sel, std::string_view hostDriver) {
  std::map<std::string, int> out;
  for (const auto& p : passthrough) ++out[p.resource];
  for (const auto& d : observedVgpus(v)) {
    if (!d.typeName.empty()) ++out[vgpuResourceName(d.typeName)];
  }
  int gpus = 0;
  for (const auto& t : sel.targets) {
    const auto* f = s.find(t.bdf);
    if (t.role == Role::kGpu && f && isDriverOfModule(s, f->driver.value_or(""), hostDriver) &&
        !isVgpuHost(*f, v))
      ++gpus;
  }
  if (gpus > 0) out[std::string(kContainerResource)] += gpus;
  return out;
}

// KubeVirt's pciVendorSelector: "vendor_id:product_id", written upper-case as in its user guide
// ("10DE:1EB8"; https://kubevirt.io/user-guide/compute/host-devices/).
std::string vendorSelector(const PciId& id) {
  std::string s = hex4(id.vendor) + ":" + hex4(id.device);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

PermittedHostDevices permittedFrom(const std::vector<PluginPassthrough>& passthrough,
                                   const std::vector<StatusVgpu>& vgpus) {
  // By resource name: one entry each, sorted; the first device of the walk gives the selector.
  std::map<std::string, std::string> pci, mediated;
  for (const auto& p : passthrough) pci.try_emplace(p.resource, vendorSelector(p.fn->id));
  for (const auto& vg : vgpus) {
    if (!vg.device.typeName.empty()) mediated.try_emplace(vg.resource, vg.device.typeName);
  }
  PermittedHostDevices out;
  for (auto& [resource, selector] : pci) out.pci.push_back({selector, resource});
  for (auto& [resource, selector] : mediated) out.mediated.push_back({selector, resource});
  return out;
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

std::vector<ObservedVgpu> observedVgpus(const VgpuHost& v) {
  std::vector<ObservedVgpu> mdevs, perVf;
  for (const auto& d : v.devices) {
    ObservedVgpu o{d.iface, d.uuid, d.parent, d.typeId, d.typeName};
    if (d.iface == VgpuInterface::kPerVf && o.typeName.empty()) o.typeName = o.typeId;
    (d.iface == VgpuInterface::kMdev ? mdevs : perVf).push_back(std::move(o));
  }
  for (const auto& d : v.otherMdevs)
    mdevs.push_back({VgpuInterface::kMdev, d.uuid, d.parent, d.typeId, d.typeName});
  std::sort(mdevs.begin(), mdevs.end(), [](auto& a, auto& b) { return a.uuid < b.uuid; });
  std::stable_sort(perVf.begin(), perVf.end(),
                   [](auto& a, auto& b) { return a.parent < b.parent; });
  mdevs.insert(mdevs.end(), perVf.begin(), perVf.end());
  return mdevs;
}

std::map<std::string, int> advertisedResources(const Snapshot& s, const VgpuHost& v,
                                               const Selection& sel, std::string_view hostDriver,
                                               std::optional<std::string_view> pciIds) {
  return advertisedFrom(pluginPassthrough(s, pciIds), s, v, sel, hostDriver);
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
  const auto passthrough = pluginPassthrough(s, in.pciIds);
  d.advertised = advertisedFrom(passthrough, s, v, selection, in.selection.hostDriver);
  d.permitted = permittedFrom(passthrough, d.vgpu);

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

nlohmann::ordered_json toJson(const StatusDocument& d) {
  auto opt = [](const auto& o) { return o ? ojson(*o) : ojson(nullptr); };
  ojson j;
  j["schemaVersion"] = d.schemaVersion;
  j["nodeName"] = d.nodeName;
  j["observedTime"] = formatTime(d.observedTime);
  j["agentVersion"] = d.agentVersion;
  j["desiredMode"] = d.desiredMode ? ojson(d.desiredSummary()) : ojson(nullptr);
  j["desiredModeSource"] =
      d.desiredModeSource.empty() ? ojson(nullptr) : ojson(d.desiredModeSource);
  j["desiredSplit"] = ojson::object();
  for (const auto& [m, n] : d.desiredSplit) j["desiredSplit"][std::string(toString(m))] = n;
  j["actualMode"] = std::string(toString(d.actualMode));
  j["converged"] = d.converged;
  j["conditions"] = ojson::array();
  for (const auto& c : d.conditions) {
    j["conditions"].push_back({{"type", c.type},
                               {"status", std::string(toString(c.status))},
                               {"reason", c.reason},
                               {"message", c.message},
                               {"lastTransitionTime", formatTime(c.lastTransitionTime)}});
  }
  j["devices"] = ojson::array();
  for (const auto& dv : d.devices) {
    const PciFunction& f = *dv.fn;
    ojson e;
    e["bdf"] = f.bdf.str();
    e["vendorId"] = hex4(f.id.vendor);
    e["deviceId"] = hex4(f.id.device);
    e["subsystemVendorId"] = hex4(f.subsystem.vendor);
    e["subsystemDeviceId"] = hex4(f.subsystem.device);
    e["name"] = opt(dv.name);
    e["class"] = hex6(f.classCode);
    e["className"] = className(f.classCode);
    e["role"] = std::string(toString(dv.role));
    e["desiredMode"] =
        dv.desiredMode ? ojson(std::string(toString(*dv.desiredMode))) : ojson(nullptr);
    e["iommuGroup"] = opt(f.iommuGroup);
    e["driver"] = opt(f.driver);
    e["driverOverride"] = opt(f.driverOverride);
    e["wantedDriver"] = opt(dv.wantedDriver);
    e["wantedModule"] = opt(dv.wantedModule);
    e["onWantedDriver"] = opt(dv.onWantedDriver);
    e["numaNode"] = f.numaNode && *f.numaNode >= 0 ? ojson(*f.numaNode) : ojson(nullptr);
    if (f.sriovTotalVfs) {
      e["sriov"] = {{"totalVfs", *f.sriovTotalVfs}, {"numVfs", f.sriovNumVfs.value_or(0)}};
    } else {
      e["sriov"] = nullptr;
    }
    e["physfn"] = f.physfn ? ojson(f.physfn->str()) : ojson(nullptr);
    // Only while an unbind of it is blocked in the kernel (driverOverride is then unknown).
    if (f.unbindPending) e["unbindPending"] = true;
    // Only where the kernel made a VFIO device file for it (Linux 6.6+, on a VFIO driver).
    if (f.vfioDevice) e["vfioDevice"] = "/dev/vfio/devices/" + *f.vfioDevice;
    // Only for a device that no longer answers, with the power state the kernel shows for it
    // (D3cold: its power is off; D0: it fell off the bus). The others answer, in D0 or, idle on
    // vfio-pci, D3hot: nothing to act on.
    if (f.responsive == false) {
      e["responsive"] = false;
      if (f.powerState) e["powerState"] = *f.powerState;
    }
    j["devices"].push_back(std::move(e));
  }
  j["vgpuDevices"] = ojson::array();
  for (const auto& vg : d.vgpu) {
    j["vgpuDevices"].push_back(
        {{"interface", std::string(toString(vg.device.interface))},
         {"uuid", vg.device.uuid.empty() ? ojson(nullptr) : ojson(vg.device.uuid)},
         {"parent", vg.device.parent ? ojson(vg.device.parent->str()) : ojson(nullptr)},
         {"typeId", vg.device.typeId},
         {"typeName", vg.device.typeName},
         {"resource", vg.resource}});
  }
  j["advertised"] = ojson::object();
  for (const auto& [name, count] : d.advertised) j["advertised"][name] = count;
  // Shaped as the KubeVirt CR's spec.configuration.permittedHostDevices, to paste there; only the
  // lists with entries (an empty list in a merge patch would clear the CR's), and only when any.
  if (!d.permitted.empty()) {
    auto list = [](const std::vector<PermittedDevice>& entries, const char* selectorKey) {
      ojson out = ojson::array();
      for (const auto& e : entries) {
        out.push_back({{selectorKey, e.selector},
                       {"resourceName", e.resourceName},
                       {"externalResourceProvider", true}});
      }
      return out;
    };
    ojson p = ojson::object();
    if (!d.permitted.pci.empty()) p["pciHostDevices"] = list(d.permitted.pci, "pciVendorSelector");
    if (!d.permitted.mediated.empty())
      p["mediatedDevices"] = list(d.permitted.mediated, "mdevNameSelector");
    j["permittedHostDevices"] = std::move(p);
  }
  j["drift"] = ojson::array();
  for (const auto* dv : d.drift()) {
    j["drift"].push_back({{"bdf", dv->fn->bdf.str()},
                          {"driver", opt(dv->fn->driver)},
                          {"wantedDriver", opt(dv->wantedDriver)},
                          {"wantedModule", opt(dv->wantedModule)}});
  }
  j["pciIdsFound"] = d.pciIdsFound;
  j["iommufd"] = d.iommufd;
  return j;
}

std::string nfdFeatures(const StatusDocument& d) {
  std::string p(kNfdPrefix);
  std::string out = "# written by hostprep; see " + std::string(kStatusPath) + "\n";
  out += p + "actual-mode=" + std::string(toString(d.actualMode)) + "\n";
  if (d.desiredMode) out += p + "desired-mode=" + d.desiredSummary() + "\n";
  out += p + "converged=" + (d.converged ? "true" : "false") + "\n";
  // false while a selected device does not answer (DevicesResponsive); absent when unknown.
  if (const Condition* c = d.condition("DevicesResponsive");
      c && c->status != ConditionStatus::kUnknown)
    out +=
        p + "devices-responsive=" + (c->status == ConditionStatus::kTrue ? "true" : "false") + "\n";
  // The declared split, for the cluster side (check-node) to check the node against.
  for (const auto& [m, n] : d.desiredSplit)
    out += p + "gpus." + std::string(toString(m)) + "=" + std::to_string(n) + "\n";
  return out;
}

std::string prometheusText(const StatusDocument& d) {
  std::map<std::string, int> perDriver;
  for (const auto& dv : d.devices) ++perDriver[dv.fn->driver.value_or("none")];
  std::string o;
  o += "# HELP hostprep_devices Selected PCI functions per bound driver (\"none\": unbound).\n";
  o += "# TYPE hostprep_devices gauge\n";
  for (const auto& [drv, n] : perDriver) {
    o += "hostprep_devices{driver=\"" + promEscape(drv) + "\"} " + std::to_string(n) + "\n";
  }
  o += "# HELP hostprep_converged 1 when every selected device is where the desired mode wants "
       "it.\n";
  o += "# TYPE hostprep_converged gauge\n";
  o += std::string("hostprep_converged ") + (d.converged ? "1" : "0") + "\n";
  o += "# HELP hostprep_mode_info The desired and the actual mode of the node.\n";
  o += "# TYPE hostprep_mode_info gauge\n";
  o += "hostprep_mode_info{desired=\"" + (d.desiredMode ? d.desiredSummary() : std::string()) +
       "\",actual=\"" + std::string(toString(d.actualMode)) + "\"} 1\n";
  if (!d.desiredSplit.empty()) {
    o += "# HELP hostprep_desired_gpus GPUs per desired mode (more than one mode: a mixed node).\n";
    o += "# TYPE hostprep_desired_gpus gauge\n";
    for (const auto& [m, n] : d.desiredSplit) {
      o += "hostprep_desired_gpus{mode=\"" + std::string(toString(m)) + "\"} " + std::to_string(n) +
           "\n";
    }
  }
  o += "# HELP hostprep_condition Conditions: 1 True, 0 False, -1 Unknown.\n";
  o += "# TYPE hostprep_condition gauge\n";
  std::time_t last = 0;
  for (const auto& c : d.conditions) {
    const char* v = c.status == ConditionStatus::kTrue    ? "1"
                    : c.status == ConditionStatus::kFalse ? "0"
                                                          : "-1";
    o += "hostprep_condition{type=\"" + promEscape(c.type) + "\"} " + v + "\n";
    last = std::max(last, c.lastTransitionTime);
  }
  // The devices that do not answer, one series each (none while all answer: the condition
  // DevicesResponsive is the gauge to alert on).
  bool header = false;
  for (const auto& dv : d.devices) {
    if (dv.fn->responsive != false) continue;
    if (!header) {
      o += "# HELP hostprep_device_unresponsive A selected device whose config space reads 0xffff, "
           "with its power state.\n";
      o += "# TYPE hostprep_device_unresponsive gauge\n";
      header = true;
    }
    o += "hostprep_device_unresponsive{bdf=\"" + dv.fn->bdf.str() + "\",power_state=\"" +
         promEscape(dv.fn->powerState.value_or("")) + "\"} 1\n";
  }
  o += "# HELP hostprep_last_transition_timestamp_seconds When a condition last changed.\n";
  o += "# TYPE hostprep_last_transition_timestamp_seconds gauge\n";
  o += "hostprep_last_transition_timestamp_seconds " + std::to_string(last) + "\n";
  o += "# HELP hostprep_advertised Devices the device plugins will advertise, per resource.\n";
  o += "# TYPE hostprep_advertised gauge\n";
  for (const auto& [name, n] : d.advertised) {
    o += "hostprep_advertised{resource=\"" + promEscape(name) + "\"} " + std::to_string(n) + "\n";
  }
  return o;
}

std::string formatTime(std::time_t t) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

std::optional<std::time_t> parseTime(std::string_view s) {
  if (s.size() != 20 || s[19] != 'Z') return std::nullopt;
  std::tm tm{};
  int y = 0, mo = 0, da = 0, h = 0, mi = 0, se = 0;
  char tail = 0;
  const std::string str(s);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &da, &h, &mi, &se, &tail) !=
          7 ||
      tail != 'Z') {
    return std::nullopt;
  }
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = da;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  return ::timegm(&tm);
}

std::vector<Condition> parseConditions(std::string_view statusJson) {
  std::vector<Condition> out;
  auto j = nlohmann::json::parse(statusJson, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("conditions") ||
      !j["conditions"].is_array()) {
    return out;
  }
  for (const auto& c : j["conditions"]) {
    if (!c.is_object()) continue;
    Condition k;
    k.type = c.value("type", "");
    const std::string st = c.value("status", "");
    k.status = st == "True"    ? ConditionStatus::kTrue
               : st == "False" ? ConditionStatus::kFalse
                               : ConditionStatus::kUnknown;
    k.reason = c.value("reason", "");
    k.message = c.value("message", "");
    k.lastTransitionTime = parseTime(c.value("lastTransitionTime", "")).value_or(0);
    if (!k.type.empty()) out.push_back(std::move(k));
  }
  return out;
}

std::string readNodeName(const Host& host) {
  for (const char* p : {"proc/sys/kernel/hostname", "etc/hostname"}) {
    auto n = readTrimmed(host, p);
    if (n && !n->empty()) return *n;
  }
  return {};
}

std::optional<std::string> readPciIds(const Host& host) {
  for (const char* p : {"usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids"}) {
    if (auto t = host.read(p, 16u << 20)) return *t;
  }
  return std::nullopt;
}

std::vector<DeviceRule> LastMode::rules() const {
  std::vector<DeviceRule> out;
  for (const auto& [bdf, m] : gpus) {
    DeviceMatch match;
    match.bdf = bdf;
    out.push_back({match, m});
  }
  return out;
}

std::string formatLastMode(const LastMode& m) {
  std::string out = std::string(toString(m.mode)) + "\n";
  for (const auto& [bdf, mode] : m.gpus)
    out += bdf.str() + " " + std::string(toString(mode)) + "\n";
  return out;
}

Result<LastMode> parseLastMode(std::string_view text, std::string_view file) {
  const std::string advice =
      "remove the file; the next 'hostprep prepare' or 'hostprep agent' writes it again";
  auto bad = [&](size_t line, const std::string& what) {
    return Error{std::string(file) + ": line " + std::to_string(line) + ": " + what, 0, advice};
  };
  std::optional<LastMode> out;
  const auto lines = splitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto words = splitWords(lines[i]);
    if (words.empty()) continue;
    if (!out) {  // the node's mode
      auto m = words.size() == 1 ? parseMode(words[0]) : std::nullopt;
      if (!m) return bad(i + 1, "'" + std::string(trim(lines[i])) + "' is not a mode");
      out = LastMode{*m, {}};
      continue;
    }
    auto bdf = words.size() == 2 ? parseBdf(words[0]) : std::nullopt;
    auto m = words.size() == 2 ? parseMode(words[1]) : std::nullopt;
    if (!bdf || !m) {
      return bad(i + 1, "'" + std::string(trim(lines[i])) + "' is not 'PCI-ADDRESS MODE'");
    }
    if (!out->gpus.emplace(*bdf, *m).second) return bad(i + 1, bdf->str() + " is listed twice");
  }
  if (!out) return Error{std::string(file) + ": empty, no mode", 0, advice};
  return *out;
}

Result<std::optional<LastMode>> readLastMode(const Host& host) {
  auto text = host.read(kLastModePath, 1u << 20);
  if (!text) {
    if (text.error().err == ENOENT) return std::optional<LastMode>{};
    return sysError("cannot read " + host.resolve(kLastModePath).string(), text.error().err);
  }
  auto m = parseLastMode(*text, "/" + std::string(kLastModePath));
  if (!m) return m.error();
  return std::optional<LastMode>{*m};
}

Status writeLastMode(Host& host, const LastMode& m) {
  return writeStateFile(host, kLastModePath, formatLastMode(m));
}

}  // namespace hostprep
