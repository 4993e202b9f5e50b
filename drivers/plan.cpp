#include "drivers/plan.hpp"

#include <algorithm>
#include <set>

#include "drivers/names.hpp"
#include "drivers/text.hpp"

namespace hostprep {
namespace {

constexpr std::pair<StepKind, std::string_view> kStepNames[] = {
    {StepKind::kLoadModule, "load-module"},  {StepKind::kSetOverride, "set-override"},
    {StepKind::kUnbind, "unbind"},           {StepKind::kProbe, "probe"},
    {StepKind::kVerifyDriver, "verify-driver"}, {StepKind::kVerifyVfioGroup, "verify-vfio-group"},
};

struct Builder {
  const Snapshot& s;
  Plan plan;
  std::set<std::string> modulesToLoad;
  std::vector<Step> deviceSteps;

  void loadModule(const std::string& module, const std::string& driver) {
    if (s.moduleLoaded(module) || s.pciDrivers.count(driver)) return;
    if (modulesToLoad.insert(module).second) {
      plan.steps.push_back({StepKind::kLoadModule, std::nullopt, module, std::nullopt});
    }
  }
  void step(StepKind k, const Bdf& b, std::string arg = {}) {
    deviceSteps.push_back({k, b, std::move(arg), std::nullopt});
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
    case StepKind::kLoadModule: return "load module " + arg;
    case StepKind::kSetOverride:
      return who + (arg.empty() ? "clear driver_override" : "set driver_override to " + arg);
    case StepKind::kUnbind: return who + "unbind from " + arg;
    case StepKind::kProbe: return who + "probe drivers";
    case StepKind::kVerifyDriver:
      return who + (arg.empty() ? "verify it left vfio" : "verify it is bound to " + arg);
    case StepKind::kVerifyVfioGroup:
      return "verify /dev/vfio/" + std::to_string(group.value_or(-1)) + " exists";
  }
  return who;
}

Status checkStep(const Step& st) {
  const std::string what = "step '" + std::string(toString(st.kind)) + "'";
  const bool deviceStep = st.kind == StepKind::kSetOverride || st.kind == StepKind::kUnbind ||
                          st.kind == StepKind::kProbe || st.kind == StepKind::kVerifyDriver;
  if (deviceStep && !st.bdf) return usageError(what + ": has no device");
  const std::string who = st.bdf ? what + " of " + st.bdf->str() : what;
  switch (st.kind) {
    case StepKind::kLoadModule:
    case StepKind::kUnbind:
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
  }
  return usageError(what + ": unknown step kind");
}

Status checkDeviceState(std::string_view what, const DeviceState& st) {
  if (st.driver) {
    if (auto v = checkDriverName(std::string(what) + ": driver", *st.driver); !v) return v;
  }
  if (st.driverOverride) {
    if (auto v = checkPathComponent(std::string(what) + ": driver_override", *st.driverOverride, 64); !v) {
      return v;
    }
  }
  return {};
}

std::string vfioDriverName(std::string_view module) {
  std::string d(module);
  std::replace(d.begin(), d.end(), '_', '-');
  return d;
}

bool isVfioDriver(std::string_view driver) {
  return driver == "vfio-pci" || driver.find("vfio") != std::string_view::npos;
}

Result<Plan> makePlan(const Snapshot& s, const Selection& sel, const PlanInputs& in) {
  Builder b{s, Plan{in.mode, {}, {}}, {}, {}};
  if (auto v = checkDriverName("host driver", in.hostDriver); !v) return v.error();
  std::set<int> vfioGroups;
  for (const auto& t : sel.targets) {
    const PciFunction* f = s.find(t.bdf);
    if (!f) continue;
    // Every name the steps will put into a path or write to the kernel, validated up front.
    if (auto v = checkDeviceState(t.bdf.str(), {f->driver, f->driverOverride}); !v) return v.error();
    DeviceMove mv{t.bdf, t.role, t.group, {f->driver, f->driverOverride}, {}, false};
    const std::string cur = f->driver.value_or("");
    const std::string ovr = f->driverOverride.value_or("");

    if (in.mode == Mode::kVmPassthrough) {
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
    } else if (in.mode == Mode::kContainer) {
      const bool gpu = t.role == Role::kGpu || t.role == Role::kNvSwitch;
      mv.toDriver = gpu ? in.hostDriver : "";
      if (gpu && !cur.empty() && cur != in.hostDriver && !isVfioDriver(cur)) {
        return sysError(describeFunction(s, t.bdf) + ": is bound to " + cur + ", not " +
                            in.hostDriver,
                        0,
                        "blacklist " + cur + " (echo 'blacklist " + cur +
                            "' > /etc/modprobe.d/blacklist-" + cur +
                            ".conf, update-initramfs -u, reboot); 'hostprep preflight --mode "
                            "container' checks it");
      }
      const bool onWanted = gpu ? cur == in.hostDriver : (!cur.empty() && !isVfioDriver(cur));
      const bool leftVfio = !gpu && !isVfioDriver(cur);  // a driverless companion is fine
      if (!ovr.empty() || !(onWanted || leftVfio)) {
        mv.changes = true;
        if (gpu) b.loadModule(in.hostDriver, in.hostDriver);
        if (!ovr.empty()) b.step(StepKind::kSetOverride, t.bdf, "");
        if (!(onWanted || leftVfio)) {
          if (!cur.empty()) b.step(StepKind::kUnbind, t.bdf, cur);
          b.step(StepKind::kProbe, t.bdf);
          b.step(StepKind::kVerifyDriver, t.bdf, mv.toDriver);
        }
      }
    } else {
      return usageError("prepare --mode vm-vgpu is not available in this build",
                        "use --mode container or --mode vm-passthrough");
    }
    b.plan.moves.push_back(mv);
  }
  for (auto& st : b.deviceSteps) b.plan.steps.push_back(std::move(st));
  for (int g : vfioGroups) {
    b.plan.steps.push_back({StepKind::kVerifyVfioGroup, std::nullopt, {}, g});
  }
  return std::move(b.plan);
}

}  // namespace hostprep
