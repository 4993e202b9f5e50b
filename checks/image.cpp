#include "checks/image.hpp"

#include <algorithm>

#include "checks/preflight_cmdline.hpp"
#include "checks/preflight_modules.hpp"
#include "checks/preflight_persistence.hpp"
#include "checks/preflight_vfio_cdev.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

constexpr std::string_view kNeedsHardware =
    "needs the hardware: run 'hostprep preflight' on the node";

CheckResult hardwareSkip(std::string_view id, Mode mode, bool relevant) {
  if (!relevant) return skipForMode(id, mode);
  return makeCheck(id, CheckStatus::kSkip, std::string(kNeedsHardware));
}

std::string releases(const std::vector<ImageKernel>& ks) {
  std::vector<std::string> r;
  for (const auto& k : ks) r.push_back(k.release);
  return join(r, ", ");
}

bool configIs(const ImageKernel& k, std::string_view sym, std::string_view value) {
  if (!k.config) return false;
  return k.config->is(sym, value);
}

// An arm64 kernel: KVM is built in (no kvm_intel/kvm_amd), the IOMMU is an Arm SMMU, and the
// passthrough argument is iommu.passthrough=1 (iommu=pt is x86's, arch/x86/kernel/pci-dma.c).
bool arm64Kernel(const ImageKernel& k) { return configIs(k, "CONFIG_ARM64", "y"); }

// Can this kernel drive Intel VT-d, so that intel_iommu=on matters? Unknown (no config) counts as
// yes; AMD-only and arm64 kernels cannot, and enable their IOMMU without an argument.
bool mayDriveVtd(const ImageKernel& k) {
  return !k.config || configIs(k, "CONFIG_INTEL_IOMMU", "y");
}

CheckResult checkKernels(const std::vector<ImageKernel>& ks) {
  const char* id = "image.kernels";
  if (ks.empty()) {
    return makeCheck(
        id, CheckStatus::kFail, "no kernel installed: lib/modules has no release directory",
        "install the kernel package into the image (Debian: linux-image-amd64; RHEL: kernel-core), "
        "then run depmod");
  }
  std::vector<std::string> d;
  for (const auto& k : ks)
    d.push_back(k.release + (k.config ? ""
                                      : " (no boot/config-" + k.release + " or lib/modules/" +
                                            k.release + "/config)"));
  return makeCheck(id, CheckStatus::kInfo, join(d, ", "));
}

CheckResult checkKvmModules(const std::vector<ImageKernel>& ks, Mode mode) {
  const char* id = "cpu.kvm";
  if (mode == Mode::kContainer) return skipForMode(id, mode);
  if (ks.empty())
    return makeCheck(id, CheckStatus::kSkip, "no kernel installed (see image.kernels)");
  std::vector<std::string> bad;
  for (const auto& k : ks) {
    auto avail = [&](const char* m) {
      auto it = k.modules.find(m);
      return it != k.modules.end() && it->second.available();
    };
    const bool vendorModule = arm64Kernel(k) || avail("kvm_intel") || avail("kvm_amd");
    if (!avail("kvm") || !vendorModule) bad.push_back(k.release);
  }
  if (!bad.empty()) {
    return makeCheck(id, CheckStatus::kFail,
                     "kvm and kvm_intel/kvm_amd not available for kernel " + join(bad, ", "),
                     "install the kernel's KVM modules (CONFIG_KVM, CONFIG_KVM_INTEL, "
                     "CONFIG_KVM_AMD), then run depmod");
  }
  return makeCheck(id, CheckStatus::kPass,
                   "kvm modules available for " + releases(ks) + "; /dev/kvm needs the hardware");
}

