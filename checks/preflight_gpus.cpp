#include "checks/preflight_gpus.hpp"

#include <algorithm>
#include <cstdint>

#include "checks/preflight_cmdline.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

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

// Ampere and newer (device ids 0x2000 and up: GA10x, GH100, AD10x, GB...) expose vGPUs through
// SR-IOV VFs; Turing and older use mdev on the PF.
bool expectsSriov(const PciFunction& f) {
  return f.id.vendor == kNvidiaVendor && f.id.device >= 0x2000;
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

// "128 GiB", "32 MiB": BAR sizes are powers of two.
std::string sizeText(uint64_t bytes) {
  if (bytes >= kGiB && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  if (bytes >= kGiB) return std::to_string((bytes + kGiB - 1) / kGiB) + " GiB";
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

uint64_t roundUpPowerOfTwo(uint64_t v) {
  uint64_t p = 1;
  while (p < v && p < (uint64_t{1} << 62)) p <<= 1;
  return p;
}

}  // namespace

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

CheckResult checkSriov(const Snapshot* s, const Selection* sel, Mode mode) {
  const char* id = "gpu.sriov";
  if (mode != Mode::kVmVgpu) return skipForMode(id, mode);
  if (!s || !sel || sel->gpus().empty())
    return makeCheck(id, CheckStatus::kSkip, "no GPU selected (see gpu.present)");
  std::vector<std::string> bad, ok;
  bool noMemory = false;
  for (const auto& b : sel->gpus()) {
    const auto* f = s->find(b);
    if (!f) continue;
    if (f->sriovTotalVfs && *f->sriovTotalVfs > 0 && f->vfBarsAssigned == false) {
      noMemory = true;
      // The capability says the device can; the firmware gave the VFs no memory.
      bad.push_back(describeFunction(*s, b) + ": " + std::to_string(*f->sriovTotalVfs) +
                    " VFs, but their BARs have no memory (sysfs resource lines 7-12 are empty): "
                    "writing sriov_numvfs fails with ENOMEM");
    } else if (f->sriovTotalVfs && *f->sriovTotalVfs > 0) {
      ok.push_back(b.str() + ": " + std::to_string(*f->sriovTotalVfs) + " VFs");
    } else if (expectsSriov(*f)) {
      bad.push_back(describeFunction(*s, b) +
                    (f->sriovTotalVfs ? ": sriov_totalvfs is 0" : ": no sriov_totalvfs"));
    } else {
      ok.push_back(b.str() + ": pre-Ampere, vGPU uses mdev on the PF");
    }
  }
  if (!bad.empty()) {
    return makeCheck(
        id, CheckStatus::kFail, "SR-IOV not available on " + join(bad, "; "),
        std::string("enable SR-IOV (and Above 4G Decoding) in the BIOS/UEFI "
                    "setup, then reboot") +
            (noMemory ? "; if the VFs still get no memory, boot with pci=realloc" : ""));
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

CheckResult checkLargeBars(const Snapshot* s, const Selection* sel, Mode mode) {
  const char* id = "gpu.bars";
  if (mode != Mode::kVmPassthrough) return skipForMode(id, mode);
  if (!s || !sel || sel->gpus().empty())
    return makeCheck(id, CheckStatus::kSkip, "no GPU selected (see gpu.present)");
  // QEMU's q35 pci-hole64-size and OVMF's 64-bit MMIO aperture both default to 32 GiB.
  constexpr uint64_t kDefaultHole = 32 * kGiB;
  std::vector<std::string> large;
  uint64_t total = 0, largest = 0;
  size_t known = 0;
  for (const auto& b : sel->gpus()) {
    const auto* f = s->find(b);
    if (!f || f->bars.empty() || isNvSwitch(*f)) continue;
    ++known;
    uint64_t sum = 0;
    std::vector<std::string> big;
    for (const auto& bar : f->bars) {
      sum += bar.size;
      if (bar.size > 4 * kGiB)
        big.push_back("BAR" + std::to_string(bar.index) + " " + sizeText(bar.size));
    }
    total += sum;
    largest = std::max(largest, sum);
    if (!big.empty() || sum > 4 * kGiB)
      large.push_back(b.str() + ": " + (big.empty() ? "" : join(big, ", ") + ", ") + sizeText(sum) +
                      " in all");
  }
  if (known == 0) {
    return makeCheck(id, CheckStatus::kSkip,
                     "the selected GPUs have no readable resource file in sysfs");
  }
  if (large.empty())
    return makeCheck(id, CheckStatus::kPass, "every selected GPU's BARs fit below 4 GiB");
  const std::string detail = join(large, "; ") +
                             ": the VM must map them as 64-bit MMIO above "
                             "4 GiB";
  if (largest <= kDefaultHole) {
    return makeCheck(id, CheckStatus::kInfo,
                     detail +
                         " (within the 32 GiB 64-bit PCI window QEMU and OVMF give by "
                         "default, one GPU per VM; all " +
                         sizeText(total) + " in one VM)");
  }
  const uint64_t hole = roundUpPowerOfTwo(largest) / kGiB;
  const uint64_t holeAll = roundUpPowerOfTwo(total) / kGiB;
  return makeCheck(
      id, CheckStatus::kWarn,
      detail +
          ": more than the 32 GiB 64-bit PCI window QEMU and OVMF give by default; the guest "
          "driver then reports \"BAR0 is 0M @ 0x0\" (kubevirt/kubevirt issue 11093)",
      "give the VM a 64-bit PCI window of at least " + std::to_string(hole) + " GiB per GPU (" +
          std::to_string(holeAll) + " GiB for all " + std::to_string(known) +
          " in one VM): QEMU -global q35-pcihost.pci-hole64-size=" + std::to_string(hole) +
          "G and, with OVMF, -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=" +
          std::to_string(hole * 1024) +
          "; in KubeVirt through the VM's libvirt domain (a sidecar hook) until it exposes the "
          "size");
}

}  // namespace hostprep
