#include "checks/preflight_cpu.hpp"

namespace hostprep {

CheckResult checkCpu(const PlatformFacts& p, Mode mode) {
  const char* id = "cpu.virtualization";
  if (!vmMode(mode)) return skipForMode(id, mode);
  const auto& c = p.cpu;
  if (!c.known) {
    return makeCheck(id, CheckStatus::kWarn, "cannot read /proc/cpuinfo",
                     "mount procfs on /proc (or point --root at a host root that has it)");
  }
  std::string vendor = c.vendorId.empty() ? "unknown vendor" : c.vendorId;
  if (c.arm64) {
    // Arm has no CPU flag for it: KVM runs when the kernel was started at EL2 (the hypervisor
    // level), and then registers /dev/kvm; otherwise it logs "HYP mode not available"
    // (arch/arm64/kvm/arm.c) and there is no /dev/kvm.
    if (p.devKvm)
      return makeCheck(id, CheckStatus::kPass,
                       "arm64 (" + vendor + "): KVM is running, so the kernel started at EL2");
    return makeCheck(
        id, CheckStatus::kFail,
        "arm64 (" + vendor + "): no /dev/kvm: the kernel did not start at EL2 or has no KVM",
        c.hypervisor ? "run on bare metal, or on a hypervisor that offers nested "
                       "virtualization (EL2) to its guests"
                     : "boot the kernel at EL2 (the firmware hands over at EL2 on "
                       "servers; dmesg says \"HYP mode not available\" otherwise) "
                       "with CONFIG_KVM=y");
  }
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
  if (p.cpu.arm64) {
    // KVM is built into arm64 kernels (CONFIG_KVM is a bool there): there is no module to load.
    if (p.devKvm) return makeCheck(id, CheckStatus::kPass, "/dev/kvm present (KVM built in)");
    return makeCheck(id, CheckStatus::kFail, "/dev/kvm missing (see cpu.virtualization)",
                     "boot a kernel built with CONFIG_KVM=y at EL2");
  }
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

}  // namespace hostprep
