#include "drivers/model/plan.hpp"

#include <algorithm>
#include <set>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/plan_builder.hpp"
#include "drivers/model/reset.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {

std::string DeviceMove::target() const {
  if (awaitsDriver) return "no driver until the GPU Operator loads module " + toModule;
  if (!toDriver.empty()) return toDriver;
  if (!toModule.empty()) return "a driver of module " + toModule;
  return "its own driver";
}

std::string vfioDriverName(std::string_view module) {
  std::string d(module);
  std::replace(d.begin(), d.end(), '_', '-');
  return d;
}

Result<Plan> makePlan(const Snapshot& s, const Selection& sel, const PlanInputs& in) {
  PlanBuilder b{s, Plan{in.mode, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}}, {}, {}, {}, {}, {}, {},
                {}};
  if (auto v = checkDriverName("host driver", in.hostDriver); !v) return v.error();
  const std::string hostModule = normalizeModuleName(in.hostDriver);
  for (auto& d : driversOfModule(s, hostModule)) b.plan.hostDrivers.insert(std::move(d));
  std::set<int> vfioGroups;
  // The way back from a VM (reset.hpp): the functions leaving a VFIO driver for a host driver,
  // the buses reset whole (every function on them is one of those) and, per bus, the probes
  // that wait for its reset.
  std::vector<Bdf> returning;
  for (const auto& t : sel.targets) {
    const PciFunction* f = s.find(t.bdf);
    if (f && modeOf(in.modes, t.bdf, in.mode) != Mode::kVmPassthrough && f->driver &&
        isVfioDriver(*f->driver))
      returning.push_back(t.bdf);
  }
  std::map<BusId, Bdf> busResets;
  std::map<BusId, std::vector<Step>> afterBusReset;
  if (in.resetOnReturn) {
    for (const Bdf& r : returning) {
      if (auto o = resetOptionOf(s, *s.find(r), returning); o.way == ResetWay::kBus)
        busResets.emplace(busOf(r), *o.bridge);
    }
  }
  for (const auto& t : sel.targets) {
    const PciFunction* f = s.find(t.bdf);
    if (!f) continue;
    // Every name the steps will put into a path or write to the kernel, validated up front.
    if (auto v = checkDeviceState(t.bdf.str(), {f->driver, f->driverOverride}); !v)
      return v.error();
    const Mode mode = modeOf(in.modes, t.bdf, in.mode);
    DeviceMove mv{t.bdf, t.role, t.group, {f->driver, f->driverOverride}, {}, false, mode};
    const std::string cur = f->driver.value_or("");
    const std::string ovr = f->driverOverride.value_or("");

    if (mode == Mode::kVmPassthrough) {
      if (!f->iommuGroup) {
        return sysError(describeFunction(s, t.bdf) + ": has no IOMMU group", 0,
                        "the IOMMU is off: enable VT-d/AMD-Vi in firmware and add intel_iommu=on "
                        "to the kernel command line; run 'hostprep preflight'");
      }
      const std::string module = bestVfioModule(in.modulesAlias, f->modalias);
      mv.toDriver = vfioDriverName(module);
      if (cur != mv.toDriver || ovr != mv.toDriver) {
        mv.changes = true;
        b.loadModule(module, mv.toDriver);
        if (ovr != mv.toDriver) b.step(StepKind::kSetOverride, t.bdf, mv.toDriver);
        if (cur != mv.toDriver) {
          if (!cur.empty()) b.step(StepKind::kUnbind, t.bdf, cur);
          b.step(StepKind::kProbe, t.bdf);
          b.step(StepKind::kVerifyDriver, t.bdf, mv.toDriver);
        }
      }
      if (cur != mv.toDriver) vfioGroups.insert(*f->iommuGroup);
    } else {
      // container and vm-vgpu: GPUs and NVSwitches on the driver the host module gives each
      // (host_module.hpp), companions off vfio.
      const bool gpu = t.role == Role::kGpu || t.role == Role::kNvSwitch;
      const bool onHost = gpu && isDriverOfModule(s, cur, hostModule);
      mv.toDriver = gpu ? hostDriverOf(s, *f, hostModule) : "";
      mv.toModule = gpu ? hostModule : "";
      if (gpu && !cur.empty() && !onHost && !isVfioDriver(cur) && cur != "pci-pf-stub") {
        return sysError(describeFunction(s, t.bdf) + ": is bound to " + cur + ", not " +
                            describeHostDriver(s, hostModule),
                        0,
                        "blacklist " + cur + " (echo 'blacklist " + cur +
                            "' > /etc/modprobe.d/blacklist-" + cur +
                            ".conf, update-initramfs -u, reboot); 'hostprep preflight --mode " +
                            std::string(toString(mode)) + "' checks it");
      }
      // The GPU Operator's driver container loads the host module, never a plan: until it
      // has, a GPU waits without override and without driver (off vfio, so the operator's
      // driver can take it), and the run succeeds; once it is loaded, the probe binds it.
      const bool waits = gpu && mode == Mode::kContainer && in.operatorDriver &&
                         !s.loadedModules.count(hostModule);
      mv.awaitsDriver = waits && !onHost;
      const bool onWanted =
          gpu ? (onHost || (waits && cur.empty())) : (!cur.empty() && !isVfioDriver(cur));
      const bool leftVfio = !gpu && !isVfioDriver(cur);  // a driverless companion is fine
      if (!ovr.empty() || !(onWanted || leftVfio)) {
        mv.changes = true;
        if (gpu && !in.operatorDriver) b.loadModule(hostModule, hostModule);
        if (!ovr.empty()) b.step(StepKind::kSetOverride, t.bdf, "");
        if (!(onWanted || leftVfio)) {
          if (!cur.empty()) b.step(StepKind::kUnbind, t.bdf, cur);
          // Back from a VM: reset between the unbind and the probe, or after the last unbind
          // on a bus reset whole.
          std::vector<Step>* probes = &b.deviceSteps;
          if (isVfioDriver(cur)) {
            if (busResets.count(busOf(t.bdf))) {
              probes = &afterBusReset[busOf(t.bdf)];
            } else if (!in.resetOnReturn) {
              b.plan.notReset.emplace_back(t.bdf, "--no-reset");
            } else if (auto o = resetOptionOf(s, *f, returning); o.way == ResetWay::kFunction) {
              b.step(StepKind::kReset, t.bdf);
            } else {
              b.plan.notReset.emplace_back(t.bdf, o.why);
            }
          }
          if (waits) {
            b.plan.moves.push_back(mv);
            continue;
          }
          probes->push_back({StepKind::kProbe, t.bdf, {}, std::nullopt, {}});
          if (gpu) {
            probes->push_back({StepKind::kVerifyModule, t.bdf, hostModule, std::nullopt, {}});
          } else {
            probes->push_back({StepKind::kVerifyDriver, t.bdf, "", std::nullopt, {}});
          }
        }
      }
    }
    b.plan.moves.push_back(mv);
  }
  for (const auto& [bus, bridge] : busResets) {
    const Bdf first = functionsOn(s, bus).front()->bdf;
    b.step(StepKind::kResetBus, first, bridge.str());
    for (auto& st : afterBusReset[bus]) b.deviceSteps.push_back(std::move(st));
  }
  // A function that no longer answers is not probed: the driver's probe would fail on it, or
  // worse, take it for a working device (hostprep recover brings it back, or a reboot).
  for (const auto& mv : b.plan.moves) {
    const PciFunction* f = s.find(mv.bdf);
    if (mv.changes && f && f->responsive == false) {
      return sysError(describeFunction(s, mv.bdf) + ": does not answer (its config space reads " +
                          "0xffff" + (f->powerState ? ", power state " + *f->powerState : "") + ")",
                      EIO, notAnsweringAdvice(mv.bdf));
    }
  }
  if (auto st = planVgpu(b, sel, in); !st) return st.error();
  for (auto* phase : {&b.removeSteps, &b.disableSteps, &b.deviceSteps, &b.enableSteps, &b.vfSteps,
                      &b.createSteps}) {
    for (auto& st : *phase) b.plan.steps.push_back(std::move(st));
  }
  for (int g : vfioGroups) {
    b.plan.steps.push_back({StepKind::kVerifyVfioGroup, std::nullopt, {}, g, {}});
  }
  return std::move(b.plan);
}

