// The host driver of a function is the driver its host module gives that function. --host-driver
// names a module ("nvidia"), and one module may register several PCI drivers: nvidia.ko registers
// "nvidia" for its GPUs and "nvidia-nvswitch" for NVSwitches (NVSWITCH_DRIVER_NAME in
// NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia/linux_nvswitch.h). The kernel shows which
// module registered a driver: sys/bus/pci/drivers/<driver>/module links to sys/module/<module>
// (drivers/base/module.c module_add_driver). Which of a module's drivers takes a function is the
// kernel's to decide (its ID tables are not in sysfs): a probe binds the one that matches, and
// the plan verifies the module, not a driver name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/snapshot.hpp"

namespace hostprep {

// Is `driver` one of the PCI drivers `module` registers? Where the kernel shows no module link
// for a driver (not loaded yet, or a root without the links), a driver named like the module is
// taken as its own ("nvidia" of nvidia, "vfio-pci" of vfio_pci).
bool isDriverOfModule(const Snapshot& s, std::string_view driver, std::string_view module);

// The PCI drivers the snapshot shows `module` registered, sorted (empty when it is not loaded).
std::vector<std::string> driversOfModule(const Snapshot& s, std::string_view module);

// The host driver of `f` by name, where the snapshot tells it: the module's driver it is bound
// to, else the module's only PCI driver; "" where the module registers several (or none yet) and
// the probe will choose.
std::string hostDriverOf(const Snapshot& s, const PciFunction& f, std::string_view module);

// "nvidia" or "a driver of module nvidia (nvidia, nvidia-nvswitch)": for messages.
std::string describeHostDriver(const Snapshot& s, std::string_view module);

}  // namespace hostprep
