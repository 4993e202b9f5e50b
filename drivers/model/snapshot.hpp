// The host, read once: PCI functions, IOMMU groups, loaded modules, kernel release and command
// line. Everything downstream (checks, plan, status) is a pure function of a Snapshot.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drivers/common/parsers.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

struct Snapshot {
  std::vector<PciFunction> pci;                 // sorted by BDF
  std::map<int, std::vector<Bdf>> iommuGroups;  // from sys/kernel/iommu_groups
  std::set<std::string> loadedModules;          // proc/modules, normalised names
  // sys/bus/pci/drivers: each PCI driver and the module that registered it, from the driver's
  // `module` link to sys/module/<name> (drivers/base/module.c module_add_driver); "" where the
  // kernel shows no link (a built-in driver). One module may register several drivers.
  std::map<std::string, std::string> pciDrivers;
  std::string kernelRelease;  // proc/sys/kernel/osrelease; empty if unknown
                              // or not a valid release (isValidKernelRelease)
  std::string cmdlineText;
  Cmdline cmdline;
  std::optional<Bdf> rootDiskPci;  // the PCI function behind the root filesystem, if found
  bool iommufd = false;            // dev/iommu exists: the kernel has iommufd (CONFIG_IOMMUFD)

  const PciFunction* find(const Bdf& bdf) const;
  PciFunction* find(const Bdf& bdf);
  bool moduleLoaded(std::string_view module) const;
  // Functions in a group, as recorded by the kernel (falls back to matching iommu_group links).
  std::vector<const PciFunction*> groupMembers(int group) const;
  bool operator==(const Snapshot&) const = default;
};

// Reads the host. Absent files are states (no IOMMU, no SR-IOV, no driver), never errors; the
// only error is a host without sys/bus/pci at all, which is not a Linux root. A device whose
// unbind a journal left pending (and still is: unbindStillPending) is read without the
// attributes that take its device lock, so the snapshot never blocks.
Result<Snapshot> readSnapshot(const Host& host);

// Which functions a scoped readSnapshot reads whole, asked of each function read light: its
// bdf, id, class, driver and physfn only.
using WholeFunction = std::function<bool(const PciFunction& light)>;

// readSnapshot for a reader that looks closely only at a few functions (preflight: the GPUs it
// may select). Every function is listed and read light; `whole` picks those read whole, and with
// them the members of their IOMMU groups and their consumers (what a selection reaches). Of the
// other functions only the light attributes are set; iommuGroups names every group, with members
// listed only for the groups of whole functions (the others are empty). A PF's VFs are found from
// its virtfn links: the first VF is read light, the others take its id and class (the kernel
// gives all VFs of a PF the same ones) and only their driver link is read; of a VF that `whole`
// picks (asked with that light read) also its driver_override and IOMMU group, what a plan needs
// of a VF (its group's members are not listed). On 16 GPUs with 255 VFs each this reads one link
// (three files with the VFs picked) of a VF instead of 14 attributes and a directory listing,
// and 16 group directories instead of 4,098. A group of a whole function that is
// not listed, or lists no member (groupMembers() then matches every function's iommu_group link),
// falls back to readSnapshot(host).
Result<Snapshot> readSnapshot(const Host& host, const WholeFunction& whole);

// The snapshot after a burst of bind/unbind/change events on `changed`: `before` with those
// functions read again. What only add/remove events can change (the set of functions, IOMMU
// groups), what changes with a module's own events (loaded modules, PCI drivers, /dev/iommu: the
// agent reads all after those) and what no device event changes (kernel release, command line,
// root disk) is kept. Equal to readSnapshot() of the same host when `changed` names every function
// whose attributes moved and no module came or went;
// a function in `changed` that `before` lacks (or that is gone) makes it a full readSnapshot().
// A function now on a driver `before` does not know makes it read the loaded modules and PCI
// drivers again: a module's add event comes only after its init, where driver_register() binds
// the devices it takes (kernel/module/main.c, do_init_module), so their bind events come first.
// Of a function also in `rebound` (its events were binds and unbinds only) just the binding state
// is read again (readBindingOf): a bind or unbind does not change its identity, group or BARs.
Result<Snapshot> refreshSnapshot(const Host& host, const Snapshot& before,
                                 const std::set<Bdf>& changed, const std::set<Bdf>& rebound = {});

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

// Is an unbind of this device from `driver` still running in the kernel? The kernel removes the
// `driver` link before it calls the driver's remove(), so the link cannot say; a timed read of the
// device's uevent can: it does not answer (6.1 takes the device lock the unbind holds), or it
// says DRIVER=<driver> (6.12: dev->driver is cleared only after remove() returns). Without a
// uevent file, a timed read of driver_override (device lock on 6.1) decides. A blocked read leaves
// one child process waiting in the kernel until remove() returns.
bool unbindStillPending(const Host& host, const Bdf& bdf, std::string_view driver);

// Is a probe of this device (a bind or drivers_probe write that did not return) still running?
// A probe holds the device lock (drivers/base/dd.c __driver_attach, __device_attach), so a timed
// read of what waits for it does not answer: the device's uevent on 6.1 (driver_override where
// there is no uevent file), a PF's sriov_numvfs on any kernel since 5.15. On 6.12 neither uevent
// nor driver_override waits, so only a PF tells; a read of the others does not wait there, and a
// later write to them is timed.
bool probeStillPending(const Host& host, const Bdf& bdf);

// Is a write to this PF's sriov_numvfs still running in the kernel? Its show() takes the device
// lock the write holds (drivers/pci/iov.c sriov_numvfs_show, Linux 5.15+), so a timed read of it
// that does not answer means yes. On older kernels the read answers, and the next write (timed)
// finds out. A blocked read leaves one child process waiting in the kernel until it is done.
bool numVfsWriteStillPending(const Host& host, const Bdf& pf);

// Every address a VF of this PF can have: sriov_totalvfs of them, placed by sriov_offset and
// sriov_stride (none of which takes the device lock), and whatever its virtfn links name. Not the
// links alone: pci_iov_remove_virtfn() removes a VF's virtfn and physfn links before the VF
// itself, so the VF a disable waits on is linked to its PF no more.
std::vector<Bdf> vfSlots(const Host& host, const Bdf& pf);

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

}  // namespace hostprep
