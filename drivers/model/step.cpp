#include "drivers/model/step.hpp"

#include <utility>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/reset.hpp"
#include "drivers/model/vgpu.hpp"

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

}  // namespace hostprep