std::vector<Bdf> Plan::awaitingDriver() const {
  std::vector<Bdf> out;
  for (const auto& mv : moves) {
    if (mv.awaitsDriver) out.push_back(mv.bdf);
  }
  return out;
}

std::map<Mode, int> Plan::split() const {
  std::map<Mode, int> out;
  for (const auto& mv : moves) {
    if (mv.role == Role::kGpu) ++out[mv.mode];
  }
  return out;
}

std::map<std::string, int> expectedAdvertised(const Plan& plan) {
  std::map<std::string, int> out;  // only GPUs in vm-vgpu plan vGPU devices
  for (const auto& pv : plan.vgpus) out[vgpuResourceName(pv.typeName)] += 1;
  return out;
}

std::vector<std::string> vfsInUse(const Snapshot& s, const Plan& plan,
                                  std::string_view hostDriver) {
  std::vector<std::string> out;
  for (const auto& change : plan.sriov) {
    if (change.from == 0 || change.from == change.to) continue;  // nothing existing goes
    const PciFunction* pf = s.find(change.pf);
    if (!pf) continue;
    for (const Bdf& vf : pf->virtfns) {
      const PciFunction* f = s.find(vf);
      if (f && f->driver && !isDriverOfModule(s, *f->driver, hostDriver)) {
        out.push_back(vf.str() + " (VF of " + change.pf.str() + ") on " + *f->driver);
      }
    }
  }
  return out;
}

}  // namespace hostprep
