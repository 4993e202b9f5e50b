// Preflight: every host prerequisite of a workload mode, as pure functions of host facts (the
// PCI snapshot, the platform facts, the boot configuration). Nothing here reads the host; the
// readers live in drivers/ (snapshot, platform, bootconfig). Every check runs, the report
// collects them, and the caller decides the exit code (0 no FAIL, 1 any FAIL).
//
// This file holds the report and the list of checks; the checks live by concern:
//   checks/preflight_cpu.*          cpu.virtualization  cpu.kvm
//   checks/preflight_iommu.*        iommu.firmware  iommu.kernel  cmdline.iommu  cmdline.iommu-pt
//                                   iommu.interrupt-remapping
//   checks/preflight_vfio_cdev.*    iommu.iommufd (iommufd and VFIO device files)
//   checks/preflight_modules.*      modules.vfio  modules.vgpu  modules.vgpu-firmware
//                                   modules.host-driver  modules.nouveau  kernel.lockdown
//   checks/preflight_gpus.*         gpu.present  iommu.groups  gpu.sriov  gpu.boot-vga  gpu.bars
//   checks/preflight.cpp            gpu.mode-mix (a mixed node's modes, drivers/model/device_rules)
//                                   gpu.owner (one owner per GPU: the GPU Operator's agents)
//   checks/preflight_reset.*        gpu.reset (reset on the way back from a VM)
//   checks/preflight_fabric.*       gpu.fabric (NVSwitches and Fabric Manager)
//   checks/preflight_cc.*           gpu.cc (confidential computing)
//   checks/preflight_persistence.*  boot.persistence
//   checks/preflight_cmdline.*      kernel arguments and their remedies (shared with image mode)
//   checks/image.*                  the same checks on an image root, plus image.kernels
//
// Check ids are stable (scripts and the JSON schema checks/preflight.schema.json rely on them):
//   cpu.virtualization  cpu.kvm  iommu.firmware  iommu.kernel  cmdline.iommu  cmdline.iommu-pt
//   iommu.interrupt-remapping  iommu.iommufd  modules.vfio  modules.vgpu  modules.vgpu-firmware
//   modules.host-driver  modules.nouveau  gpu.present  iommu.groups  gpu.mode-mix  gpu.sriov
//   gpu.boot-vga  gpu.bars  gpu.reset  gpu.fabric  gpu.cc  gpu.owner  boot.persistence
//   kernel.lockdown  image.kernels (image mode only)
//
// A mixed node (the config's devices rules give the selected GPUs more than one mode): every
// check runs once per mode on that mode's GPUs (selectionInMode), and the report keeps one
// result per id: the worst status of the modes that need the check (SKIP only when none does),
// the detail prefixed with the mode(s) it comes from ("vm-passthrough: ...") unless every mode
// found the same. Node-level checks thus ask what the union of the modes needs. boot.persistence
// judges the split as a whole (checkBootPersistenceSplit); gpu.mode-mix judges the mix.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/platform.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/published/bootconfig.hpp"

namespace hostprep {

enum class CheckStatus { kPass, kWarn, kFail, kSkip, kInfo };
std::string_view toString(CheckStatus s);    // "PASS", "WARN", ...
std::string_view jsonStatus(CheckStatus s);  // "pass", "warn", ...

struct CheckResult {
  std::string id;  // stable, e.g. "cmdline.iommu"
  CheckStatus status = CheckStatus::kSkip;
  std::string title;   // short, for the text table
  std::string detail;  // what was found
  std::string remedy;  // exactly what to change; set on every WARN and FAIL
};

struct PreflightSummary {
  int pass = 0, warn = 0, fail = 0, skip = 0, info = 0;
};

struct PreflightReport {
  Mode mode = Mode::kVmPassthrough;  // the one mode; on a mixed node the default mode
  // GPUs per mode (role gpu), modes with GPUs only; more than one entry: a mixed node. Empty on
  // an image and when no GPU is selected.
  std::map<Mode, int> split;
  bool image = false;
  std::vector<CheckResult> checks;

  bool mixed() const { return split.size() > 1; }
  // "vm-passthrough", or "mixed (container: 1, vm-passthrough: 3)".
  std::string modeText() const;
  PreflightSummary summary() const;
  bool failed() const { return summary().fail > 0; }
  const CheckResult* find(std::string_view id) const;
};

// What preflight is asked: the mode, and which GPUs (the same rule as prepare).
struct PreflightRequest {
  Mode mode = Mode::kVmPassthrough;
  SelectionOptions selection;
  CcMode cc = CcMode::kOff;  // confidential computing asked for (config key cc-mode)
  // The config's devices rules (preflight without --mode): GPUs a rule matches are checked in its
  // mode, the others in `mode`. Empty: every selected GPU in `mode`.
  std::vector<DeviceRule> rules{};
};

// The mode preflight checks: the --mode flag, else the configured mode (etc/hostprep/config.yaml,
// passed in by the caller), else vm-passthrough, the mode with the most prerequisites.
Mode preflightMode(std::optional<Mode> flag, std::optional<Mode> configured);

// The modules whose availability preflight asks about, for the platform reader.
std::vector<std::string> preflightModules(const std::string& hostDriver);

// A live host. `snapshot` is null when sys/bus/pci could not be read (then `snapshotError` says
// why); the checks that need it fail or skip, the others still run.
struct HostFacts {
  const Snapshot* snapshot = nullptr;
  std::string snapshotError;
  const PlatformFacts& platform;
  const BootConfig& boot;
  std::string cmdline;  // proc/cmdline of the running kernel ("" when unreadable)
  // The host driver comes from the GPU Operator's driver container (host-driver-provider,
  // resolved against the host: drivers/model/operator_driver.hpp).
  bool operatorDriver = false;
  // The GPU Operator's agents seen moving GPUs on this host (operatorAgents): gpu.owner.
  std::vector<std::string> otherAgents{};
};

// Runs every check against a live host. Fails (exit 2) only when --devices names something that
// is not a selected GPU, as prepare does.
Result<PreflightReport> preflightHost(const HostFacts& facts, const PreflightRequest& req);

// ---- Building blocks of every check (checks/preflight_*.cpp, checks/image.cpp) ----

// A result with the check's title from the list of checks.
CheckResult makeCheck(std::string_view id, CheckStatus status, std::string detail,
                      std::string remedy = {});
CheckResult skipForMode(std::string_view id, Mode mode, std::string_view why = {});

// The VM modes need VT-x/AMD-V, KVM and the IOMMU; container mode needs none of them.
constexpr bool vmMode(Mode m) { return m != Mode::kContainer; }

// "10de:2236,10de:1aef".
std::string idList(const std::vector<PciId>& ids);

}  // namespace hostprep
