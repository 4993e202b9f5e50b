#include "checks/preflight_iommu.hpp"

#include "checks/preflight_cmdline.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

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

// Whose off switch counts: intel_iommu=off does nothing on an AMD host, amd_iommu=off nothing on
// an Intel one; iommu=off stops both.
IommuVendor iommuVendor(const PlatformFacts& p) {
  if (intelPlatform(p)) return IommuVendor::kIntel;
  if (amdPlatform(p)) return IommuVendor::kAmd;
  return IommuVendor::kAny;
}

}  // namespace

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
  if (auto off = iommuOffArg(running, iommuVendor(p))) {
    return makeCheck(id, CheckStatus::kFail, detail + "; the kernel was booted with " + *off,
                     removeKernelArgRemedy(*off, boot));
  }
  const bool firmware =
      p.acpiTables &&
      (p.acpiTables->count("DMAR") || p.acpiTables->count("IVRS") || p.acpiTables->count("IORT"));
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
  if (p.cpu.arm64) {
    return makeCheck(id, CheckStatus::kFail, detail,
                     "check dmesg for arm-smmu-v3 errors; the kernel needs CONFIG_ARM_SMMU_V3 and "
                     "the SMMU enabled in the firmware");
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
  if (auto off = iommuOffArg(running, iommuVendor(p))) {
    return makeCheck(id, CheckStatus::kFail, "the kernel command line has " + *off,
                     removeKernelArgRemedy(*off, boot));
  }
  for (const auto& v : configuredCmdlines(boot)) {
    if (auto off = iommuOffArg(v.args, iommuVendor(p))) {
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
    if (p.kernelConfig->is("CONFIG_INTEL_IOMMU_DEFAULT_ON", "y")) {
      return makeCheck(id, CheckStatus::kPass,
                       "CONFIG_INTEL_IOMMU_DEFAULT_ON=y in " + p.kernelConfigSource +
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

CheckResult checkIommuPt(const PlatformFacts& p, const Cmdline& running, const BootConfig& boot,
                         Mode mode) {
  const char* id = "cmdline.iommu-pt";
  if (!vmMode(mode)) return skipForMode(id, mode);
  const std::string arg = p.cpu.arm64 ? "iommu.passthrough=1" : "iommu=pt";
  if (iommuPassthrough(running, p.cpu.arm64)) {
    auto v = cmdlineValue(running, "iommu.passthrough");
    return makeCheck(id, CheckStatus::kPass,
                     v && paramTruthy(*v) ? "iommu.passthrough=" + *v : std::string("iommu=pt"));
  }
  return makeCheck(id, CheckStatus::kWarn,
                   arg + " is not set: host devices go through IOMMU translation (slower host I/O)",
                   addKernelArgsRemedy(arg, boot));
}

namespace {

bool unsafeInterruptsAllowed(const PlatformFacts& p, const Cmdline& running,
                             const BootConfig& boot) {
  if (p.allowUnsafeInterrupts && paramTruthy(*p.allowUnsafeInterrupts)) return true;
  if (auto v = cmdlineValue(running, "vfio_iommu_type1.allow_unsafe_interrupts");
      v && paramTruthy(*v))
    return true;
  for (const auto& v : boot.optionValues("vfio_iommu_type1", "allow_unsafe_interrupts")) {
    if (paramTruthy(v)) return true;
  }
  return false;
}

const char* kUnsafeInterruptsLine = "options vfio_iommu_type1 allow_unsafe_interrupts=1";

// The verdict when MSIs are not isolated: vfio refuses the group (FAIL), unless
// allow_unsafe_interrupts lets VMs start anyway (WARN). `remedy` fixes the host; the FAIL adds the
// insecure way out.
CheckResult notIsolated(const char* id, const std::string& detail, std::string remedy,
                        bool unsafe) {
  if (unsafe) {
    return makeCheck(id, CheckStatus::kWarn,
                     detail +
                         "; vfio_iommu_type1 allow_unsafe_interrupts=1 lets VMs start anyway (a "
                         "guest can forge interrupts)",
                     std::move(remedy));
  }
  remedy += "; only if the hardware cannot: add the line \"" + std::string(kUnsafeInterruptsLine) +
            "\" to /etc/modprobe.d/vfio.conf (insecure: a guest can forge MSIs)";
  return makeCheck(id, CheckStatus::kFail, detail + ": vfio refuses to attach devices (EPERM)",
                   std::move(remedy));
}

// Arm has no interrupt remapping; what vfio asks for is MSI isolation (vfio_iommu_type1 refuses a
// group with EPERM without it), and a GICv3 ITS gives it: its MSI domains carry
// IRQ_DOMAIN_FLAG_ISOLATED_MSI (drivers/irqchip/irq-gic-v3-its.c), a GICv2m frame's do not.
// /proc/interrupts names the chip: ITS-MSI, ITS-PCI-MSI, ITS-PCI-MSIX-<device>.
CheckResult armMsiIsolation(const PlatformFacts& p, bool unsafe, const char* id) {
  if (!p.interrupts || p.interrupts->lines == 0) {
    return makeCheck(id, CheckStatus::kWarn,
                     "cannot tell: no /proc/interrupts lines (arm64: MSIs must go through a GIC "
                     "ITS)",
                     "mount procfs, or check dmesg for the GICv3 ITS (\"ITS@\")");
  }
  const auto& irq = *p.interrupts;
  if (irq.its > 0) {
    return makeCheck(id, CheckStatus::kPass,
                     std::to_string(irq.its) + " of " + std::to_string(irq.lines) +
                         " interrupts in /proc/interrupts are MSIs through the GIC ITS (ITS-), "
                         "which isolates them (arm64 has no interrupt remapping)");
  }
  const std::string detail =
      "no interrupt in /proc/interrupts goes through a GIC ITS (ITS-): MSIs are not isolated "
      "(arm64 has no interrupt remapping; a GICv2m frame does not isolate)";
  return notIsolated(id, detail,
                     "enable the GICv3 ITS in the firmware (the ACPI MADT's ITS entries), or use a "
                     "platform that has one",
                     unsafe);
}

}  // namespace

CheckResult checkInterruptRemapping(const PlatformFacts& p, const Cmdline& running,
                                    const BootConfig& boot, Mode mode) {
  const char* id = "iommu.interrupt-remapping";
  if (!vmMode(mode)) return skipForMode(id, mode);
  const bool unsafe = unsafeInterruptsAllowed(p, running, boot);
  if (p.cpu.arm64) return armMsiIsolation(p, unsafe, id);
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
  const auto intremapOff = intremapOffArg(running);

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
    detail += "; the kernel was booted with " + *intremapOff;
  else if (hwYes)
    detail += "; the hardware supports it (ecap IR) but the kernel has not enabled it";
  else if (hwNo)
    detail += "; the IOMMU does not support it (ecap IR bit clear)";
  return notIsolated(id, detail,
                     intremapOff ? removeKernelArgRemedy(*intremapOff, boot)
                                 : "enable Interrupt Remapping (and x2APIC) in the BIOS/UEFI "
                                   "setup, usually beside VT-d, then reboot",
                     unsafe);
}

}  // namespace hostprep