CheckResult checkIommuBuilt(const std::vector<ImageKernel>& ks, Mode mode) {
  const char* id = "iommu.kernel";
  if (mode == Mode::kContainer) return skipForMode(id, mode);
  std::vector<std::string> bad, ok;
  for (const auto& k : ks) {
    if (!k.config) continue;
    if (configIs(k, "CONFIG_INTEL_IOMMU", "y") || configIs(k, "CONFIG_AMD_IOMMU", "y") ||
        configIs(k, "CONFIG_ARM_SMMU_V3", "y") || configIs(k, "CONFIG_ARM_SMMU", "y")) {
      ok.push_back(k.release);
    } else {
      bad.push_back(k.release);
    }
  }
  if (!bad.empty()) {
    return makeCheck(id, CheckStatus::kFail,
                     "kernel " + join(bad, ", ") +
                         " is built without an IOMMU driver (CONFIG_INTEL_IOMMU, CONFIG_AMD_IOMMU, "
                         "CONFIG_ARM_SMMU_V3)",
                     "install a kernel built with CONFIG_INTEL_IOMMU=y and CONFIG_AMD_IOMMU=y, or "
                     "CONFIG_ARM_SMMU_V3=y on arm64 (every distribution kernel is)");
  }
  if (ok.empty())
    return makeCheck(id, CheckStatus::kSkip,
                     std::string(kNeedsHardware) + " (no kernel config to read)");
  return makeCheck(
      id, CheckStatus::kPass,
      "kernel " + join(ok, ", ") + " built with IOMMU support; the groups need the hardware");
}

// Which configured command lines have an argument, and which lack it.
struct ArgSpread {
  std::vector<std::string> have, lack;
};
template <class Pred>
ArgSpread spread(const std::vector<CmdlineView>& views, Pred has) {
  ArgSpread s;
  for (const auto& v : views) (has(v.args) ? s.have : s.lack).push_back(v.origin);
  return s;
}

constexpr std::string_view kNoCmdline =
    "no kernel command line configured: none of etc/default/grub, etc/kernel/cmdline, "
    "boot/loader/entries/*.conf";

CheckResult checkImageCmdlineIommu(const std::vector<CmdlineView>& views,
                                   const std::vector<ImageKernel>& ks, const BootConfig& boot,
                                   Mode mode) {
  const char* id = "cmdline.iommu";
  if (mode == Mode::kContainer) return skipForMode(id, mode);
  for (const auto& v : views) {
    if (auto off = iommuOffArg(v.args)) {
      return makeCheck(id, CheckStatus::kFail, v.origin + " has " + *off,
                       removeKernelArgRemedy(*off, boot));
    }
  }
  if (!ks.empty() && std::none_of(ks.begin(), ks.end(), mayDriveVtd)) {
    return makeCheck(id, CheckStatus::kPass,
                     "no installed kernel drives Intel VT-d (CONFIG_INTEL_IOMMU not set in " +
                         releases(ks) +
                         "): AMD-Vi and the Arm SMMU are enabled without a kernel argument");
  }
  const bool defaultOn = !ks.empty() && std::all_of(ks.begin(), ks.end(), [](const ImageKernel& k) {
    return configIs(k, "CONFIG_INTEL_IOMMU_DEFAULT_ON", "y");
  });
  const bool allPt =
      !views.empty() && std::all_of(views.begin(), views.end(),
                                    [](const CmdlineView& v) { return iommuPassthrough(v.args); });
  const std::string args = allPt ? "intel_iommu=on" : "intel_iommu=on iommu=pt";
  if (views.empty()) {
    if (defaultOn)
      return makeCheck(id, CheckStatus::kPass,
                       "CONFIG_INTEL_IOMMU_DEFAULT_ON=y in every installed kernel");
    return makeCheck(id, CheckStatus::kFail, std::string(kNoCmdline),
                     addKernelArgsRemedy(args, boot));
  }
  auto s = spread(views, intelIommuOn);
  if (s.lack.empty())
    return makeCheck(id, CheckStatus::kPass, "intel_iommu=on in " + join(s.have, ", "));
  if (defaultOn) {
    return makeCheck(id, CheckStatus::kPass,
                     "CONFIG_INTEL_IOMMU_DEFAULT_ON=y in every installed kernel");
  }
  if (s.have.empty()) {
    return makeCheck(
        id, CheckStatus::kFail,
        "intel_iommu=on is in none of " + join(s.lack, ", ") +
            ": Intel nodes boot with the IOMMU off (harmless on AMD, which enables AMD-Vi itself)",
        addKernelArgsRemedy(args, boot));
  }
  return makeCheck(id, CheckStatus::kWarn,
                   "intel_iommu=on in " + join(s.have, ", ") + " but not in " + join(s.lack, ", "),
                   addKernelArgsRemedy("intel_iommu=on", boot));
}

