#include "checks/preflight_modules.hpp"

#include "drivers/common/text.hpp"

namespace hostprep {

CheckResult checkVfioModules(const std::map<std::string, ModuleFacts>& mods,
                             const std::string& release, Mode mode) {
  const char* id = "modules.vfio";
  if (!vmMode(mode)) return skipForMode(id, mode);
  std::vector<std::string> need{"vfio", "vfio_iommu_type1"};
  if (mode == Mode::kVmPassthrough) need.insert(need.begin() + 1, "vfio_pci");
  std::vector<std::string> missing, present;
  for (const auto& m : need) {
    auto it = mods.find(m);
    (it != mods.end() && it->second.available() ? present : missing).push_back(m);
  }
  std::string rel = release.empty() ? "the running kernel" : "kernel " + release;
  if (missing.empty())
    return makeCheck(id, CheckStatus::kPass, join(present, ", ") + " available for " + rel);
  return makeCheck(
      id, CheckStatus::kFail,
      join(missing, ", ") + " not available for " + rel +
          " (not loaded, not built in, not in modules.dep)",
      "install the kernel's own module package for " + rel +
          " (Debian/Ubuntu: linux-image / linux-modules-extra; RHEL: kernel-modules-core), "
          "or build with CONFIG_VFIO, CONFIG_VFIO_PCI, CONFIG_VFIO_IOMMU_TYPE1; then run depmod");
}

CheckResult checkVgpuModules(const std::map<std::string, ModuleFacts>& mods, Mode mode) {
  const char* id = "modules.vgpu";
  if (mode != Mode::kVmVgpu) return skipForMode(id, mode);
  auto it = mods.find("nvidia_vgpu_vfio");
  if (it != mods.end() && it->second.loaded)
    return makeCheck(id, CheckStatus::kPass, "nvidia_vgpu_vfio loaded");
  if (it != mods.end() && it->second.available()) {
    return makeCheck(id, CheckStatus::kPass, "nvidia_vgpu_vfio available");
  }
  return makeCheck(id, CheckStatus::kWarn,
                   "nvidia_vgpu_vfio is not installed for this kernel: no vGPU manager on the host "
                   "(fine only if "
                   "the GPU Operator's vgpu-manager container provides it)",
                   "install the NVIDIA vGPU manager (host driver package, e.g. "
                   "NVIDIA-Linux-x86_64-<ver>-vgpu-kvm.run) "
                   "for this kernel, or deploy the GPU Operator with vgpuManager.enabled=true");
}

CheckResult checkVgpuFirmware(const PlatformFacts& p, Mode mode) {
  const char* id = "modules.vgpu-firmware";
  if (mode != Mode::kVmVgpu) return skipForMode(id, mode);
  const std::string reinstall =
      "reinstall the NVIDIA vGPU manager (NVIDIA-Linux-x86_64-<version>-vgpu-kvm.run installs "
      "/lib/firmware/nvidia/<version>/gsp_*.bin), and rebuild the initramfs if nvidia loads from "
      "it (update-initramfs -u or dracut -f)";
  auto withGsp = [&](const std::string& v) {
    auto it = p.gspFirmware.find(v);
    return it != p.gspFirmware.end() && !it->second.empty() ? &it->second : nullptr;
  };
  if (p.nvidiaVersion) {
    const std::string& v = *p.nvidiaVersion;
    if (const auto* files = withGsp(v)) {
      return makeCheck(
          id, CheckStatus::kPass,
          "nvidia " + v + ": /lib/firmware/nvidia/" + v + "/ has " + join(*files, ", "));
    }
    return makeCheck(id, CheckStatus::kFail,
                     "nvidia " + v + " is loaded, but /lib/firmware/nvidia/" + v +
                         "/ has no gsp_*.bin: GPUs that need GSP firmware (Ampere and newer) "
                         "fail to initialize",
                     std::string(reinstall));
  }
  std::vector<std::string> versions;
  for (const auto& [v, files] : p.gspFirmware) {
    if (!files.empty()) versions.push_back(v);
  }
  if (versions.empty()) {
    return makeCheck(id, CheckStatus::kWarn,
                     "nvidia is not loaded and /lib/firmware/nvidia has no gsp_*.bin for any "
                     "version (fine only if the GPU Operator's vgpu-manager container provides "
                     "the driver)",
                     reinstall);
  }
  return makeCheck(id, CheckStatus::kInfo,
                   "nvidia is not loaded; GSP firmware installed for " + join(versions, ", ") +
                       ": it must match the vGPU manager's version");
}

CheckResult checkHostDriver(const std::map<std::string, ModuleFacts>& mods,
                            const std::string& driver, Mode mode, bool operatorDriver) {
  const char* id = "modules.host-driver";
  if (mode == Mode::kVmPassthrough) return skipForMode(id, mode);
  const std::string m = normalizeModuleName(driver);
  auto it = mods.find(m);
  if (it != mods.end() && it->second.loaded)
    return makeCheck(id, CheckStatus::kPass, m + " loaded");
  if (operatorDriver) {
    return makeCheck(id, CheckStatus::kInfo,
                     m + " is provided by the GPU Operator's driver container "
                         "(host-driver-provider): not loaded yet, hostprep waits for it");
  }
  if (it != mods.end() && it->second.available())
    return makeCheck(id, CheckStatus::kPass, m + " available");
  return makeCheck(
      id, CheckStatus::kWarn,
      m + " is not installed for this kernel (fine only if the GPU Operator's driver container "
          "provides it)",
      mode == Mode::kVmVgpu
          ? "install the NVIDIA vGPU manager for this kernel, or enable the GPU Operator's "
            "vgpu-manager"
          : "install the NVIDIA datacenter driver for this kernel (e.g. the nvidia-driver / "
            "nvidia-open packages, or DKMS), or enable the GPU Operator's driver container");
}

CheckResult checkNouveauLoaded(const PlatformFacts& p, const Snapshot* s, const BootConfig& boot) {
  const char* id = "modules.nouveau";
  auto it = p.modules.find("nouveau");
  const bool loaded = it != p.modules.end() && it->second.loaded;
  if (loaded) {
    return makeCheck(id, CheckStatus::kFail,
                     "nouveau is loaded: it claims NVIDIA GPUs before nvidia or vfio-pci",
                     nouveauBlacklistRemedy());
  }
  // A nouveau built into the kernel is not in /proc/modules, but the devices it drives say so.
  if (s) {
    std::vector<std::string> bound;
    for (const auto& f : s->pci) {
      if (f.driver == "nouveau") bound.push_back(f.bdf.str());
    }
    if (!bound.empty()) {
      return makeCheck(
          id, CheckStatus::kFail, "nouveau (built in) drives " + join(bound, ", "),
          "add \"modprobe.blacklist=nouveau nouveau.modeset=0\" to GRUB_CMDLINE_LINUX in "
          "/etc/default/grub, then run update-grub (or grub2-mkconfig -o /boot/grub2/grub.cfg) and "
          "reboot; better, use a kernel with CONFIG_DRM_NOUVEAU=m");
    }
  }
  const bool available = it != p.modules.end() && it->second.available();
  if (boot.blacklisted("nouveau"))
    return makeCheck(id, CheckStatus::kPass, "not loaded; blacklisted in modprobe.d");
  return makeCheck(id, CheckStatus::kPass,
                   available ? "not loaded (installed, not blacklisted)" : "not loaded");
}

CheckResult checkLockdown(const PlatformFacts& p, Mode mode, const std::string& hostDriver) {
  const char* id = "kernel.lockdown";
  if (mode == Mode::kVmPassthrough)
    return skipForMode(id, mode, "vfio-pci is an in-tree, signed module");
  const std::string mod =
      mode == Mode::kVmVgpu ? "nvidia_vgpu_vfio" : normalizeModuleName(hostDriver);
  auto it = p.modules.find(mod);
  const bool loaded = it != p.modules.end() && it->second.loaded;
  std::vector<std::string> why;
  if (p.lockdown && *p.lockdown != "none") why.push_back("kernel lockdown is " + *p.lockdown);
  if (p.secureBoot == true) why.push_back("Secure Boot is enabled");
  if (p.kernelConfig) {
    if (p.kernelConfig->is("CONFIG_MODULE_SIG_FORCE", "y"))
      why.push_back("the kernel enforces module signatures");
  }
  if (why.empty()) {
    return makeCheck(id, CheckStatus::kPass,
                     p.lockdown ? "lockdown is none; unsigned modules can load"
                                : "no lockdown; unsigned modules can load");
  }
  if (loaded)
    return makeCheck(id, CheckStatus::kPass,
                     join(why, ", ") + ", but " + mod + " is loaded (signed)");
  return makeCheck(
      id, CheckStatus::kWarn, join(why, ", ") + ": an unsigned " + mod + " module will be refused",
      "sign the NVIDIA modules with a key enrolled in MOK (DKMS: mokutil --import "
      "/var/lib/dkms/mok.pub, reboot and enroll), or disable Secure Boot in the firmware setup");
}

std::string nouveauBlacklistRemedy() {
  return "add the lines \"blacklist nouveau\" and \"options nouveau modeset=0\" to "
         "/etc/modprobe.d/blacklist-nouveau.conf, run update-initramfs -u (or dracut -f), and "
         "reboot";
}

}  // namespace hostprep
