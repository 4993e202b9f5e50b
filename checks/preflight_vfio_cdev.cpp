#include "checks/preflight_vfio_cdev.hpp"

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

constexpr std::string_view kId = "iommu.iommufd";
constexpr std::string_view kGroupInterface =
    "VMMs use the VFIO group interface (/dev/vfio/<group>), as on every kernel before 6.6";

// A CONFIG_ symbol's value, nullopt when the config is unknown, the symbol absent or "n".
std::optional<std::string> configSymbol(const std::optional<KernelConfig>& config,
                                        const std::string& sym) {
  if (!config) return std::nullopt;
  auto v = config->get(sym);
  if (!v || *v == "n") return std::nullopt;
  return std::string(*v);
}

std::string symbolText(const std::optional<std::string>& v, std::string_view sym) {
  return v ? std::string(sym) + "=" + *v : std::string(sym) + " not set";
}

}  // namespace

CheckResult checkIommufd(const PlatformFacts& p, const Snapshot* s, const Selection* sel,
                         Mode mode) {
  if (!vmMode(mode)) return skipForMode(kId, mode);
  const auto iommufd = configSymbol(p.kernelConfig, "CONFIG_IOMMUFD");
  const auto cdev = configSymbol(p.kernelConfig, "CONFIG_VFIO_DEVICE_CDEV");
  const bool devIommu = s && s->iommufd;
  const std::string source =
      p.kernelConfigSource.empty() ? "the kernel config" : p.kernelConfigSource;
  const std::string config = symbolText(iommufd, "CONFIG_IOMMUFD") + ", " +
                             symbolText(cdev, "CONFIG_VFIO_DEVICE_CDEV") + " in " + source;

  // The selected functions on vfio-pci, with and without their device file.
  std::vector<std::string> files, missing;
  bool onVfio = false;
  if (s && sel) {
    for (const auto& t : sel->targets) {
      const PciFunction* f = s->find(t.bdf);
      if (!f || f->driver != "vfio-pci") continue;
      onVfio = true;
      if (f->vfioDevice)
        files.push_back(t.bdf.str() + " /dev/vfio/devices/" + *f->vfioDevice);
      else
        missing.push_back(t.bdf.str());
    }
  }

  const bool kernelHasFiles = cdev == "y" || !files.empty();
  if (!kernelHasFiles) {
    if (iommufd) {
      return makeCheck(kId, CheckStatus::kInfo,
                       config + (devIommu ? "; /dev/iommu present" : "") +
                           ": iommufd without VFIO device files; " + std::string(kGroupInterface));
    }
    if (devIommu) {
      return makeCheck(kId, CheckStatus::kInfo,
                       "/dev/iommu present (iommufd); no selected function on vfio-pci has a VFIO "
                       "device file yet and there is no kernel config to read (boot/config-" +
                           p.kernelRelease + ", lib/modules/" + p.kernelRelease +
                           "/config, proc/config.gz)");
    }
    const std::string why = p.kernelConfig
                                ? config
                                : "no /dev/iommu, and no kernel config to read (boot/config-" +
                                      p.kernelRelease + ", lib/modules/" + p.kernelRelease +
                                      "/config, proc/config.gz)";
    return makeCheck(kId, CheckStatus::kInfo,
                     "the kernel has no iommufd and no VFIO device files (" + why + "); " +
                         std::string(kGroupInterface));
  }

  const std::string found = p.kernelConfig ? config : "VFIO device files";
  if (!missing.empty()) {
    return makeCheck(
        kId, CheckStatus::kWarn,
        found + ", but " + join(missing, ", ") + " on vfio-pci " +
            (missing.size() == 1 ? "has" : "have") +
            " no /dev/vfio/devices/vfioN (a vfio-dev/vfioN entry with a dev number in sysfs, and "
            "its node); VMs can still use /dev/vfio/<group>",
        "mount devtmpfs on /dev (the kernel creates /dev/vfio/devices/vfioN there), then run "
        "'hostprep prepare --mode vm-passthrough' again; if " +
            source + " is not the running kernel's, ignore this");
  }
  // iommufd built in, or a module that vfio (loaded: something is on vfio-pci) pulls in.
  if (!devIommu && (iommufd == "y" || (iommufd == "m" && onVfio))) {
    return makeCheck(kId, CheckStatus::kWarn,
                     found + ", but /dev/iommu is missing: VMMs cannot use iommufd",
                     "modprobe iommufd, and mount devtmpfs on /dev (the kernel creates /dev/iommu "
                     "there)");
  }
  std::string d = found;
  if (devIommu)
    d += "; /dev/iommu present";
  else if (iommufd == "m")
    d += "; the iommufd module loads with vfio";
  if (!files.empty())
    d += "; " + join(files, ", ");
  else
    d += "; no selected function on vfio-pci yet (prepare verifies each device file)";
  return makeCheck(kId, CheckStatus::kPass, d);
}

CheckResult checkImageIommufd(const std::vector<ImageKernel>& kernels, Mode mode) {
  if (!vmMode(mode)) return skipForMode(kId, mode);
  std::vector<std::string> with, without;
  for (const auto& k : kernels) {
    if (!k.config) continue;
    const auto iommufd = configSymbol(k.config, "CONFIG_IOMMUFD");
    const auto cdev = configSymbol(k.config, "CONFIG_VFIO_DEVICE_CDEV");
    (iommufd && cdev == "y" ? with : without).push_back(k.release);
  }
  if (with.empty() && without.empty())
    return makeCheck(kId, CheckStatus::kSkip, "no kernel config to read (see image.kernels)");
  if (without.empty()) {
    return makeCheck(kId, CheckStatus::kPass,
                     "kernel " + join(with, ", ") +
                         " built with iommufd and VFIO device files (CONFIG_IOMMUFD, "
                         "CONFIG_VFIO_DEVICE_CDEV=y); the device files need the hardware");
  }
  std::string d = "kernel " + join(without, ", ") +
                  " built without iommufd and VFIO device files (CONFIG_IOMMUFD, "
                  "CONFIG_VFIO_DEVICE_CDEV)";
  if (!with.empty()) d += "; kernel " + join(with, ", ") + " built with them";
  return makeCheck(kId, CheckStatus::kInfo, d + "; " + std::string(kGroupInterface));
}

}  // namespace hostprep