CheckResult checkImageIommuPt(const std::vector<CmdlineView>& views,
                              const std::vector<ImageKernel>& ks, const BootConfig& boot,
                              Mode mode) {
  const char* id = "cmdline.iommu-pt";
  if (mode == Mode::kContainer) return skipForMode(id, mode);
  const bool arm64 = !ks.empty() && std::all_of(ks.begin(), ks.end(), arm64Kernel);
  const std::string arg = arm64 ? "iommu.passthrough=1" : "iommu=pt";
  if (views.empty())
    return makeCheck(id, CheckStatus::kWarn, std::string(kNoCmdline),
                     addKernelArgsRemedy(arg, boot));
  auto s = spread(views, [&](const Cmdline& c) { return iommuPassthrough(c, arm64); });
  if (s.lack.empty()) return makeCheck(id, CheckStatus::kPass, arg + " in " + join(s.have, ", "));
  return makeCheck(id, CheckStatus::kWarn, arg + " is not in " + join(s.lack, ", "),
                   addKernelArgsRemedy(arg, boot));
}

CheckResult checkImageInterruptRemapping(const std::vector<CmdlineView>& views,
                                         const BootConfig& boot, Mode mode) {
  const char* id = "iommu.interrupt-remapping";
  if (mode == Mode::kContainer) return skipForMode(id, mode);
  for (const auto& v : views) {
    if (auto ir = intremapOffArg(v.args)) {
      return makeCheck(id, CheckStatus::kFail,
                       v.origin + " has " + *ir + ": vfio refuses to attach devices",
                       removeKernelArgRemedy(*ir, boot));
    }
  }
  return hardwareSkip(id, mode, true);
}

// Runs a per-kernel module check over every installed kernel; the worst result wins.
template <class F>
CheckResult perKernel(std::string_view id, const std::vector<ImageKernel>& ks, F check) {
  if (ks.empty()) {
    CheckResult r = check(ImageKernel{});
    if (r.status == CheckStatus::kSkip) return r;  // not needed in this mode
    return makeCheck(id, CheckStatus::kFail, "no kernel installed (see image.kernels)",
                     "install the kernel package into the image, then run depmod");
  }
  std::optional<CheckResult> worst;
  auto rank = [](CheckStatus s) {
    switch (s) {
      case CheckStatus::kFail:
        return 4;
      case CheckStatus::kWarn:
        return 3;
      case CheckStatus::kPass:
        return 2;
      case CheckStatus::kInfo:
        return 1;
      case CheckStatus::kSkip:
        return 0;
    }
    return 0;
  };
  for (const auto& k : ks) {
    CheckResult r = check(k);
    if (!worst || rank(r.status) > rank(worst->status)) worst = r;
  }
  if (worst->status == CheckStatus::kPass && ks.size() > 1)
    worst->detail += " (every installed kernel)";
  return *worst;
}

CheckResult checkImageNouveau(const std::vector<ImageKernel>& ks, const BootConfig& boot) {
  const char* id = "modules.nouveau";
  if (boot.blacklisted("nouveau"))
    return makeCheck(id, CheckStatus::kPass, "blacklisted in modprobe.d");
  std::vector<std::string> with;
  for (const auto& k : ks) {
    auto it = k.modules.find("nouveau");
    if (it != k.modules.end() && it->second.available()) with.push_back(k.release);
  }
  if (with.empty()) return makeCheck(id, CheckStatus::kPass, "not installed");
  return makeCheck(id, CheckStatus::kWarn,
                   "nouveau is installed for " + join(with, ", ") +
                       " and not blacklisted: it loads at boot and claims the NVIDIA GPUs first",
                   nouveauBlacklistRemedy());
}

