#include "checks/preflight.hpp"

#include <algorithm>
#include <set>

#include "drivers/text.hpp"

namespace hostprep {
namespace {

struct CheckInfo {
  std::string_view id;
  std::string_view title;
};

// Every check, in report order, with its title. Ids are part of the JSON contract.
constexpr CheckInfo kChecks[] = {
    {"image.kernels", "Installed kernels"},
    {"cpu.virtualization", "CPU virtualization (VT-x/AMD-V)"},
    {"cpu.kvm", "KVM"},
    {"iommu.firmware", "IOMMU in firmware (VT-d/AMD-Vi)"},
    {"iommu.kernel", "IOMMU enabled by the kernel"},
    {"cmdline.iommu", "IOMMU kernel argument"},
    {"cmdline.iommu-pt", "IOMMU passthrough (iommu=pt)"},
    {"iommu.interrupt-remapping", "Interrupt remapping"},
    {"modules.vfio", "VFIO modules"},
    {"modules.vgpu", "vGPU manager modules"},
    {"modules.host-driver", "Host driver module"},
    {"modules.nouveau", "nouveau"},
    {"gpu.present", "GPUs present"},
    {"iommu.groups", "IOMMU group isolation"},
    {"gpu.sriov", "SR-IOV for vGPU"},
    {"gpu.boot-vga", "Boot VGA framebuffer"},
    {"boot.persistence", "Mode survives a reboot"},
    {"kernel.lockdown", "Lockdown / Secure Boot"},
};

std::string_view titleOf(std::string_view id) {
  for (const auto& c : kChecks) {
    if (c.id == id) return c.title;
  }
  return id;
}

bool vmMode(Mode m) { return m != Mode::kContainer; }

std::string idList(const std::vector<PciId>& ids) {
  std::vector<std::string> s;
  for (const auto& id : ids) s.push_back(toString(id));
  return join(s, ",");
}

bool truthy(std::string_view v) { return v == "1" || v == "Y" || v == "y" || v == "on"; }

// ---------------------------------------------------------------------------------------------
// CPU and KVM

CheckResult checkCpu(const PlatformFacts& p, Mode mode) {
  const char* id = "cpu.virtualization";
  if (!vmMode(mode)) return skipForMode(id, mode);
  const auto& c = p.cpu;
  if (!c.known) {
    return makeCheck(id, CheckStatus::kWarn, "cannot read /proc/cpuinfo",
                     "mount procfs on /proc (or point --root at a host root that has it)");
  }
  std::string vendor = c.vendorId.empty() ? "unknown vendor" : c.vendorId;
  if (c.vmx) return makeCheck(id, CheckStatus::kPass, "vmx (Intel VT-x) present, " + vendor);
  if (c.svm) return makeCheck(id, CheckStatus::kPass, "svm (AMD-V) present, " + vendor);
  std::string detail = "neither vmx nor svm in /proc/cpuinfo flags (" + vendor + ")";
  std::string remedy =
      c.vendor == CpuVendor::kAmd
          ? "enable SVM Mode (AMD-V) in the BIOS/UEFI setup, then reboot"
          : "enable Intel Virtualization Technology (VT-x) in the BIOS/UEFI setup, then reboot";
  if (c.hypervisor) {
    detail += "; this is a virtual machine";
    remedy =
        "enable nested virtualization on the hypervisor (e.g. kvm_intel nested=1 and "
        "-cpu host in QEMU), or run on bare metal";
  }
  return makeCheck(id, CheckStatus::kFail, detail, remedy);
}

CheckResult checkKvm(const PlatformFacts& p, Mode mode) {
  const char* id = "cpu.kvm";
  if (!vmMode(mode)) return skipForMode(id, mode);
  std::string kvmMod = p.cpu.vendor == CpuVendor::kAmd ? "kvm_amd" : "kvm_intel";
  if (p.cpu.vendor != CpuVendor::kAmd && p.cpu.vendor != CpuVendor::kIntel && p.cpu.svm)
    kvmMod = "kvm_amd";
  auto it = p.modules.find(kvmMod);
  bool loaded = it != p.modules.end() && (it->second.loaded || it->second.sysModule);
  if (p.devKvm) {
    return makeCheck(id, CheckStatus::kPass,
                     "/dev/kvm present" + std::string(loaded ? " (" + kvmMod + " loaded)" : ""));
  }
  bool available = it != p.modules.end() && it->second.available();
  if (available) {
    return makeCheck(id, CheckStatus::kFail,
                     "/dev/kvm missing; " + kvmMod + " is installed but not loaded",
                     "run 'modprobe " + kvmMod + "' and add the line \"" + kvmMod +
                         "\" to /etc/modules-load.d/kvm.conf so it loads at boot");
  }
  return makeCheck(
      id, CheckStatus::kFail,
      "/dev/kvm missing and " + kvmMod + " is not available for kernel " +
          (p.kernelRelease.empty() ? "(unknown)" : p.kernelRelease),
      "install the kernel's KVM modules (CONFIG_KVM, CONFIG_KVM_INTEL/CONFIG_KVM_AMD) and "
      "enable VT-x/AMD-V in the BIOS/UEFI setup");
}

// ---------------------------------------------------------------------------------------------
// IOMMU

// Which IOMMU driver the kernel will use follows the firmware's ACPI table (DMAR: intel-iommu,
// intel_iommu=; IVRS: amd-iommu, amd_iommu=), not the CPU: QEMU's emulated VT-d on an AMD CPU
// model is Intel's. The CPU vendor decides only when the tables are unreadable or absent.
bool intelPlatform(const PlatformFacts& p) {
  if (p.acpiTables && p.acpiTables->count("DMAR")) return true;
  if (p.acpiTables && p.acpiTables->count("IVRS")) return false;
  return p.cpu.vendor == CpuVendor::kIntel;
}
bool amdPlatform(const PlatformFacts& p) {
  if (p.acpiTables && p.acpiTables->count("IVRS")) return true;
  if (p.acpiTables && p.acpiTables->count("DMAR")) return false;
  return p.cpu.vendor == CpuVendor::kAmd;
}

CheckResult checkIommuFirmware(const PlatformFacts& p, const Snapshot* s, Mode mode) {
  const char* id = "iommu.firmware";
  if (!vmMode(mode)) return skipForMode(id, mode);
  const bool groups = s && !s->iommuGroups.empty();
  if (!p.acpiTables) {
    if (groups)
      return makeCheck(id, CheckStatus::kPass,
                       "no ACPI tables in sysfs, but the kernel has IOMMU groups");
    return makeCheck(
        id, CheckStatus::kWarn,
        "cannot read /sys/firmware/acpi/tables (no ACPI, or sysfs not mounted)",
        "mount sysfs on /sys; on a non-ACPI platform check the device tree for an IOMMU");
  }
  const auto& t = *p.acpiTables;
  if (t.count("DMAR"))
    return makeCheck(id, CheckStatus::kPass, "ACPI DMAR table present (Intel VT-d)");
  if (t.count("IVRS")) return makeCheck(id, CheckStatus::kPass, "ACPI IVRS table present (AMD-Vi)");
  if (t.count("IORT"))
    return makeCheck(id, CheckStatus::kPass, "ACPI IORT table present (Arm SMMU)");
  if (t.count("VIOT"))
    return makeCheck(id, CheckStatus::kPass, "ACPI VIOT table present (virtio-iommu)");
  std::string remedy = amdPlatform(p)
                           ? "enable IOMMU (AMD-Vi) in the BIOS/UEFI setup, then reboot"
                           : "enable VT-d (Intel Virtualization Technology for Directed I/O) "
                             "in the BIOS/UEFI setup, then reboot";
  if (p.cpu.hypervisor) {
    remedy +=
        amdPlatform(p)
            ? "; in a QEMU guest add -device amd-iommu,intremap=on (q35)"
            : "; in a QEMU guest add -device intel-iommu,intremap=on (q35, kernel-irqchip=split)";
  }
  return makeCheck(id, CheckStatus::kFail,
                   "no DMAR or IVRS table under /sys/firmware/acpi/tables: the firmware "
                   "does not expose an IOMMU",
                   remedy);
}

CheckResult checkIommuKernel(const PlatformFacts& p, const Snapshot* s, const Cmdline& running,
                             const BootConfig& boot, Mode mode) {
  const char* id = "iommu.kernel";
  if (!vmMode(mode)) return skipForMode(id, mode);
  if (!s)
    return makeCheck(id, CheckStatus::kFail, "cannot read the PCI devices and IOMMU groups",
                     "mount sysfs on /sys");
  std::vector<std::string> units;
  if (p.iommuUnits) {
    for (const auto& u : *p.iommuUnits) units.push_back(u.name);
  }
  if (!s->iommuGroups.empty()) {
    std::string d = std::to_string(s->iommuGroups.size()) + " IOMMU groups";
    if (!units.empty()) d += ", units " + join(units, ", ");
    return makeCheck(id, CheckStatus::kPass, d);
  }
  std::string detail = "/sys/kernel/iommu_groups is empty";
  if (units.empty()) detail += " and /sys/class/iommu has no units";
  if (auto off = iommuOffArg(running)) {
    return makeCheck(id, CheckStatus::kFail, detail + "; the kernel was booted with " + *off,
                     removeKernelArgRemedy(*off, boot));
  }
  const bool firmware =
      p.acpiTables && (p.acpiTables->count("DMAR") || p.acpiTables->count("IVRS"));
  if (p.acpiTables && !firmware) {
    return makeCheck(id, CheckStatus::kFail,
                     detail + "; the firmware has no IOMMU table (see iommu.firmware)",
                     "enable VT-d / AMD-Vi (IOMMU) in the BIOS/UEFI setup, then reboot");
  }
  if (intelPlatform(p) && !intelIommuOn(running)) {
    std::string args = iommuPassthrough(running) ? "intel_iommu=on" : "intel_iommu=on iommu=pt";
    return makeCheck(id, CheckStatus::kFail,
                     detail + "; intel_iommu=on is not on the kernel command line",
                     addKernelArgsRemedy(args, boot));
  }
  return makeCheck(
      id, CheckStatus::kFail, detail,
      "check dmesg for DMAR/AMD-Vi errors; enable VT-d / AMD-Vi in the BIOS/UEFI setup and reboot");
}

// The running kernel's IOMMU argument, and whether the next boot keeps it.
CheckResult checkCmdlineIommu(const PlatformFacts& p, const Snapshot* s, const Cmdline& running,
                              const BootConfig& boot, Mode mode) {
  const char* id = "cmdline.iommu";
  if (!vmMode(mode)) return skipForMode(id, mode);
  if (auto off = iommuOffArg(running)) {
    return makeCheck(id, CheckStatus::kFail, "the kernel command line has " + *off,
                     removeKernelArgRemedy(*off, boot));
  }
  for (const auto& v : configuredCmdlines(boot)) {
    if (auto off = iommuOffArg(v.args)) {
      return makeCheck(id, CheckStatus::kFail,
                       v.origin + " has " + *off + ": the next boot disables the IOMMU",
                       removeKernelArgRemedy(*off, boot));
    }
  }
  const bool groups = s && !s->iommuGroups.empty();
  if (amdPlatform(p)) {
    return makeCheck(id, CheckStatus::kPass,
                     "AMD: the kernel enables AMD-Vi by default (no amd_iommu=off)");
  }
  if (!intelPlatform(p)) {
    if (groups)
      return makeCheck(id, CheckStatus::kPass, "the IOMMU is active; no IOMMU argument needed");
    return makeCheck(id, CheckStatus::kWarn, "CPU vendor unknown and no IOMMU groups",
                     "on Intel: " + addKernelArgsRemedy("intel_iommu=on iommu=pt", boot));
  }
  const std::string pt = iommuPassthrough(running) ? "" : " iommu=pt";
  if (intelIommuOn(running)) {
    // On now; does the boot configuration keep it?
    auto views = configuredCmdlines(boot);
    std::vector<std::string> lacking;
    for (const auto& v : views) {
      if (!intelIommuOn(v.args)) lacking.push_back(v.origin);
    }
    if (!views.empty() && lacking.size() == views.size()) {
      return makeCheck(id, CheckStatus::kWarn,
                       "intel_iommu=on is on the running kernel's command line but not in " +
                           join(lacking, ", ") + ": the next boot loses it",
                       addKernelArgsRemedy("intel_iommu=on" + pt, boot));
    }
    return makeCheck(id, CheckStatus::kPass, "intel_iommu=on");
  }
  if (p.kernelConfig) {
    auto it = p.kernelConfig->find("CONFIG_INTEL_IOMMU_DEFAULT_ON");
    if (it != p.kernelConfig->end() && it->second == "y") {
      return makeCheck(id, CheckStatus::kPass,
                       "CONFIG_INTEL_IOMMU_DEFAULT_ON=y in boot/config-" + p.kernelRelease +
                           ": on without an argument");
    }
  }
  if (groups) {
    return makeCheck(id, CheckStatus::kPass,
                     "no intel_iommu=on, but the kernel enabled the IOMMU by default");
  }
  return makeCheck(id, CheckStatus::kFail,
                   "Intel host without intel_iommu=on on the kernel command line",
                   addKernelArgsRemedy("intel_iommu=on" + pt, boot));
}

CheckResult checkIommuPt(const Cmdline& running, const BootConfig& boot, Mode mode) {
  const char* id = "cmdline.iommu-pt";
  if (!vmMode(mode)) return skipForMode(id, mode);
  if (iommuPassthrough(running)) return makeCheck(id, CheckStatus::kPass, "iommu=pt");
  return makeCheck(
      id, CheckStatus::kWarn,
      "iommu=pt is not set: host devices go through IOMMU translation (slower host I/O)",
      addKernelArgsRemedy("iommu=pt", boot));
}

bool unsafeInterruptsAllowed(const PlatformFacts& p, const Cmdline& running,
                             const BootConfig& boot) {
  if (p.allowUnsafeInterrupts && truthy(*p.allowUnsafeInterrupts)) return true;
  if (auto v = cmdlineValue(running, "vfio_iommu_type1.allow_unsafe_interrupts"); v && truthy(*v))
    return true;
  for (const auto& v : boot.optionValues("vfio_iommu_type1", "allow_unsafe_interrupts")) {
    if (truthy(v)) return true;
  }
  return false;
}

const char* kUnsafeInterruptsLine = "options vfio_iommu_type1 allow_unsafe_interrupts=1";

CheckResult checkInterruptRemapping(const PlatformFacts& p, const Cmdline& running,
                                    const BootConfig& boot, Mode mode) {
  const char* id = "iommu.interrupt-remapping";
  if (!vmMode(mode)) return skipForMode(id, mode);
  const bool unsafe = unsafeInterruptsAllowed(p, running, boot);
  bool hwYes = false, hwNo = false;
  if (p.iommuUnits) {
    size_t known = 0, no = 0;
    for (const auto& u : *p.iommuUnits) {
      if (!u.interruptRemapping) continue;
      ++known;
      if (*u.interruptRemapping)
        hwYes = true;
      else
        ++no;
    }
    hwNo = known > 0 && no == known;
  }
  auto intremap = cmdlineValue(running, "intremap");
  const bool intremapOff = intremap && (*intremap == "off" || *intremap == "no");

  std::string detail;
  bool enabled = false;
  bool known = false;
  if (p.interrupts && p.interrupts->lines > 0) {
    known = true;
    enabled = p.interrupts->remapped > 0;
    detail = std::to_string(p.interrupts->remapped) + " of " + std::to_string(p.interrupts->lines) +
             " interrupts in /proc/interrupts are remapped (IR-)";
  } else if (hwYes || hwNo) {
    known = true;
    enabled = hwYes && !intremapOff;
    detail = hwYes ? "the DMAR units support interrupt remapping (ecap IR bit)"
                   : "no DMAR unit supports interrupt remapping (ecap IR bit clear)";
  }
  if (!known) {
    if (unsafe) {
      return makeCheck(id, CheckStatus::kWarn,
                       "cannot tell; allow_unsafe_interrupts=1 is set (insecure)",
                       "enable Interrupt Remapping in the BIOS/UEFI setup and drop \"" +
                           std::string(kUnsafeInterruptsLine) + "\"");
    }
    return makeCheck(
        id, CheckStatus::kWarn,
        "cannot tell: no /proc/interrupts lines and no intel-iommu ecap under /sys/class/iommu",
        "mount procfs and sysfs, or check dmesg for \"Enabled IRQ remapping\"");
  }
  if (enabled) return makeCheck(id, CheckStatus::kPass, detail);
  if (intremapOff)
    detail += "; the kernel was booted with intremap=" + *intremap;
  else if (hwYes)
    detail += "; the hardware supports it (ecap IR) but the kernel has not enabled it";
  else if (hwNo)
    detail += "; the IOMMU does not support it (ecap IR bit clear)";
  std::string remedy =
      intremapOff ? removeKernelArgRemedy("intremap=" + *intremap, boot)
                  : "enable Interrupt Remapping (and x2APIC) in the BIOS/UEFI setup, usually "
                    "beside VT-d, then reboot";
  if (unsafe) {
    return makeCheck(
        id, CheckStatus::kWarn,
        detail +
            "; vfio_iommu_type1 allow_unsafe_interrupts=1 lets VMs start anyway (a guest can "
            "forge interrupts)",
        remedy);
  }
  remedy += "; only if the hardware cannot: add the line \"" + std::string(kUnsafeInterruptsLine) +
            "\" to /etc/modprobe.d/vfio.conf (insecure: a guest can forge MSIs)";
  return makeCheck(id, CheckStatus::kFail, detail + ": vfio refuses to attach devices (EPERM)",
                   remedy);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Modules

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

CheckResult checkHostDriver(const std::map<std::string, ModuleFacts>& mods,
                            const std::string& driver, Mode mode) {
  const char* id = "modules.host-driver";
  if (mode == Mode::kVmPassthrough) return skipForMode(id, mode);
  const std::string m = normalizeModuleName(driver);
  auto it = mods.find(m);
  if (it != mods.end() && it->second.loaded)
    return makeCheck(id, CheckStatus::kPass, m + " loaded");
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

namespace {

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

// ---------------------------------------------------------------------------------------------
// GPUs

std::string noGpuDetail(const Snapshot& s, const SelectionOptions& opt) {
  std::string what = opt.gpuIds.empty() ? "NVIDIA GPU (vendor 10de, class 0300/0302)"
                                        : "device with --gpu-ids " + idList(opt.gpuIds);
  std::vector<std::string> found;
  for (const auto& f : s.pci) {
    if (baseClass(f.classCode) == 0x03 || f.id.vendor == kNvidiaVendor)
      found.push_back(describeFunction(s, f.bdf));
  }
  return "no " + what + " found; display/NVIDIA functions present: " +
         (found.empty() ? std::string("none") : join(found, ", ")) + " (" +
         std::to_string(s.pci.size()) + " PCI functions in all)";
}

CheckResult checkGpusPresent(const Snapshot* s, const std::string& snapErr, const Selection* sel,
                             const SelectionOptions& opt) {
  const char* id = "gpu.present";
  if (!s) {
    return makeCheck(
        id, CheckStatus::kFail, "cannot read PCI devices: " + snapErr,
        "mount sysfs on /sys, or point --root at a host root (use --image for an image)");
  }
  auto gpus = sel->gpus();
  if (gpus.empty()) {
    return makeCheck(id, CheckStatus::kFail, noGpuDetail(*s, opt),
                     "check 'lspci -nn'; for other devices pass --gpu-ids VVVV:DDDD");
  }
  std::vector<std::string> names;
  for (const auto& b : gpus) names.push_back(describeFunction(*s, b));
  size_t companions = sel->targets.size() - gpus.size();
  return makeCheck(
      id, CheckStatus::kPass,
      std::to_string(gpus.size()) + " GPU(s): " + join(names, ", ") +
          (companions ? "; " + std::to_string(companions) + " companion function(s)" : ""));
}

CheckResult checkGroups(const Snapshot* s, const Selection* sel, Mode mode) {
  const char* id = "iommu.groups";
  if (mode != Mode::kVmPassthrough) {
    return skipForMode(id, mode, mode == Mode::kVmVgpu ? "vGPU devices get their own groups" : "");
  }
  if (!s || !sel || sel->gpus().empty())
    return makeCheck(id, CheckStatus::kSkip, "no GPU selected (see gpu.present)");
  if (s->iommuGroups.empty())
    return makeCheck(id, CheckStatus::kSkip, "no IOMMU groups (see iommu.kernel)");
  if (!sel->problems.empty()) {
    std::vector<std::string> lines;
    bool rootDisk = false;
    for (const auto& p : sel->problems) {
      lines.push_back(p.describe(*s));
      rootDisk = rootDisk || p.holdsRootDisk;
    }
    std::string remedy =
        "move the GPU to a slot whose root port isolates it (ACS; a CPU-attached slot), so that "
        "its group holds only the GPU and its audio/USB functions";
    if (rootDisk)
      remedy += "; never give the root disk's group to a VM: the host would lose its disk";
    return makeCheck(id, CheckStatus::kFail, join(lines, "; "), remedy);
  }
  std::vector<std::string> ok;
  std::vector<std::string> nogroup;
  for (const auto& b : sel->gpus()) {
    const auto* f = s->find(b);
    if (!f || !f->iommuGroup) {
      nogroup.push_back(b.str());
      continue;
    }
    ok.push_back(b.str() + ": group " + std::to_string(*f->iommuGroup) + " (" +
                 std::to_string(s->groupMembers(*f->iommuGroup).size()) + " functions)");
  }
  if (!nogroup.empty()) {
    return makeCheck(id, CheckStatus::kFail, "no IOMMU group for " + join(nogroup, ", "),
                     "check dmesg for IOMMU errors on these devices; a device without a group "
                     "cannot be assigned");
  }
  return makeCheck(id, CheckStatus::kPass, join(ok, "; "));
}

// Ampere and newer (device ids 0x2000 and up: GA10x, GH100, AD10x, GB...) expose vGPUs through
// SR-IOV VFs; Turing and older use mdev on the PF.
bool expectsSriov(const PciFunction& f) {
  return f.id.vendor == kNvidiaVendor && f.id.device >= 0x2000;
}

CheckResult checkSriov(const Snapshot* s, const Selection* sel, Mode mode) {
  const char* id = "gpu.sriov";
  if (mode != Mode::kVmVgpu) return skipForMode(id, mode);
  if (!s || !sel || sel->gpus().empty())
    return makeCheck(id, CheckStatus::kSkip, "no GPU selected (see gpu.present)");
  std::vector<std::string> bad, ok;
  for (const auto& b : sel->gpus()) {
    const auto* f = s->find(b);
    if (!f) continue;
    if (f->sriovTotalVfs && *f->sriovTotalVfs > 0) {
      ok.push_back(b.str() + ": " + std::to_string(*f->sriovTotalVfs) + " VFs");
    } else if (expectsSriov(*f)) {
      bad.push_back(describeFunction(*s, b) +
                    (f->sriovTotalVfs ? ": sriov_totalvfs is 0" : ": no sriov_totalvfs"));
    } else {
      ok.push_back(b.str() + ": pre-Ampere, vGPU uses mdev on the PF");
    }
  }
  if (!bad.empty()) {
    return makeCheck(id, CheckStatus::kFail, "SR-IOV not available on " + join(bad, "; "),
                     "enable SR-IOV (and Above 4G Decoding) in the BIOS/UEFI setup, then reboot");
  }
  return makeCheck(id, CheckStatus::kPass, join(ok, "; "));
}

CheckResult checkBootVga(const PlatformFacts& p, const Snapshot* s, const Selection* sel,
                         const BootConfig& boot, Mode mode) {
  const char* id = "gpu.boot-vga";
  if (mode != Mode::kVmPassthrough) {
    return skipForMode(id, mode, "the host driver takes over the firmware framebuffer");
  }
  if (!s || !sel) return makeCheck(id, CheckStatus::kSkip, "no GPU selected (see gpu.present)");
  std::vector<Bdf> bootGpus;
  for (const auto& b : sel->gpus()) {
    const auto* f = s->find(b);
    if (f && f->bootVga == true) bootGpus.push_back(b);
  }
  if (bootGpus.empty())
    return makeCheck(id, CheckStatus::kPass, "no selected GPU is the boot VGA device");
  const std::string remedy = addKernelArgsRemedy("initcall_blacklist=sysfb_init", boot) +
                             " (kernels before 5.15: \"video=efifb:off video=vesafb:off\"), or "
                             "make another GPU the primary display "
                             "in the BIOS/UEFI setup";
  std::vector<std::string> held;
  for (const auto& b : bootGpus) {
    if (!p.framebuffers) {
      return makeCheck(
          id, CheckStatus::kWarn,
          b.str() +
              " is the boot VGA device and /proc/iomem is unreadable: a firmware framebuffer "
              "may hold its BAR (\"BAR 0: can't reserve\")",
          remedy);
    }
    for (const auto& fb : *p.framebuffers) {
      if (!fb.device || *fb.device == b) held.push_back(b.str() + " (" + fb.name + ")");
    }
  }
  if (held.empty()) {
    return makeCheck(id, CheckStatus::kPass,
                     "boot VGA GPU, but no firmware framebuffer (efifb/simpledrm/BOOTFB) holds it");
  }
  return makeCheck(id, CheckStatus::kWarn,
                   "a firmware framebuffer holds the boot VGA GPU " + join(held, ", ") +
                       ": vfio-pci cannot reserve its BAR (\"BAR 0: can't reserve\")",
                   remedy);
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
    auto f = p.kernelConfig->find("CONFIG_MODULE_SIG_FORCE");
    if (f != p.kernelConfig->end() && f->second == "y")
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared building blocks

std::string_view toString(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "PASS";
    case CheckStatus::kWarn:
      return "WARN";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kSkip:
      return "SKIP";
    case CheckStatus::kInfo:
      return "INFO";
  }
  return "SKIP";
}

std::string_view jsonStatus(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kSkip:
      return "skip";
    case CheckStatus::kInfo:
      return "info";
  }
  return "skip";
}

CheckResult makeCheck(std::string_view id, CheckStatus status, std::string detail,
                      std::string remedy) {
  return CheckResult{std::string(id), status, std::string(titleOf(id)), std::move(detail),
                     std::move(remedy)};
}

CheckResult skipForMode(std::string_view id, Mode mode, std::string_view why) {
  std::string d = "not needed in " + std::string(toString(mode)) + " mode";
  if (!why.empty()) d += ": " + std::string(why);
  return makeCheck(id, CheckStatus::kSkip, d);
}

PreflightSummary PreflightReport::summary() const {
  PreflightSummary s;
  for (const auto& c : checks) {
    switch (c.status) {
      case CheckStatus::kPass:
        ++s.pass;
        break;
      case CheckStatus::kWarn:
        ++s.warn;
        break;
      case CheckStatus::kFail:
        ++s.fail;
        break;
      case CheckStatus::kSkip:
        ++s.skip;
        break;
      case CheckStatus::kInfo:
        ++s.info;
        break;
    }
  }
  return s;
}

const CheckResult* PreflightReport::find(std::string_view id) const {
  for (const auto& c : checks) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

Mode preflightMode(std::optional<Mode> flag, std::optional<Mode> configured) {
  if (flag) return *flag;
  if (configured) return *configured;
  return Mode::kVmPassthrough;
}

std::vector<std::string> preflightModules(const std::string& hostDriver) {
  std::vector<std::string> m{"vfio",    "vfio_pci", "vfio_iommu_type1", "nvidia_vgpu_vfio",
                             "nouveau", "kvm",      "kvm_intel",        "kvm_amd"};
  const std::string h = normalizeModuleName(hostDriver);
  if (std::find(m.begin(), m.end(), h) == m.end()) m.push_back(h);
  return m;
}

std::vector<CmdlineView> configuredCmdlines(const BootConfig& boot) {
  std::vector<CmdlineView> out;
  for (const auto& c : boot.cmdlines) out.push_back({c.origin, c.args});
  return out;
}

namespace {
bool hasSource(const BootConfig& boot, std::string_view prefix) {
  return std::any_of(boot.cmdlines.begin(), boot.cmdlines.end(),
                     [&](const CmdlineSource& c) { return startsWith(c.origin, prefix); });
}
bool hasLoaderEntries(const BootConfig& boot) {
  return std::any_of(boot.cmdlines.begin(), boot.cmdlines.end(), [](const CmdlineSource& c) {
    return c.origin.find("loader/entries/") != std::string::npos;
  });
}
}  // namespace

std::string addKernelArgsRemedy(std::string_view args, const BootConfig& boot) {
  const std::string a(args);
  const std::string grub = "add \"" + a +
                           "\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run update-grub "
                           "(or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot";
  const std::string kernelInstall = "add \"" + a +
                                    "\" to /etc/kernel/cmdline, then run 'kernel-install add "
                                    "$(uname -r) /boot/vmlinuz-$(uname -r)' (Proxmox: "
                                    "proxmox-boot-tool refresh) and reboot";
  const std::string bls = "run grubby --update-kernel=ALL --args=\"" + a + "\" and reboot";
  const bool g = hasSource(boot, "etc/default/grub");
  const bool k = hasSource(boot, "etc/kernel/cmdline");
  const bool b = hasLoaderEntries(boot);
  std::vector<std::string> parts;
  if (g || (!k && !b)) parts.push_back(grub);
  if (k) parts.push_back(kernelInstall);
  if (b && g) {
    parts.push_back("on Boot Loader Specification entries (boot/loader/entries) also " + bls);
  } else if (b && !k) {
    parts.push_back(bls);
  }
  if (parts.size() == 1) return parts[0];
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += "; " + parts[i];
  return out;
}

std::string removeKernelArgRemedy(std::string_view arg, const BootConfig& boot) {
  const std::string a(arg);
  std::vector<std::string> where;
  for (const auto& c : boot.cmdlines) {
    auto eq = a.find('=');
    const std::string key = a.substr(0, eq);
    if (cmdlineHas(c.args, key)) where.push_back(c.origin);
  }
  std::string in = where.empty()
                       ? "the boot loader configuration (GRUB_CMDLINE_LINUX in /etc/default/grub)"
                       : join(where, ", ");
  return "remove \"" + a + "\" from " + in +
         ", regenerate the boot configuration (update-grub, or grub2-mkconfig -o "
         "/boot/grub2/grub.cfg, or "
         "grubby --update-kernel=ALL --remove-args=\"" +
         a + "\") and reboot";
}

std::optional<std::string> iommuOffArg(const Cmdline& c) {
  if (auto v = cmdlineValue(c, "intel_iommu")) {
    for (auto part : split(*v, ',')) {
      if (trim(part) == "off") return "intel_iommu=" + *v;
    }
  }
  if (auto v = cmdlineValue(c, "amd_iommu"); v && *v == "off") return "amd_iommu=off";
  if (auto v = cmdlineValue(c, "iommu"); v && *v == "off") return "iommu=off";
  return std::nullopt;
}

bool intelIommuOn(const Cmdline& c) {
  auto v = cmdlineValue(c, "intel_iommu");
  if (!v) return false;
  bool on = false;
  for (auto part : split(*v, ',')) {
    auto p = trim(part);
    if (p == "on") on = true;
    if (p == "off") return false;
  }
  return on;
}

bool iommuPassthrough(const Cmdline& c) {
  if (auto v = cmdlineValue(c, "iommu"); v && *v == "pt") return true;
  if (auto v = cmdlineValue(c, "iommu.passthrough"); v && truthy(*v)) return true;
  return false;
}

std::string nouveauBlacklistRemedy() {
  return "add the lines \"blacklist nouveau\" and \"options nouveau modeset=0\" to "
         "/etc/modprobe.d/blacklist-nouveau.conf, run update-initramfs -u (or dracut -f), and "
         "reboot";
}

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

// ---------------------------------------------------------------------------------------------
// The live host

Result<PreflightReport> preflightHost(const HostFacts& f, const PreflightRequest& req) {
  const PlatformFacts& p = f.platform;
  const Snapshot* s = f.snapshot;
  const Mode mode = req.mode;
  std::optional<Selection> sel;
  if (s) {
    auto r = selectDevices(*s, req.selection);
    if (!r) return r.error();
    sel = std::move(*r);
  }
  const Selection* selp = sel ? &*sel : nullptr;
  const Cmdline running = parseCmdline(f.cmdline);

  PreflightReport rep;
  rep.mode = mode;
  auto& c = rep.checks;
  c.push_back(checkCpu(p, mode));
  c.push_back(checkKvm(p, mode));
  c.push_back(checkIommuFirmware(p, s, mode));
  c.push_back(checkIommuKernel(p, s, running, f.boot, mode));
  c.push_back(checkCmdlineIommu(p, s, running, f.boot, mode));
  c.push_back(checkIommuPt(running, f.boot, mode));
  c.push_back(checkInterruptRemapping(p, running, f.boot, mode));
  c.push_back(checkVfioModules(p.modules, p.kernelRelease, mode));
  c.push_back(checkVgpuModules(p.modules, mode));
  c.push_back(checkHostDriver(p.modules, req.selection.hostDriver, mode));
  c.push_back(checkNouveauLoaded(p, s, f.boot));
  c.push_back(checkGpusPresent(s, f.snapshotError, selp, req.selection));
  c.push_back(checkGroups(s, selp, mode));
  c.push_back(checkSriov(s, selp, mode));
  c.push_back(checkBootVga(p, s, selp, f.boot, mode));

  std::vector<PciId> targets;
  if (s && selp) {
    for (const auto& t : selp->targets) {
      if (const auto* fn = s->find(t.bdf)) targets.push_back(fn->id);
    }
  }
  auto views = configuredCmdlines(f.boot);
  views.insert(views.begin(), CmdlineView{"running kernel (/proc/cmdline)", running});
  c.push_back(
      checkBootPersistence(mode, f.boot, views, targets, p.kernelConfig, req.selection.hostDriver));
  c.push_back(checkLockdown(p, mode, req.selection.hostDriver));
  return rep;
}

}  // namespace hostprep
