#include "checks/preflight.hpp"

#include <algorithm>
#include <functional>

#include "checks/preflight_cc.hpp"
#include "checks/preflight_cmdline.hpp"
#include "checks/preflight_cpu.hpp"
#include "checks/preflight_fabric.hpp"
#include "checks/preflight_gpus.hpp"
#include "checks/preflight_iommu.hpp"
#include "checks/preflight_modules.hpp"
#include "checks/preflight_persistence.hpp"
#include "checks/preflight_reset.hpp"
#include "checks/preflight_vfio_cdev.hpp"
#include "drivers/common/text.hpp"
#include "drivers/published/persist.hpp"

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
    {"gpu.mode-mix", "GPU modes on one node"},
    {"gpu.sriov", "SR-IOV for vGPU"},
    {"gpu.boot-vga", "Boot VGA framebuffer"},
    {"gpu.bars", "Large BARs (64-bit MMIO)"},
    {"gpu.reset", "Reset on the way back from a VM"},
    {"gpu.fabric", "NVSwitches and Fabric Manager"},
    {"gpu.cc", "Confidential computing"},
    {"gpu.owner", "One owner per GPU"},
    {"boot.persistence", "Mode survives a reboot"},
    {"kernel.lockdown", "Lockdown / Secure Boot"},
};

std::string_view titleOf(std::string_view id) {
  for (const auto& c : kChecks) {
    if (c.id == id) return c.title;
  }
  return id;
}

// Three titles name x86's terms; an arm64 host has their Arm counterparts: virtualization is the
// kernel started at EL2, the IOMMU is an SMMU (found in the ACPI IORT), and passthrough is asked
// for with iommu.passthrough=1 only (Documentation/admin-guide/kernel-parameters.txt: iommu=pt is
// x86's).
constexpr CheckInfo kArm64Titles[] = {
    {"cpu.virtualization", "CPU virtualization (EL2)"},
    {"iommu.firmware", "IOMMU in firmware (SMMU)"},
    {"cmdline.iommu-pt", "IOMMU passthrough (iommu.passthrough=1)"},
};