CheckResult checkImageLockdown(const std::vector<ImageKernel>& ks, Mode mode) {
  const char* id = "kernel.lockdown";
  if (mode == Mode::kVmPassthrough)
    return skipForMode(id, mode, "vfio-pci is an in-tree, signed module");
  std::vector<std::string> forced;
  for (const auto& k : ks) {
    if (configIs(k, "CONFIG_MODULE_SIG_FORCE", "y") ||
        configIs(k, "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY", "y") ||
        configIs(k, "CONFIG_LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY", "y")) {
      forced.push_back(k.release);
    }
  }
  if (!forced.empty()) {
    return makeCheck(
        id, CheckStatus::kWarn,
        "kernel " + join(forced, ", ") +
            " refuses unsigned modules: the NVIDIA modules must be signed",
        "sign the NVIDIA modules with a key the nodes enroll in MOK (DKMS: mokutil --import "
        "/var/lib/dkms/mok.pub), or use a kernel without CONFIG_MODULE_SIG_FORCE");
  }
  return makeCheck(id, CheckStatus::kSkip,
                   "depends on the node's Secure Boot state: " + std::string(kNeedsHardware));
}

}  // namespace

PreflightReport preflightImage(const ImageFacts& f, const PreflightRequest& req) {
  const Mode mode = req.mode;
  const bool vm = mode != Mode::kContainer;
  const auto views = configuredCmdlines(f.boot);
  const auto& ks = f.kernels;

  PreflightReport rep;
  rep.mode = mode;
  rep.image = true;
  auto& c = rep.checks;
  c.push_back(checkKernels(ks));
  c.push_back(hardwareSkip("cpu.virtualization", mode, vm));
  c.push_back(checkKvmModules(ks, mode));
  c.push_back(hardwareSkip("iommu.firmware", mode, vm));
  c.push_back(checkIommuBuilt(ks, mode));
  c.push_back(checkImageCmdlineIommu(views, ks, f.boot, mode));
  c.push_back(checkImageIommuPt(views, ks, f.boot, mode));
  c.push_back(checkImageInterruptRemapping(views, f.boot, mode));
  c.push_back(checkImageIommufd(ks, mode));
  c.push_back(perKernel("modules.vfio", ks, [&](const ImageKernel& k) {
    return checkVfioModules(k.modules, k.release, mode);
  }));
  c.push_back(perKernel("modules.vgpu", ks,
                        [&](const ImageKernel& k) { return checkVgpuModules(k.modules, mode); }));
  c.push_back(hardwareSkip("modules.vgpu-firmware", mode, mode == Mode::kVmVgpu));
  c.push_back(perKernel("modules.host-driver", ks, [&](const ImageKernel& k) {
    return checkHostDriver(k.modules, req.selection.hostDriver, mode,
                           req.selection.hostDriverProvider == DriverProvider::kOperator);
  }));
  c.push_back(checkImageNouveau(ks, f.boot));
  c.push_back(makeCheck("gpu.present", CheckStatus::kSkip, std::string(kNeedsHardware)));
  c.push_back(hardwareSkip("iommu.groups", mode, mode == Mode::kVmPassthrough));
  // The devices rules need PCI devices to match; an image checks its configured mode only.
  c.push_back(
      makeCheck("gpu.mode-mix", CheckStatus::kSkip,
                "an image has no PCI devices to resolve the config's devices rules against"));
  c.push_back(hardwareSkip("gpu.sriov", mode, mode == Mode::kVmVgpu));
  c.push_back(hardwareSkip("gpu.boot-vga", mode, mode == Mode::kVmPassthrough));
  c.push_back(hardwareSkip("gpu.bars", mode, mode == Mode::kVmPassthrough));
  c.push_back(hardwareSkip("gpu.reset", mode, vm));
  c.push_back(hardwareSkip("gpu.fabric", mode, true));
  c.push_back(req.cc == CcMode::kOff
                  ? makeCheck("gpu.cc", CheckStatus::kSkip,
                              "confidential computing not asked for (cc-mode off)")
                  : hardwareSkip("gpu.cc", mode, vm));
  c.push_back(makeCheck("gpu.owner", CheckStatus::kSkip,
                        "an image runs no GPU Operator agents: checked on the running node"));
  std::optional<KernelConfig> config;
  if (!ks.empty()) config = ks.back().config;
  c.push_back(checkBootPersistence(mode, f.boot, views, req.selection.gpuIds, config,
                                   req.selection.hostDriver));
  c.push_back(checkImageLockdown(ks, mode));
  return rep;
}

}  // namespace hostprep
