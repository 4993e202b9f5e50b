#include "drivers/model/plan.hpp"

#include <algorithm>
#include <set>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/reset.hpp"
#include "drivers/model/resource_names.hpp"
#include "drivers/model/vgpu_profiles.hpp"

namespace hostprep {
namespace {

constexpr std::pair<StepKind, std::string_view> kStepNames[] = {
    {StepKind::kLoadModule, "load-module"},
    {StepKind::kSetOverride, "set-override"},
    {StepKind::kUnbind, "unbind"},
    {StepKind::kProbe, "probe"},
    {StepKind::kVerifyDriver, "verify-driver"},
    {StepKind::kVerifyModule, "verify-module"},
    {StepKind::kVerifyVfioGroup, "verify-vfio-group"},
    {StepKind::kUnbindLock, "acquire-unbind-lock"},
    {StepKind::kSetNumVfs, "set-numvfs"},
    {StepKind::kCreateVgpu, "create-vgpu"},
    {StepKind::kRemoveVgpu, "remove-vgpu"},
    {StepKind::kReset, "reset"},
    {StepKind::kResetBus, "reset-bus"},
};

struct Builder {
  const Snapshot& s;
  Plan plan;
  std::set<std::string> modulesToLoad;
  std::vector<Step> deviceSteps;
  // vGPU phases, in the order they run: remove vGPU devices, disable or reset VFs (before any
  // driver moves: vfio refuses a PF with VFs), [deviceSteps], enable VFs, bind VFs, create.
  std::vector<Step> removeSteps, disableSteps, enableSteps, vfSteps, createSteps;

  // A step on a VF (or a vGPU device on it) belongs to its GPU: the executor runs a GPU's steps
  // in one lane, in plan order (its VFs appear once its sriov_numvfs is written).
  void stepOnVf(const Bdf& parent, const Bdf& gpu) {
    if (parent != gpu) plan.vfGpu[parent] = gpu;
  }

