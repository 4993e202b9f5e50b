// Boot persistence: what keeps the host driver away from passthrough GPUs from the first boot
// stage, before hostprep-prepare.service runs. vfio-pci claims the ids at load, softdeps load
// vfio-pci before the drivers that would grab the devices, and the modules go into the
// initramfs (vfio-pci.ids is a module parameter, read only when vfio-pci loads). A pure plan
// of file contents, then an apply through the Host seam.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

inline constexpr std::string_view kPersistModprobe = "etc/modprobe.d/hostprep-vfio.conf";
inline constexpr std::string_view kPersistModulesLoad = "etc/modules-load.d/hostprep-vfio.conf";
inline constexpr std::string_view kInitramfsModules = "etc/initramfs-tools/modules";
inline constexpr std::string_view kInitramfsBegin =
    "# BEGIN hostprep (managed by 'hostprep persist'; do not edit)";
inline constexpr std::string_view kInitramfsEnd = "# END hostprep";

struct PersistFile {
  std::string path;                    // host path
  std::optional<std::string> content;  // nullopt: remove the file
  bool changes = false;                // differs from what is there now
};

struct PersistPlan {
  std::vector<PersistFile> files;
  std::vector<std::string> warnings;  // e.g. an unselected device sharing a selected id
  std::vector<std::string> notes;     // e.g. ids left out on a split, and what binds those GPUs
  bool initramfsChanges = false;      // update-initramfs -u is needed

  bool noop() const;
};

// etc/initramfs-tools/modules with hostprep's block replaced by `modules` (removed when empty);
// every other line is kept as it is.
std::string withInitramfsBlock(std::string_view current, const std::vector<std::string>& modules);

// What `options vfio-pci ids=` may name. vfio-pci adds every listed id as a dynamic id when it
// loads and so claims every device with it (Linux drivers/vfio/pci/vfio_pci.c, vfio_pci_fill_ids
// calls pci_add_dynid; modinfo vfio-pci: "ids: Initial PCI IDs to add to the vfio driver"),
// so on a split an id that functions in vm-passthrough mode share with functions in another mode
// cannot be listed: vfio-pci would take those too. hostprep-prepare.service then hands the
// passthrough functions to vfio-pci at boot by driver_override instead.
struct VfioIds {
  std::set<PciId> claim;   // ids of vm-passthrough functions that no other selected one has
  std::set<PciId> shared;  // ids of vm-passthrough functions that a function in another mode has
};
VfioIds vfioIdsFor(const Snapshot& s, const Selection& sel, const DeviceModes& modes);

// The files for the modes: when a function is in vm-passthrough mode they are written (ids= for
// VfioIds::claim only), else removed. `current` reads the files as they are now (nullopt when
// absent).
PersistPlan makePersistPlan(
    const Snapshot& s, const Selection& sel, const DeviceModes& modes,
    const std::function<std::optional<std::string>(std::string_view)>& current);
// Every selected function in one mode (persist --mode M).
PersistPlan makePersistPlan(
    const Snapshot& s, const Selection& sel, Mode mode,
    const std::function<std::optional<std::string>(std::string_view)>& current);

Status applyPersistPlan(Host& host, const PersistPlan& p);

}  // namespace hostprep
