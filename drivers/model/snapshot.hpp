// The host, read once: PCI functions, IOMMU groups, loaded modules, kernel release and command
// line. Everything downstream (checks, plan, status) is a pure function of a Snapshot.
// Its readers come with it: one function's (pci_function.hpp), and the checks for writes still
// running in the kernel that a read goes around (pending_writes.hpp).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drivers/common/parsers.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/model/pci_function.hpp"
#include "drivers/model/pending_writes.hpp"
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

}  // namespace hostprep
