#include <algorithm>
#include <map>
#include <set>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/plan_builder.hpp"
#include "drivers/model/vgpu_profiles.hpp"

namespace hostprep {
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
void sriovSteps(PlanBuilder& b, std::vector<Step>& out, const PciFunction& pf,
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

void removeStep(PlanBuilder& b, const Bdf& gpu, const VgpuDevice& d) {
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

}  // namespace

Status planVgpu(PlanBuilder& b, const Selection& sel, const PlanInputs& in) {
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

}  // namespace hostprep