  void loadModule(const std::string& module, const std::string& driver) {
    if (s.moduleLoaded(module) || s.pciDrivers.count(driver)) return;
    if (modulesToLoad.insert(module).second) {
      plan.steps.push_back({StepKind::kLoadModule, std::nullopt, module, std::nullopt, {}});
    }
  }
  void step(StepKind k, const Bdf& b, std::string arg = {}) {
    deviceSteps.push_back({k, b, std::move(arg), std::nullopt, {}});
  }
};

}  // namespace

std::string_view toString(StepKind k) {
  for (const auto& [kind, name] : kStepNames) {
    if (kind == k) return name;
  }
  return "?";
}

std::optional<StepKind> parseStepKind(std::string_view s) {
  for (const auto& [kind, name] : kStepNames) {
    if (name == s) return kind;
  }
  return std::nullopt;
}

std::string Step::describe() const {
  std::string who = bdf ? bdf->str() + ": " : std::string();
  switch (kind) {
    case StepKind::kLoadModule:
      return "load module " + arg;
    case StepKind::kSetOverride:
      return who + (arg.empty() ? "clear driver_override" : "set driver_override to " + arg);
    case StepKind::kUnbind:
      return who + "unbind from " + arg;
    case StepKind::kProbe:
      return who + "probe drivers";
    case StepKind::kVerifyDriver:
      return who + (arg.empty() ? "verify it left vfio" : "verify it is bound to " + arg);
    case StepKind::kVerifyModule:
      return who + "verify it is bound to a driver of module " + arg;
    case StepKind::kVerifyVfioGroup:
      return "verify /dev/vfio/" + std::to_string(group.value_or(-1)) + " exists";
    case StepKind::kUnbindLock:
      return who + "acquire the nvidia unbindLock";
    case StepKind::kSetNumVfs:
      return who + "set sriov_numvfs to " + arg;
    case StepKind::kCreateVgpu:
      return who + "create vGPU " + arg + (uuid.empty() ? "" : " (mdev " + uuid + ")");
    case StepKind::kRemoveVgpu:
      return who + (uuid.empty() ? "remove vGPU type " + arg + " (current_vgpu_type)"
                                 : "remove vGPU " + uuid);
    case StepKind::kReset:
      return who + "reset (the kernel's reset method)";
    case StepKind::kResetBus:
      return who + "reset bus " + (bdf ? busOf(*bdf).str() : std::string("?")) +
             " with every function on it (reset_subordinate of " + arg + ")";
  }
  return who;
}

Status checkStep(const Step& st) {
  const std::string what = "step '" + std::string(toString(st.kind)) + "'";
  const bool deviceStep = st.kind != StepKind::kLoadModule && st.kind != StepKind::kVerifyVfioGroup;
  if (deviceStep && !st.bdf) return usageError(what + ": has no device");
  const std::string who = st.bdf ? what + " of " + st.bdf->str() : what;
  switch (st.kind) {
    case StepKind::kLoadModule:
    case StepKind::kUnbind:
    case StepKind::kVerifyModule:
      return checkDriverName(who, st.arg);
    case StepKind::kSetOverride:
    case StepKind::kVerifyDriver:
      return st.arg.empty() ? Status{} : checkDriverName(who, st.arg);
    case StepKind::kProbe:
      return {};
    case StepKind::kVerifyVfioGroup:
      if (!st.group || *st.group < 0 || *st.group >= 1'000'000) {
        return usageError(who + ": needs an IOMMU group number 0..999999");
      }
      return {};
    case StepKind::kUnbindLock:
    case StepKind::kReset:
      return {};
    case StepKind::kResetBus:
      if (!parseBdf(st.arg))
        return usageError(who + ": '" + quoteUntrusted(st.arg) + "' is not a bridge");
      return {};
    case StepKind::kSetNumVfs: {
      auto n = parseUnsigned(st.arg);
      if (!n || *n > 4096)
        return usageError(who + ": '" + quoteUntrusted(st.arg) + "' is not a VF count");
      return {};
    }
    case StepKind::kCreateVgpu:
    case StepKind::kRemoveVgpu:
      // The mdev interface names a UUID (a path component); per-VF names a type directory or id.
      if (!st.uuid.empty() && !isValidUuid(st.uuid)) {
        return usageError(who + ": '" + quoteUntrusted(st.uuid) + "' is not a UUID");
      }
      if (st.kind == StepKind::kCreateVgpu || st.uuid.empty())
        return checkPathComponent(who, st.arg);
      return {};
  }
  return usageError(what + ": unknown step kind");
}

Status checkDeviceState(std::string_view what, const DeviceState& st) {
  if (st.driver) {
    if (auto v = checkDriverName(std::string(what) + ": driver", *st.driver); !v) return v;
  }
  if (st.driverOverride) {
    if (auto v =
            checkPathComponent(std::string(what) + ": driver_override", *st.driverOverride, 64);
        !v) {
      return v;
    }
  }
  return {};
}

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

namespace {

using Requests = std::vector<std::pair<std::string, int>>;

std::string familyOf(std::string_view type) { return std::string(type.substr(0, type.find('-'))); }

DeviceMove* moveOf(Plan& p, const Bdf& b) {
  for (auto& mv : p.moves) {
    if (mv.bdf == b) return &mv;
  }
  return nullptr;
}

// The SR-IOV change of one PF. NVIDIA's host driver has no sriov_configure (the kernel answers
// ENOENT), so, as sriov-manage does, the PF is parked on pci-pf-stub for the write: take the
// unbindLock, unbind, bind pci-pf-stub, write (0 first between two non-zero counts: EBUSY
// otherwise), then back to the driver it came from.
void sriovSteps(Builder& b, std::vector<Step>& out, const PciFunction& pf,
                const std::string& driverNow, const std::string& driverBack,
                const std::string& overrideBack, int from, int to) {
  const bool park = pf.id.vendor == kNvidiaVendor;
  auto add = [&](StepKind k, std::string arg = {}) {
    out.push_back({k, pf.bdf, std::move(arg), std::nullopt, {}});
  };
  if (park) {
    b.loadModule("pci_pf_stub", "pci-pf-stub");
    add(StepKind::kUnbindLock);
    add(StepKind::kSetOverride, "pci-pf-stub");
    if (!driverNow.empty()) add(StepKind::kUnbind, driverNow);
    add(StepKind::kProbe);
    add(StepKind::kVerifyDriver, "pci-pf-stub");
  }
  if (from != 0 && to != 0) add(StepKind::kSetNumVfs, "0");
  add(StepKind::kSetNumVfs, std::to_string(to));
  if (park) {
    add(StepKind::kUnbind, "pci-pf-stub");
    add(StepKind::kSetOverride, overrideBack);
    add(StepKind::kProbe);
    add(StepKind::kVerifyDriver, driverBack);
  }
  std::vector<VfState> vfs;
  for (const auto& vf : pf.virtfns) {
    if (const PciFunction* f = b.s.find(vf)) vfs.push_back({vf, {f->driver, f->driverOverride}});
  }
  b.plan.sriov.push_back({pf.bdf, from, to, std::move(vfs)});
}

void removeStep(Builder& b, const Bdf& gpu, const VgpuDevice& d) {
  b.stepOnVf(d.parent, gpu);
  b.removeSteps.push_back({StepKind::kRemoveVgpu, d.parent,
                           d.iface == VgpuInterface::kPerVf ? d.typeId : std::string(), d.group,
                           d.uuid});
  b.plan.vgpuRemovals.push_back(d);
}

// The VF addresses of a PF in index order: the live ones when enabled at `count`, else where the
// kernel will put them (offset and stride).
std::vector<Bdf> vfAddresses(const PciFunction& pf, int count) {
  if (pf.sriovNumVfs == count && static_cast<int>(pf.virtfns.size()) == count) return pf.virtfns;
  std::vector<Bdf> out;
  for (int i = 0; i < count; ++i) {
    if (auto a = vfAddress(pf.bdf, pf.sriovOffset.value_or(1), pf.sriovStride.value_or(1), i))
      out.push_back(*a);
  }
  return out;
}

Requests requestsFor(const Snapshot& s, const PciFunction& f, int index, const PlanInputs& in,
                     const VgpuParent* offered, Result<void>* err) {
  Requests r;
  auto add = [&](const std::string& t, int n) {
    for (auto& [type, count] : r) {
      if (type == t) return void(count += n);
    }
    if (n > 0) r.emplace_back(t, n);
  };
  if (in.vgpuConfig) {
    for (const auto& e : *in.vgpuConfig) {
      if (!e.matches(f.id, f.subsystem, index)) continue;
      for (const auto& [t, n] : e.vgpuDevices) add(t, n);
    }
    return r;
  }
  auto defaults = vgpuProfiles().defaultsFor(f.id);
  if (defaults.empty()) {
    *err = usageError(
        "GPU " + describeFunction(s, f.bdf) + ": no embedded default vGPU config for this model",
        "pass --vgpu-config FILE naming its vGPU types");
    return r;
  }
  // Several models share an id (A2 / A16): take the default whose type the GPU offers.
  const VgpuDefault* pick = &defaults.front();
  if (offered) {
    for (const auto& d : defaults) {
      if (!matchVgpuTypes(offered->mdevTypes, d.type).empty() ||
          !matchVgpuTypes(offered->creatable, d.type).empty()) {
        pick = &d;
        break;
      }
    }
  }
  add(pick->type, pick->count);
  return r;
}

// Checks one request against what the kernel shows (a parent's types) or, where the parent does
// not exist yet, against the profile table. Errors name the type, the GPU and the maximum.
Status checkRequest(const Snapshot& s, const PciFunction& f, const PlanInputs& in,
                    const std::string& type, int count, const VgpuParent* visible, int slots) {
  const std::string who =
      "vgpu-config '" + in.vgpuConfigName + "': GPU " + describeFunction(s, f.bdf);
  if (visible) {
    auto m = matchVgpuTypes(visible->mdevTypes, type);
    auto c = matchVgpuTypes(visible->creatable, type);
    if (m.size() > 1) {
      return usageError(who + ": vGPU type " + type + " is ambiguous: it matches " +
                            describeVgpuTypes(visible->mdevTypes),
                        "name the type by its directory, e.g. " + visible->mdevTypes[m[0]].id);
    }
    if (m.empty() && c.empty()) {
      std::string offers = visible->mdevParent ? describeVgpuTypes(visible->mdevTypes)
                                               : describeVgpuTypes(visible->creatable);
      return usageError(who + " does not offer vGPU type " + type + " (it offers: " + offers + ")",
                        "name a type it offers in vgpu-devices");
    }
  }
  auto max = vgpuProfiles().maxInstances(type);
  auto defaults = vgpuProfiles().defaultsFor(f.id);
  if (!visible && !defaults.empty()) {
    bool family = false;
    for (const auto& d : defaults) family = family || familyOf(d.type) == familyOf(type);
    if (!max || !family) {
      return usageError(who + " does not offer vGPU type " + type + " (its profiles are the " +
                            familyOf(defaults.front().type) + "-* types, e.g. " +
                            defaults.front().type + ")",
                        "name a type of this GPU in vgpu-devices; see vgpu-profiles.txt");
    }
  }
  int limit = slots;
  if (max && *max < limit) limit = *max;
  if (count > limit) {
    return usageError(who + " cannot hold " + type + " x " + std::to_string(count) + ": at most " +
                          std::to_string(limit) + " per GPU",
                      "lower the count in vgpu-devices, or choose a smaller profile");
  }
  return {};
}

// The vGPU part of a plan: for vm-vgpu, VFs on and the configured devices created (and stray
// ones removed); for the other modes, every vGPU device removed and VFs off.
Status planVgpu(Builder& b, const Selection& sel, const PlanInputs& in) {
  const Snapshot& s = b.s;
  static const VgpuHost kNone;
  const VgpuHost& vh = in.vgpuHost ? *in.vgpuHost : kNone;
  std::vector<const PciFunction*> gpus;
  for (const auto& t : sel.targets) {
    if (t.role != Role::kGpu) continue;
    if (const auto* f = s.find(t.bdf)) gpus.push_back(f);
  }
  auto isVgpu = [&](const Bdf& g) { return modeOf(in.modes, g, in.mode) == Mode::kVmVgpu; };
  if (in.vgpuVfioAvailable &&
      std::any_of(gpus.begin(), gpus.end(), [&](const PciFunction* f) { return isVgpu(f->bdf); })) {
    b.loadModule("nvidia_vgpu_vfio", "nvidia_vgpu_vfio");
  }
  int index = -1;
  for (const PciFunction* fp : gpus) {
    ++index;
    const PciFunction& f = *fp;
    const bool vgpu = isVgpu(f.bdf);
    const int total = f.sriovTotalVfs.value_or(0);
    const int cur = f.sriovNumVfs.value_or(0);
    std::vector<const VgpuDevice*> existing = vh.devicesOn(f.bdf);
    for (const auto& vf : f.virtfns) {
      for (const auto* d : vh.devicesOn(vf)) existing.push_back(d);
    }
    const size_t stepsBefore = b.removeSteps.size() + b.disableSteps.size() + b.enableSteps.size() +
                               b.vfSteps.size() + b.createSteps.size();
    const std::string driverNow = f.driver.value_or("");
    if (!vgpu) {
      for (const auto* d : existing) removeStep(b, f.bdf, *d);
      if (cur > 0)
        sriovSteps(b, b.disableSteps, f, driverNow, driverNow, f.driverOverride.value_or(""), cur,
                   0);
    } else {
      const bool reset = total > 0 && cur != total;
      std::vector<Bdf> vfs = total > 0 ? vfAddresses(f, total) : std::vector<Bdf>{};
      const VgpuParent* pfParent = vh.parent(f.bdf);
      const VgpuParent* vfParent = (!reset && !vfs.empty()) ? vh.parent(vfs.front()) : nullptr;
      const VgpuParent* visible = total > 0 ? vfParent : pfParent;
      // creatable_vgpu_types lists what a VF can take now, narrowed by the devices that exist:
      // with devices on the GPU it says nothing about what the GPU offers once they are gone.
      if (visible && !visible->mdevParent && !existing.empty()) visible = nullptr;
      Status err;
      Requests req = requestsFor(s, f, index, in, visible, &err);
      if (!err) return err;
      if (total == 0 && !pfParent && !req.empty() &&
          isDriverOfModule(s, f.driver.value_or(""), in.hostDriver)) {
        return sysError("GPU " + describeFunction(s, f.bdf) +
                            ": offers no vGPU types (no mdev_supported_types, no SR-IOV)",
                        0,
                        "install and load the NVIDIA vGPU manager (host driver with "
                        "nvidia_vgpu_vfio); 'hostprep preflight --mode vm-vgpu' checks it");
      }
      std::optional<VgpuInterface> vfIface;  // what the GPU's enabled VFs show
      for (const auto& vf : f.virtfns) {
        const VgpuParent* p = total > 0 ? vh.parent(vf) : nullptr;
        if (p && (p->perVf || p->mdevParent)) {
          vfIface = p->perVf ? VgpuInterface::kPerVf : VgpuInterface::kMdev;
          break;
        }
      }
      std::vector<PlannedVgpu> want;
      int slot = 0;
      for (const auto& [type, count] : req) {
        int slots = total > 0 ? total - slot : 1 << 20;
        if (total == 0 && pfParent) {
          // Time-sliced vGPUs on the PF: what is free plus what this type already holds.
          auto m = matchVgpuTypes(pfParent->mdevTypes, type);
          if (m.size() == 1) {
            const MdevType& t = pfParent->mdevTypes[m[0]];
            int held = 0;
            bool others = false;
            for (const auto* d : existing) {
              if (d->typeId == t.id) {
                ++held;
              } else {
                others = true;
              }
            }
            if (!others) slots = t.available + held;
          }
        } else if (total > 0 && vfParent) {
          int free = 0;
          for (size_t i = static_cast<size_t>(slot); i < vfs.size(); ++i) {
            const VgpuParent* p = vh.parent(vfs[i]);
            if (!p) continue;
            bool holds = false;
            for (const auto* d : vh.devicesOn(vfs[i]))
              holds = holds || vgpuTypeMatches(type, d->typeId, d->typeName);
            auto m = matchVgpuTypes(p->mdevTypes, type);
            auto c = matchVgpuTypes(p->creatable, type);
            if (holds || (m.size() == 1 && p->mdevTypes[m[0]].available > 0) || c.size() == 1)
              ++free;
          }
          if (existing.empty()) slots = std::min(slots, free);
        }
        if (auto st = checkRequest(s, f, in, type, count, visible, slots); !st) return st;
        for (int k = 0; k < count; ++k) {
          PlannedVgpu pv{
              f.bdf, total > 0 ? vfs[static_cast<size_t>(slot)] : f.bdf, type, {}, {}, std::nullopt,
              false};
          pv.uuid = vgpuUuid(pv.parent, type, total > 0 ? 0 : k);
          ++slot;
          if (const VgpuParent* p = reset ? nullptr : vh.parent(pv.parent)) {
            auto m = matchVgpuTypes(p->mdevTypes, type);
            auto c = matchVgpuTypes(p->creatable, type);
            if (p->mdevParent) {
              pv.iface = VgpuInterface::kMdev;
              if (m.size() == 1) pv.typeName = p->mdevTypes[m[0]].name;
            } else if (p->perVf) {
              pv.iface = VgpuInterface::kPerVf;
              pv.uuid.clear();
              if (c.size() == 1) pv.typeName = p->creatable[c[0]].name;
            }
          }
          if (!pv.iface && vfIface) {
            // VFs about to be re-created come back as their siblings are now: a GPU whose
            // enabled VFs use the per-VF interface gets per-VF vGPUs, not mdev devices.
            pv.iface = vfIface;
            if (*vfIface == VgpuInterface::kPerVf) pv.uuid.clear();
          }
          if (pv.typeName.empty())
            pv.typeName = f.id.vendor == kNvidiaVendor ? "NVIDIA " + type : type;
          want.push_back(std::move(pv));
        }
      }
      // Keep what is already right; remove the rest (everything on VFs that are about to reset).
      for (const auto* d : existing) {
        bool keep = false;
        const bool onVf = d->parent != f.bdf;
        if (!(reset && onVf)) {
          for (auto& pv : want) {
            if (pv.exists || pv.parent != d->parent ||
                !vgpuTypeMatches(pv.type, d->typeId, d->typeName))
              continue;
            if (d->iface == VgpuInterface::kMdev && d->uuid != pv.uuid) continue;
            pv.exists = keep = true;
            if (!d->typeName.empty()) pv.typeName = d->typeName;
            break;
          }
        }
        if (!keep) removeStep(b, f.bdf, *d);
      }
      if (reset) {
        sriovSteps(b, b.enableSteps, f, in.hostDriver, in.hostDriver, "", cur, total);
      }
      // Every VF that carries a vGPU must be on the host driver. With sriov_drivers_autoprobe
      // off the kernel binds no VF by itself: hostprep sets the VF's override, for these only.
      std::set<Bdf> vfDone;
      for (const auto& pv : want) {
        if (pv.parent == f.bdf || pv.exists || !vfDone.insert(pv.parent).second) continue;
        const PciFunction* vf = reset ? nullptr : s.find(pv.parent);
        if (vf && isDriverOfModule(s, vf->driver.value_or(""), in.hostDriver)) continue;
        b.stepOnVf(pv.parent, f.bdf);
        auto add = [&](StepKind k, std::string arg = {}) {
          b.vfSteps.push_back({k, pv.parent, std::move(arg), std::nullopt, {}});
        };
        // The override is set where the kernel would not bind the host driver without it: with
        // autoprobe off, and where it names another driver (a VF once given to vfio-pci by
        // hand: a probe binds a device to its override's driver only, pci_match_device()).
        const bool autoprobe = f.sriovDriversAutoprobe.value_or(true);
        const bool overrideOk = vf && vf->driverOverride == in.hostDriver;
        if (!overrideOk && (!autoprobe || (vf && vf->driverOverride)))
          add(StepKind::kSetOverride, in.hostDriver);
        if (vf && vf->driver) add(StepKind::kUnbind, *vf->driver);
        if (vf)
          b.plan.vfMoves.push_back({vf->bdf, vf->iommuGroup, {vf->driver, vf->driverOverride}});
        add(StepKind::kProbe);
        add(StepKind::kVerifyModule, normalizeModuleName(in.hostDriver));
      }
      for (const auto& pv : want) {
        if (!pv.exists) {
          b.stepOnVf(pv.parent, f.bdf);
          b.createSteps.push_back(
              {StepKind::kCreateVgpu, pv.parent, pv.type, std::nullopt, pv.uuid});
        }
        b.plan.vgpus.push_back(pv);
      }
    }
    const size_t stepsAfter = b.removeSteps.size() + b.disableSteps.size() + b.enableSteps.size() +
                              b.vfSteps.size() + b.createSteps.size();
    if (stepsAfter != stepsBefore || total > 0 || !existing.empty())
      b.plan.vgpuGpus.push_back(f.bdf);
    if (stepsAfter != stepsBefore) {
      if (DeviceMove* mv = moveOf(b.plan, f.bdf)) mv->changes = true;
    }
  }
  return {};
}

}  // namespace

Result<Plan> makePlan(const Snapshot& s, const Selection& sel, const PlanInputs& in) {
  Builder b{s, Plan{in.mode, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}}, {}, {}, {}, {}, {}, {}, {}};
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
