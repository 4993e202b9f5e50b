// Boot persistence: what keeps the host driver away from passthrough GPUs from the first boot
// stage, before hostprep-prepare.service runs. vfio-pci claims the ids at load, softdeps load
// vfio-pci before the drivers that would grab the devices, and the modules go into the
// initramfs (vfio-pci.ids is a module parameter, read only when vfio-pci loads). A pure plan
// of file contents, then an apply through the Host seam.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/host.hpp"
#include "drivers/mode.hpp"
#include "drivers/selection.hpp"
#include "drivers/snapshot.hpp"

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
  bool initramfsChanges = false;      // update-initramfs -u is needed

  bool noop() const;
};

// etc/initramfs-tools/modules with hostprep's block replaced by `modules` (removed when empty);
// every other line is kept as it is.
std::string withInitramfsBlock(std::string_view current, const std::vector<std::string>& modules);

// The files for a mode: vm-passthrough writes them, any other mode removes them. `current`
// reads the files as they are now (nullopt when absent).
PersistPlan makePersistPlan(
    const Snapshot& s, const Selection& sel, Mode mode,
    const std::function<std::optional<std::string>(std::string_view)>& current);

Status applyPersistPlan(Host& host, const PersistPlan& p);

}  // namespace hostprep
