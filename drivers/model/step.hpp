// The steps of a plan: each write the executor makes and each check it makes after, as the plan
// lists them, dry runs print them and the journal records them (plan.hpp makes them).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "drivers/common/error.hpp"
#include "drivers/common/pci.hpp"

namespace hostprep {

enum class StepKind {
  kLoadModule,       // arg: module name (through libkmod)
  kSetOverride,      // bdf, arg: driver name, or "" to clear
  kUnbind,           // bdf, arg: the driver it is bound to
  kProbe,            // bdf: write it to drivers_probe
  kVerifyDriver,     // bdf, arg: the driver that must be bound ("" = any driver but vfio)
  kVerifyModule,     // bdf, arg: a module; the driver bound must be one it registers (host_module)
  kVerifyVfioGroup,  // group: /dev/vfio/<group> must exist
  kUnbindLock,       // bdf: take /proc/driver/nvidia/gpus/<bdf>/unbindLock (no-op where absent)
  kSetNumVfs,        // bdf (PF), arg: the count to write to sriov_numvfs
  kCreateVgpu,       // bdf (parent), arg: configured type, uuid: the mdev's UUID
  kRemoveVgpu,       // bdf (parent); mdev: uuid; per-VF: uuid empty, arg: the type ID
  kReset,            // bdf: write its `reset` (back from a VM, off its driver; reset.hpp)
  kResetBus,         // bdf: the first function on the bus, arg: the bridge whose
                     // reset_subordinate resets every function on the bus (all off their drivers)
};
std::string_view toString(StepKind k);
std::optional<StepKind> parseStepKind(std::string_view s);

struct Step {
  StepKind kind = StepKind::kProbe;
  std::optional<Bdf> bdf;
  std::string arg;
  std::optional<int> group;
  std::string uuid{};  // create-vgpu / remove-vgpu on the mdev interface

  std::string describe() const;  // "0000:3b:00.0: unbind from nvidia"
};

// What a device looked like before the plan, and what it should look like after.
struct DeviceState {
  std::optional<std::string> driver;
  std::optional<std::string> driverOverride;
  bool operator==(const DeviceState&) const = default;
};

// Is this step well-formed: a device step has its device, a driver or module argument is a valid
// name (validate.hpp), a group is 0..999999? The executor checks every step before it runs it and
// the journal parser checks every step it reads, so no name reaches a path unchecked.
Status checkStep(const Step& st);
// Are a device state's driver and override valid names? `what` names the device in the error.
Status checkDeviceState(std::string_view what, const DeviceState& st);

}  // namespace hostprep
