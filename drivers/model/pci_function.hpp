// One PCI function read from sysfs: what it is (ids, class, SR-IOV geometry, BARs, IOMMU group,
// VFs) and how it is bound (driver, override, VF count, vfio-dev, whether it answers). The
// snapshot (snapshot.hpp) is made of these reads; the executor reads one again to verify a step.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/pci.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

// Names read from sysfs are kept as the kernel shows them (a driver link's name may be anything a
// hostile or broken root holds); whoever turns one into a path validates it first (validate.hpp).

// Reads one PCI function (used by the executor to verify a step against the live kernel).
// lockHeld: an unbind of it is pending; skip what takes the device lock (unbindPending = true).
// light: the same function read light in this snapshot a moment ago; its id, class, modalias and
// physfn (what a function is, not how it is bound) are taken from it instead of read again.
std::optional<PciFunction> readPciFunction(const Host& host, const Bdf& bdf, bool lockHeld = false,
                                           const PciFunction* light = nullptr);

// Reads again what a bind or unbind of `f` can change, or a write that sends no event: its driver,
// driver_override, sriov_numvfs and sriov_drivers_autoprobe, device links, mdev types and vfio-dev
// entry; keeps its identity, group, SR-IOV geometry, NUMA node, modalias, BARs and VFs (only an
// add or remove event changes those). False when the function is gone.
bool readBindingOf(const Host& host, PciFunction& f, bool lockHeld = false);

// The memory BARs 0-5 of a function's sysfs `resource` file: one line "start end flags" (hex)
// per resource, BARs first (drivers/pci/pci-sysfs.c resource_show); unused BARs read all zero.
// Flags are the kernel's IORESOURCE_* bits (include/linux/ioport.h).
std::vector<PciBar> parsePciResource(std::string_view text);
// Whether any VF BAR (`resource` lines 7-12, PCI_IOV_RESOURCES) has memory; nullopt when the
// file stops before them (no SR-IOV capability, or a kernel without CONFIG_PCI_IOV).
std::optional<bool> parseVfBarsAssigned(std::string_view text);

// The VFIO device file of a function ("vfio3": /dev/vfio/devices/vfio3), when the kernel made one
// (a vfio-dev/vfioN entry with a `dev` number: CONFIG_VFIO_DEVICE_CDEV) and the node is there to
// open. nullopt otherwise.
std::optional<std::string> vfioDeviceName(const Host& host, const Bdf& bdf);

// Does the function answer (PciFunction::responsive)? Reads the first bytes of its `config`;
// nullopt where that file cannot be read.
std::optional<bool> readResponsive(const Host& host, const Bdf& bdf);

// Host paths of a PCI function's attributes.
std::string pciDevicePath(const Bdf& bdf);           // sys/bus/pci/devices/<bdf>
std::string pciDriverPath(std::string_view driver);  // sys/bus/pci/drivers/<drv>

// What every function of a scoped snapshot carries (the WholeFunction contract, snapshot.hpp).
// nullopt when the function is not there (as readPciFunction).
std::optional<PciFunction> readLightFunction(const Host& host, const Bdf& bdf);

// The VFs a function's virtfn<N> links name (drivers/pci/iov.c pci_iov_sysfs_link), by N; empty
// for a function that is not an enabled SR-IOV PF. One readlink of virtfn0 decides, so a function
// without VFs costs one failed system call.
std::vector<Bdf> readVirtfns(const Host& host, const Bdf& bdf);

}  // namespace hostprep
