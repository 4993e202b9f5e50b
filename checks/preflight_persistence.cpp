#include "checks/preflight_persistence.hpp"

#include <algorithm>
#include <set>

#include "drivers/common/text.hpp"

namespace hostprep {

namespace {

constexpr const char* kId = "boot.persistence";

// What hands devices to vfio-pci at boot (or keeps the host driver off them), from the boot
// configuration and the kernel command lines.
struct BootVfio {
  std::set<PciId> ids;
  std::vector<std::string> idSources;
  bool cmdlineIds = false;
  std::vector<std::string> softdeps;
  bool unit = false;
  std::vector<std::string> found;  // every mechanism, for the PASS detail
};

BootVfio readBootVfio(const BootConfig& boot, const std::vector<CmdlineView>& cmdlines,
                      const std::string& host) {
  BootVfio b;
  for (const auto& v : boot.optionValues("vfio_pci", "ids")) {
    for (auto part : split(v, ',')) {
      if (auto pid = parsePciId(trim(part))) b.ids.insert(*pid);
    }
    b.idSources.push_back("modprobe.d options vfio-pci ids=" + v);
  }
  for (const auto& c : cmdlines) {
    if (auto v = cmdlineValue(c.args, "vfio_pci.ids")) {
      b.cmdlineIds = true;
      for (auto part : split(*v, ',')) {
        if (auto pid = parsePciId(trim(part))) b.ids.insert(*pid);
      }
      b.idSources.push_back(c.origin + " vfio-pci.ids=" + *v);
    }
  }
  for (const auto& m : {host, std::string("nouveau")}) {
    auto pre = boot.softdepPre(m);
    if (std::find(pre.begin(), pre.end(), "vfio_pci") != pre.end())
      b.softdeps.push_back("softdep " + m + " pre: vfio-pci");
  }
  b.unit = !boot.enabledUnits.empty();
  if (b.unit)
    b.found.push_back(std::string(kPrepareUnit) + " enabled (" + boot.enabledUnits.front() + ")");
  b.found.insert(b.found.end(), b.idSources.begin(), b.idSources.end());
  b.found.insert(b.found.end(), b.softdeps.begin(), b.softdeps.end());
  if (boot.loadsAtBoot("vfio_pci")) b.found.push_back("vfio_pci loaded at boot");
  return b;
}

const std::string& enableUnit() {
  static const std::string s = "'systemctl enable " + std::string(kPrepareUnit) + "'";
  return s;
}

// vm-passthrough: do the boot's vfio-pci ids (or the unit) hand `targets` to vfio-pci, and will
// vfio-pci load before the host driver? `persist` is the remedy that writes the files.
CheckResult passthroughPersistence(const BootVfio& b, const std::vector<PciId>& targets,
                                   const BootConfig& boot,
                                   const std::optional<KernelConfig>& config,
                                   const std::string& host, const std::string& persist) {
  const auto& ids = b.ids;
  const auto& found = b.found;
  std::vector<PciId> missing;
  for (const auto& t : targets) {
    if (!ids.count(t) && std::find(missing.begin(), missing.end(), t) == missing.end())
      missing.push_back(t);
  }
  const bool idsCover = !ids.empty() && missing.empty();
  const bool unit = b.unit;
  if (unit && (ids.empty() || idsCover))
    return makeCheck(kId, CheckStatus::kPass, join(found, "; "));
  if (ids.empty()) {
    return makeCheck(kId, CheckStatus::kWarn,
                     "nothing hands the GPUs to vfio-pci at boot (no vfio-pci ids, softdep or " +
                         std::string(kPrepareUnit) +
                         "): after a reboot the host driver takes them again",
                     persist);
  }
  if (!missing.empty()) {
    return makeCheck(
        kId, CheckStatus::kWarn,
        "vfio-pci ids at boot miss " + idList(missing) + " (have " + join(b.idSources, "; ") + ")",
        "add them: the line \"options vfio-pci ids=" + idList([&] {
          std::vector<PciId> all(ids.begin(), ids.end());
          for (const auto& m : missing) all.push_back(m);
          return all;
        }()) +
            "\" in /etc/modprobe.d/hostprep-vfio.conf (or " + persist + ")");
  }
  // ids cover the targets: will vfio-pci win the race against the host driver?
  const bool builtin = config && config->is("CONFIG_VFIO_PCI", "y");
  if (builtin && !b.cmdlineIds && !unit) {
    return makeCheck(
        kId, CheckStatus::kWarn,
        "vfio-pci is built into the kernel, so the modprobe.d ids are ignored",
        addKernelArgsRemedy("vfio-pci.ids=" + idList(std::vector<PciId>(ids.begin(), ids.end())),
                            boot));
  }
  if (b.softdeps.empty() && !b.cmdlineIds && !unit) {
    return makeCheck(
        kId, CheckStatus::kWarn,
        join(found, "; ") + "; but no softdep makes vfio-pci load before " + host + "/nouveau",
        "add the lines \"softdep " + host +
            " pre: vfio-pci\" and \"softdep nouveau pre: vfio-pci\" to "
            "/etc/modprobe.d/hostprep-vfio.conf, then run update-initramfs -u (or dracut -f)");
  }
  return makeCheck(kId, CheckStatus::kPass, join(found, "; "));
}

}  // namespace

CheckResult checkBootPersistence(Mode mode, const BootConfig& boot,
                                 const std::vector<CmdlineView>& cmdlines,
                                 const std::vector<PciId>& targets,
                                 const std::optional<KernelConfig>& config,
                                 const std::string& hostDriver) {
  const char* id = kId;
  const std::string host = normalizeModuleName(hostDriver);
  const BootVfio b = readBootVfio(boot, cmdlines, host);
  const auto& ids = b.ids;
  const auto& idSources = b.idSources;
  const bool unit = b.unit;
  const auto& found = b.found;

  if (mode == Mode::kContainer) {
    std::vector<PciId> grabbed;
    for (const auto& t : targets) {
      if (ids.count(t)) grabbed.push_back(t);
    }
    if (!grabbed.empty() || (targets.empty() && !ids.empty())) {
      return makeCheck(
          id, CheckStatus::kWarn,
          "the boot configuration hands " +
              (grabbed.empty() ? std::string("devices") : idList(grabbed)) +
              " to vfio-pci at boot (" + join(idSources, "; ") + "): the GPUs would not reach " +
              host,
          "remove the vfio-pci ids from those files (hostprep persist --mode container rewrites "
          "/etc/modprobe.d/hostprep-vfio.conf), regenerate the initramfs (update-initramfs -u) and "
          "reboot");
    }
    if (unit) return makeCheck(id, CheckStatus::kPass, found.front());
    return makeCheck(id, CheckStatus::kInfo,
                     host + " binds the GPUs at boot by itself; nothing to persist");
  }

  // persist writes (vm-passthrough) or removes (any other mode) hostprep's modprobe.d and
  // modules-load.d files; it enables no unit.
  const std::string persist =
      mode == Mode::kVmPassthrough
          ? "run 'hostprep persist --mode vm-passthrough' (writes "
            "/etc/modprobe.d/hostprep-vfio.conf), or " +
                enableUnit()
          : "run " + enableUnit() + " (it re-creates the VFs and vGPU devices at every boot)";
  if (mode == Mode::kVmVgpu) {
    if (!ids.empty()) {
      return makeCheck(
          id, CheckStatus::kWarn,
          "the boot configuration hands devices to vfio-pci (" + join(idSources, "; ") +
              "): the vGPU manager needs the GPUs on nvidia",
          "remove those vfio-pci ids ('hostprep persist --mode vm-vgpu' removes hostprep's "
          "own); " +
              persist);
    }
    if (unit) return makeCheck(id, CheckStatus::kPass, found.front());
    return makeCheck(
        id, CheckStatus::kWarn,
        "nothing restores SR-IOV VFs and vGPU devices at boot: they are lost on every reboot",
        persist);
  }

  return passthroughPersistence(b, targets, boot, config, host, persist);
}

CheckResult checkBootPersistenceSplit(const std::map<Mode, std::vector<PciId>>& targets,
                                      const BootConfig& boot,
                                      const std::vector<CmdlineView>& cmdlines,
                                      const std::optional<KernelConfig>& config,
                                      const std::string& hostDriver) {
  const std::string host = normalizeModuleName(hostDriver);
  const BootVfio b = readBootVfio(boot, cmdlines, host);
  std::set<PciId> passthrough, other;
  std::vector<std::string> otherModes;
  for (const auto& [m, ids] : targets) {
    if (m == Mode::kVmPassthrough) {
      passthrough.insert(ids.begin(), ids.end());
    } else {
      other.insert(ids.begin(), ids.end());
      otherModes.push_back(std::string(toString(m)));
    }
  }
  const std::string others = join(otherModes, " and ");
  std::vector<PciId> shared, own, grabbed;
  for (const auto& id : passthrough) (other.count(id) ? shared : own).push_back(id);
  for (const auto& id : other) {
    if (b.ids.count(id)) grabbed.push_back(id);
  }

  // 1. vfio-pci ids that would take the other modes' GPUs at boot.
  if (!grabbed.empty()) {
    return makeCheck(
        kId, CheckStatus::kWarn,
        "split: the boot configuration hands " + idList(grabbed) + " to vfio-pci at boot (" +
            join(b.idSources, "; ") + "): vfio-pci would take the " + others +
            " GPUs with these ids too",
        "remove " + idList(grabbed) +
            " from the vfio-pci ids ('hostprep persist' rewrites "
            "/etc/modprobe.d/hostprep-vfio.conf without the ids GPUs of two modes share), run "
            "update-initramfs -u, and " +
            enableUnit() + " (it binds the split at boot by driver_override)");
  }
  // 2. What only the unit can do: a shared id, vGPU devices.
  const std::string sharedText =
      shared.empty() ? ""
                     : "vfio-pci ids cannot hand out only the vm-passthrough GPUs (" +
                           idList(shared) + " also belong to " + others + " GPUs)";
  if (!b.unit && (!shared.empty() || targets.count(Mode::kVmVgpu))) {
    return makeCheck(kId, CheckStatus::kWarn,
                     "split: " +
                         (shared.empty() ? std::string("nothing restores SR-IOV VFs and vGPU "
                                                       "devices at boot")
                                         : sharedText) +
                         ", and " + std::string(kPrepareUnit) +
                         " is not enabled: after a reboot the split is lost",
                     "run " + enableUnit() +
                         " (at boot it converges the split: driver_override for the "
                         "vm-passthrough GPUs" +
                         (targets.count(Mode::kVmVgpu) ? ", the VFs and vGPU devices" : "") + ")");
  }
  if (!shared.empty()) {
    return makeCheck(kId, CheckStatus::kPass,
                     "split: " + b.found.front() +
                         " hands the vm-passthrough GPUs to vfio-pci at boot by driver_override; " +
                         sharedText);
  }
  // 3. No id shared across modes: vfio-pci ids for the passthrough ones work as in
  //    vm-passthrough mode ('hostprep persist' without --mode writes exactly those).
  if (own.empty()) return makeCheck(kId, CheckStatus::kPass, "split: " + join(b.found, "; "));
  auto r = passthroughPersistence(b, own, boot, config, host,
                                  "run 'hostprep persist' (writes the vm-passthrough GPUs' ids to "
                                  "/etc/modprobe.d/hostprep-vfio.conf), or " +
                                      enableUnit());
  r.detail = "split, no id shared across modes: " + r.detail;
  return r;
}

}  // namespace hostprep
