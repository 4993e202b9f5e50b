#include "checks/preflight.hpp"

#include <algorithm>

#include "checks/preflight_cc.hpp"
#include "checks/preflight_cmdline.hpp"
#include "checks/preflight_cpu.hpp"
#include "checks/preflight_fabric.hpp"
#include "checks/preflight_gpus.hpp"
#include "checks/preflight_iommu.hpp"
#include "checks/preflight_modules.hpp"
#include "checks/preflight_persistence.hpp"
#include "checks/preflight_vfio_cdev.hpp"
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
    {"iommu.iommufd", "iommufd and VFIO device files"},
    {"modules.vfio", "VFIO modules"},
    {"modules.vgpu", "vGPU manager modules"},
    {"modules.vgpu-firmware", "vGPU manager GSP firmware"},
    {"modules.host-driver", "Host driver module"},
    {"modules.nouveau", "nouveau"},
    {"gpu.present", "GPUs present"},
    {"iommu.groups", "IOMMU group isolation"},
    {"gpu.sriov", "SR-IOV for vGPU"},
    {"gpu.boot-vga", "Boot VGA framebuffer"},
    {"gpu.bars", "Large BARs (64-bit MMIO)"},
    {"gpu.fabric", "NVSwitches and Fabric Manager"},
    {"gpu.cc", "Confidential computing"},
    {"boot.persistence", "Mode survives a reboot"},
    {"kernel.lockdown", "Lockdown / Secure Boot"},
};

std::string_view titleOf(std::string_view id) {
  for (const auto& c : kChecks) {
    if (c.id == id) return c.title;
  }
  return id;
}

// How a status reads in the text table and in the JSON document, in the enum's order.
struct StatusNames {
  std::string_view text;
  std::string_view json;
};
constexpr StatusNames kStatusNames[] = {
    {"PASS", "pass"}, {"WARN", "warn"}, {"FAIL", "fail"}, {"SKIP", "skip"}, {"INFO", "info"},
};

const StatusNames& namesOf(CheckStatus s) {
  const auto i = static_cast<size_t>(s);
  return i < std::size(kStatusNames) ? kStatusNames[i] : kStatusNames[3];
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared building blocks

std::string_view toString(CheckStatus s) { return namesOf(s).text; }
std::string_view jsonStatus(CheckStatus s) { return namesOf(s).json; }

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

std::string idList(const std::vector<PciId>& ids) {
  std::vector<std::string> s;
  for (const auto& id : ids) s.push_back(toString(id));
  return join(s, ",");
}

PreflightSummary PreflightReport::summary() const {
  // The counter of each status, in the enum's order.
  constexpr int PreflightSummary::*kCounters[] = {&PreflightSummary::pass, &PreflightSummary::warn,
                                                  &PreflightSummary::fail, &PreflightSummary::skip,
                                                  &PreflightSummary::info};
  PreflightSummary s;
  for (const auto& c : checks) ++(s.*kCounters[static_cast<size_t>(c.status)]);
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
  c.push_back(checkIommufd(p, s, selp, mode));
  c.push_back(checkVfioModules(p.modules, p.kernelRelease, mode));
  c.push_back(checkVgpuModules(p.modules, mode));
  c.push_back(checkVgpuFirmware(p, mode));
  c.push_back(checkHostDriver(p.modules, req.selection.hostDriver, mode));
  c.push_back(checkNouveauLoaded(p, s, f.boot));
  c.push_back(checkGpusPresent(s, f.snapshotError, selp, req.selection));
  c.push_back(checkGroups(s, selp, mode));
  c.push_back(checkSriov(s, selp, mode));
  c.push_back(checkBootVga(p, s, selp, f.boot, mode));
  c.push_back(checkLargeBars(s, selp, mode));
  c.push_back(checkFabric(p, s, mode));
  c.push_back(checkConfidentialComputing(p, s, selp, mode, req.cc));

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
