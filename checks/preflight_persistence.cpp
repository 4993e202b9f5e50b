#include "checks/preflight_persistence.hpp"

#include <algorithm>
#include <set>

#include "drivers/text.hpp"

namespace hostprep {

CheckResult checkBootPersistence(Mode mode, const BootConfig& boot,
                                 const std::vector<CmdlineView>& cmdlines,
                                 const std::vector<PciId>& targets,
                                 const std::optional<KernelConfig>& config,
                                 const std::string& hostDriver) {
  const char* id = "boot.persistence";
  // What hands devices to vfio-pci at boot.
  std::set<PciId> ids;
  std::vector<std::string> idSources;
  for (const auto& v : boot.optionValues("vfio_pci", "ids")) {
    for (auto part : split(v, ',')) {
      if (auto pid = parsePciId(trim(part))) ids.insert(*pid);
    }
    idSources.push_back("modprobe.d options vfio-pci ids=" + v);
  }
  bool cmdlineIds = false;
  for (const auto& c : cmdlines) {
    if (auto v = cmdlineValue(c.args, "vfio_pci.ids")) {
      cmdlineIds = true;
      for (auto part : split(*v, ',')) {
        if (auto pid = parsePciId(trim(part))) ids.insert(*pid);
      }
      idSources.push_back(c.origin + " vfio-pci.ids=" + *v);
    }
  }
  const std::string host = normalizeModuleName(hostDriver);
  std::vector<std::string> softdeps;
  for (const auto& m : {host, std::string("nouveau")}) {
    auto pre = boot.softdepPre(m);
    if (std::find(pre.begin(), pre.end(), "vfio_pci") != pre.end())
      softdeps.push_back("softdep " + m + " pre: vfio-pci");
  }
  const bool unit = !boot.enabledUnits.empty();
  std::vector<std::string> found;
  if (unit)
    found.push_back(std::string(kPrepareUnit) + " enabled (" + boot.enabledUnits.front() + ")");
  found.insert(found.end(), idSources.begin(), idSources.end());
  found.insert(found.end(), softdeps.begin(), softdeps.end());
  if (boot.loadsAtBoot("vfio_pci")) found.push_back("vfio_pci loaded at boot");
  std::vector<PciId> missing;
  for (const auto& t : targets) {
    if (!ids.count(t) && std::find(missing.begin(), missing.end(), t) == missing.end())
      missing.push_back(t);
  }
  const bool idsCover = !ids.empty() && missing.empty();

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
  const std::string enableUnit = "'systemctl enable " + std::string(kPrepareUnit) + "'";
  const std::string persist =
      mode == Mode::kVmPassthrough
          ? "run 'hostprep persist --mode vm-passthrough' (writes "
            "/etc/modprobe.d/hostprep-vfio.conf), or " +
                enableUnit
          : "run " + enableUnit + " (it re-creates the VFs and vGPU devices at every boot)";
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

  // vm-passthrough
  if (unit && (ids.empty() || idsCover))
    return makeCheck(id, CheckStatus::kPass, join(found, "; "));
  if (ids.empty()) {
    return makeCheck(id, CheckStatus::kWarn,
                     "nothing hands the GPUs to vfio-pci at boot (no vfio-pci ids, softdep or " +
                         std::string(kPrepareUnit) +
                         "): after a reboot the host driver takes them again",
                     persist);
  }
  if (!missing.empty()) {
    return makeCheck(
        id, CheckStatus::kWarn,
        "vfio-pci ids at boot miss " + idList(missing) + " (have " + join(idSources, "; ") + ")",
        "add them: the line \"options vfio-pci ids=" + idList([&] {
          std::vector<PciId> all(ids.begin(), ids.end());
          for (const auto& m : missing) all.push_back(m);
          return all;
        }()) +
            "\" in /etc/modprobe.d/hostprep-vfio.conf (or " + persist + ")");
  }
  // ids cover the targets: will vfio-pci win the race against the host driver?
  const bool builtin =
      config && config->count("CONFIG_VFIO_PCI") && config->at("CONFIG_VFIO_PCI") == "y";
  if (builtin && !cmdlineIds && !unit) {
    return makeCheck(
        id, CheckStatus::kWarn,
        "vfio-pci is built into the kernel, so the modprobe.d ids are ignored",
        addKernelArgsRemedy("vfio-pci.ids=" + idList(std::vector<PciId>(ids.begin(), ids.end())),
                            boot));
  }
  if (softdeps.empty() && !cmdlineIds && !unit) {
    return makeCheck(
        id, CheckStatus::kWarn,
        join(found, "; ") + "; but no softdep makes vfio-pci load before " + host + "/nouveau",
        "add the lines \"softdep " + host +
            " pre: vfio-pci\" and \"softdep nouveau pre: vfio-pci\" to "
            "/etc/modprobe.d/hostprep-vfio.conf, then run update-initramfs -u (or dracut -f)");
  }
  return makeCheck(id, CheckStatus::kPass, join(found, "; "));
}

}  // namespace hostprep