void useArm64Titles(std::vector<CheckResult>& checks) {
  for (auto& c : checks) {
    for (const auto& t : kArm64Titles) {
      if (c.id == t.id) c.title = std::string(t.title);
    }
  }
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

// The command lines boot.persistence reads: the running kernel's, then the configured ones.
std::vector<CmdlineView> bootViews(const HostFacts& f, const Cmdline& running) {
  auto views = configuredCmdlines(f.boot);
  views.insert(views.begin(), CmdlineView{"running kernel (/proc/cmdline)", running});
  return views;
}

// The ids of the selected functions (GPUs and companions).
std::vector<PciId> targetIds(const Snapshot* s, const Selection* sel) {
  std::vector<PciId> out;
  if (!s || !sel) return out;
  for (const auto& t : sel->targets) {
    if (const auto* fn = s->find(t.bdf)) out.push_back(fn->id);
  }
  return out;
}

// gpu.owner: the GPU Operator's vfio-manager (k8s-driver-manager's vfio-manage) and
// vgpu-device-manager move the same GPUs hostprep moves; two agents on one GPU race (the
// vfio-manager's "bind --all" leaves the audio companion behind, its preStop "unbind --all" leaves
// the GPUs without a driver). Seen by their processes in the host's proc/.
CheckResult checkSingleOwner(const std::vector<std::string>& agents, Mode mode) {
  (void)mode;
  if (agents.empty()) {
    return makeCheck("gpu.owner", CheckStatus::kPass,
                     "no vfio-manager or vgpu-device-manager of the GPU Operator runs here");
  }
  return makeCheck("gpu.owner", CheckStatus::kWarn,
                   "the GPU Operator's agents move this node's GPUs too: " + join(agents, "; "),
                   "set vfioManager.enabled=false and vgpuDeviceManager.enabled=false in the "
                   "ClusterPolicy (Helm: --set vfioManager.enabled=false --set "
                   "vgpuDeviceManager.enabled=false) where hostprep runs, or keep hostprep off "
                   "this node; 'hostprep check-node --cluster-policy' checks it");
}

// Every check but gpu.mode-mix for one mode on `sel` (all selected GPUs, or one mode's), in
// report order.
std::vector<CheckResult> modeChecks(const HostFacts& f, const PreflightRequest& req, Mode mode,
                                    const Selection* selp, const Cmdline& running) {
  const PlatformFacts& p = f.platform;
  const Snapshot* s = f.snapshot;
  std::vector<CheckResult> c;
  c.push_back(checkCpu(p, mode));
  c.push_back(checkKvm(p, mode));
  c.push_back(checkIommuFirmware(p, s, mode));
  c.push_back(checkIommuKernel(p, s, running, f.boot, mode));
  c.push_back(checkCmdlineIommu(p, s, running, f.boot, mode));
  c.push_back(checkIommuPt(p, running, f.boot, mode));
  c.push_back(checkInterruptRemapping(p, running, f.boot, mode));
  c.push_back(checkIommufd(p, s, selp, mode));
  c.push_back(checkVfioModules(p.modules, p.kernelRelease, mode));
  c.push_back(checkVgpuModules(p.modules, mode));
  c.push_back(checkVgpuFirmware(p, mode));
  c.push_back(checkHostDriver(p.modules, req.selection.hostDriver, mode, f.operatorDriver));
  c.push_back(checkNouveauLoaded(p, s, f.boot));
  c.push_back(checkGpusPresent(s, f.snapshotError, selp, req.selection));
  c.push_back(checkGroups(s, selp, mode));
  c.push_back(checkSriov(s, selp, mode));
  c.push_back(checkBootVga(p, s, selp, f.boot, mode));
  c.push_back(checkLargeBars(s, selp, mode));
  c.push_back(checkReset(p, s, selp, mode));
  c.push_back(checkFabric(p, s, mode, req.selection.hostDriver));
  c.push_back(checkConfidentialComputing(p, s, selp, mode, req.cc));
  c.push_back(checkSingleOwner(f.otherAgents, mode));
  c.push_back(checkBootPersistence(mode, f.boot, bootViews(f, running), targetIds(s, selp),
                                   p.kernelConfig, req.selection.hostDriver));
  c.push_back(checkLockdown(p, mode, req.selection.hostDriver));
  if (p.cpu.arm64) useArm64Titles(c);
  return c;
}

// How bad a status is, for the worst of several: skip < pass < info < warn < fail.
int severity(CheckStatus s) {
  switch (s) {
    case CheckStatus::kSkip:
      return 0;
    case CheckStatus::kPass:
      return 1;
    case CheckStatus::kInfo:
      return 2;
    case CheckStatus::kWarn:
      return 3;
    case CheckStatus::kFail:
      return 4;
  }
  return 0;
}

// One result per id from one result per mode (see preflight.hpp, "A mixed node").
CheckResult mergeModes(const std::vector<std::pair<Mode, CheckResult>>& per) {
  std::vector<const std::pair<Mode, CheckResult>*> rel;
  for (const auto& r : per) {
    if (r.second.status != CheckStatus::kSkip) rel.push_back(&r);
  }
  if (rel.empty()) {
    for (const auto& r : per) rel.push_back(&r);
  }
  CheckResult out = rel.front()->second;
  bool same = true;
  for (const auto* r : rel) {
    same = same && r->second.status == out.status && r->second.detail == out.detail &&
           r->second.remedy == out.remedy;
    if (severity(r->second.status) > severity(out.status)) out.status = r->second.status;
  }
  // Every mode found the same: as it is.
  if (same && rel.size() == per.size()) return out;
  if (out.status == CheckStatus::kSkip) {
    // No mode needs it. skipForMode's details name their mode ("not needed in container mode:
    // why"): one line when the reasons agree.
    std::vector<std::string> modes, reasons, named;
    for (const auto* r : rel) {
      const std::string m(toString(r->first));
      const std::string head = "not needed in " + m + " mode";
      const std::string& d = r->second.detail;
      modes.push_back(m);
      if (startsWith(d, head)) {
        reasons.push_back(d.substr(head.size()));
        named.push_back(d);
      } else {
        named.push_back(m + ": " + d);
      }
    }
    const bool oneReason =
        reasons.size() == rel.size() &&
        std::adjacent_find(reasons.begin(), reasons.end(), std::not_equal_to<>()) == reasons.end();
    out.detail = oneReason ? "not needed in " + join(modes, " or ") + " mode" + reasons.front()
                           : join(named, "; ");
    return out;
  }
  if (same) {
    std::vector<std::string> modes;
    for (const auto* r : rel) modes.push_back(std::string(toString(r->first)));
    out.detail = join(modes, ", ") + ": " + out.detail;
    return out;
  }
  std::vector<std::string> details, remedies;
  for (const auto* r : rel) {
    const std::string m(toString(r->first));
    details.push_back(m + ": " + r->second.detail);
    if (!r->second.remedy.empty() &&
        (r->second.status == CheckStatus::kWarn || r->second.status == CheckStatus::kFail))
      remedies.push_back(m + ": " + r->second.remedy);
  }
  out.detail = join(details, "; ");
  out.remedy = remedies.size() == 1 ? remedies.front().substr(remedies.front().find(": ") + 2)
                                    : join(remedies, "; ");
  return out;
}

// gpu.mode-mix: is the split one hostprep can hold? The refusals are drivers/model/device_rules'
// own, so preflight says exactly what prepare would.
CheckResult checkModes(const Snapshot* s, const Selection* sel, const DeviceModes& modes,
                       const std::map<Mode, int>& split,
                       const std::vector<std::string>& ruleWarnings) {
  const char* id = "gpu.mode-mix";
  const std::string fixRules = "fix or remove the rule in /etc/hostprep/config.yaml";
  if (!s || !sel || split.empty())
    return makeCheck(id, CheckStatus::kSkip, "no GPU selected (see gpu.present)");
  if (split.size() == 1) {
    const std::string one = "not a mixed node: every selected GPU in " +
                            std::string(toString(split.begin()->first)) + " mode";
    if (!ruleWarnings.empty())
      return makeCheck(id, CheckStatus::kWarn, one + "; " + join(ruleWarnings, "; "), fixRules);
    return makeCheck(id, CheckStatus::kSkip, one);
  }
  std::vector<std::string> fails, remedies;
  for (const auto& st : {checkModeMix(split), checkGroupModes(*s, *sel, modes)}) {
    if (st) continue;
    fails.push_back(st.error().message);
    remedies.push_back(st.error().advice);
  }
  if (!fails.empty())
    return makeCheck(id, CheckStatus::kFail, join(fails, "; "), join(remedies, "; "));
  std::vector<std::string> parts;
  for (const auto& [m, n] : split) {
    std::vector<std::string> gpus;
    for (const auto& b : sel->gpus()) {
      auto it = modes.find(b);
      if (it != modes.end() && it->second == m) gpus.push_back(b.str());
    }
    parts.push_back(std::string(toString(m)) + ": " + join(gpus, ", "));
  }
  std::string detail =
      join(parts, "; ") + ": an allowed mix, and no IOMMU group holds GPUs of two modes";
  if (!ruleWarnings.empty())
    return makeCheck(id, CheckStatus::kWarn, detail + "; " + join(ruleWarnings, "; "), fixRules);
  return makeCheck(id, CheckStatus::kPass, detail);
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

std::string PreflightReport::modeText() const {
  if (!mixed()) return std::string(toString(mode));
  return "mixed (" + splitText(split) + ")";
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
  const Snapshot* s = f.snapshot;
  std::optional<Selection> sel;
  if (s) {
    auto r = selectDevices(*s, req.selection);
    if (!r) return r.error();
    sel = std::move(*r);
  }
  const Selection* selp = sel ? &*sel : nullptr;
  const Cmdline running = parseCmdline(f.cmdline);

  // The mode of each selected GPU: the rules, else req.mode for all.
  DeviceModes modes;
  std::vector<std::string> ruleWarnings;
  if (selp) {
    if (req.rules.empty()) {
      modes = uniformModes(*selp, req.mode);
    } else {
      auto resolved = resolveModes(*s, *selp, req.mode, req.rules);
      modes = std::move(resolved.modes);
      ruleWarnings = std::move(resolved.warnings);
    }
  }
  PreflightReport rep;
  rep.split = selp ? modeSplit(*selp, modes) : std::map<Mode, int>{};
  // Rules that put every GPU in one mode make a node of that mode.
  rep.mode = rep.split.size() == 1 ? rep.split.begin()->first : req.mode;
  const CheckResult mix = checkModes(s, selp, modes, rep.split, ruleWarnings);
  auto withMix = [&](std::vector<CheckResult> checks) {
    auto at = std::find_if(checks.begin(), checks.end(),
                           [](const CheckResult& c) { return c.id == "iommu.groups"; });
    checks.insert(at == checks.end() ? at : at + 1, mix);
    return checks;
  };
  if (!rep.mixed()) {
    rep.checks = withMix(modeChecks(f, req, rep.mode, selp, running));
    return rep;
  }

  // A mixed node: every check per mode on that mode's GPUs, merged; the split's own
  // boot.persistence.
  std::vector<std::pair<Mode, std::vector<CheckResult>>> per;
  std::map<Mode, std::vector<PciId>> targets;
  for (const auto& [m, n] : rep.split) {
    const Selection part = selectionInMode(*selp, modes, m);
    per.emplace_back(m, modeChecks(f, req, m, &part, running));
    targets[m] = targetIds(s, &part);
  }
  std::vector<CheckResult> merged;
  for (size_t i = 0; i < per.front().second.size(); ++i) {
    std::vector<std::pair<Mode, CheckResult>> one;
    for (const auto& [m, checks] : per) one.emplace_back(m, checks[i]);
    if (one.front().second.id == "boot.persistence") {
      merged.push_back(checkBootPersistenceSplit(targets, f.boot, bootViews(f, running),
                                                 f.platform.kernelConfig,
                                                 req.selection.hostDriver));
    } else {
      merged.push_back(mergeModes(one));
    }
  }
  rep.checks = withMix(std::move(merged));
  return rep;
}

}  // namespace hostprep
