#include "checks/preflight_fabric.hpp"

#include <algorithm>
#include <set>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/host_module.hpp"

namespace hostprep {
namespace {

constexpr std::string_view kConfig = "/usr/share/nvidia/nvswitch/fabricmanager.cfg";

std::string setMode(std::string_view value) {
  return "set FABRIC_MODE=" + std::string(value) + " in " + std::string(kConfig) +
         ", then run 'systemctl restart nvidia-fabricmanager'";
}

}  // namespace

CheckResult checkFabric(const PlatformFacts& p, const Snapshot* s, Mode mode,
                        std::string_view hostDriver) {
  const char* id = "gpu.fabric";
  if (!s) return makeCheck(id, CheckStatus::kSkip, "no PCI devices (see gpu.present)");
  // The NVSwitches' host driver is the one the host module gives them: nvidia.ko's is
  // nvidia-nvswitch (host_module.hpp).
  std::vector<std::string> switches, onVfio, notHost, noGroup;
  std::set<std::string> hostDrivers;  // the host module's drivers the NVSwitches are on
  std::vector<PciId> switchIds;
  for (const auto& f : s->pci) {
    if (!isNvSwitch(f)) continue;
    switches.push_back(f.bdf.str());
    if (std::find(switchIds.begin(), switchIds.end(), f.id) == switchIds.end())
      switchIds.push_back(f.id);
    if (f.driver == "vfio-pci") onVfio.push_back(f.bdf.str());
    if (isDriverOfModule(*s, f.driver.value_or(""), hostDriver)) {
      hostDrivers.insert(*f.driver);
    } else {
      notHost.push_back(f.bdf.str());
    }
    if (!f.iommuGroup) noGroup.push_back(f.bdf.str());
  }
  if (switches.empty()) {
    return makeCheck(id, CheckStatus::kSkip,
                     "no NVSwitch (NVIDIA, class 0680): no NVLink fabric to manage");
  }
  const auto& fm = p.fabricManager;
  const std::string what =
      std::to_string(switches.size()) + " NVSwitch(es) " + join(switches, ", ") + "; " +
      (!fm.config     ? "no " + std::string(kConfig) + " (default mode 0)"
       : fm.modeValue ? "FABRIC_MODE=" + *fm.modeValue
                      : "no FABRIC_MODE in " + std::string(kConfig) + " (default mode 0)");
  const auto fabric = fm.mode();
  if (!fabric) {
    return makeCheck(id, CheckStatus::kFail, what + ": not 0, 1 or 2",
                     setMode("0 (full passthrough), 1 (shared NVSwitch) or 2 (vGPU)"));
  }
  const std::string running =
      fm.pid ? "nvidia-fabricmanager runs on the host (pid " + std::to_string(*fm.pid) + ")"
             : "nvidia-fabricmanager does not run on the host (no live process in " +
                   (fm.pidFile.empty() ? "/run/nvidia-fabricmanager/nv-fabricmanager.pid"
                                       : "/" + fm.pidFile) +
                   ")";
  const std::string startFm = "run 'systemctl enable --now nvidia-fabricmanager'";

  if (mode == Mode::kContainer) {
    if (*fabric != FabricMode::kFullPassthrough) {
      return makeCheck(id, CheckStatus::kWarn,
                       what + ": a virtualization mode; bare-metal CUDA needs mode 0",
                       setMode("0"));
    }
    return makeCheck(id, CheckStatus::kInfo, what + "; " + running);
  }
  if (mode == Mode::kVmVgpu) {
    if (*fabric != FabricMode::kVgpu) {
      return makeCheck(id, CheckStatus::kFail,
                       what +
                           ": vGPU guests on NVSwitch systems need mode 2 (vGPU "
                           "multitenancy), otherwise cuInit fails with error 802 in the guest "
                           "(NVIDIA/gpu-operator issue 2923)",
                       setMode("2"));
    }
    if (!fm.pid) {
      return makeCheck(id, CheckStatus::kWarn,
                       what + "; " + running + ": it sets up the NVLinks of the vGPUs", startFm);
    }
    return makeCheck(id, CheckStatus::kPass, what + "; " + running);
  }

  // vm-passthrough
  if (*fabric == FabricMode::kVgpu) {
    return makeCheck(id, CheckStatus::kFail,
                     what +
                         ": mode 2 is for vm-vgpu; passthrough needs 0 (GPUs and NVSwitches "
                         "to one VM) or 1 (shared NVSwitch, Fabric Manager on the host)",
                     setMode("0 or 1"));
  }
  if (*fabric == FabricMode::kSharedNvSwitch) {
    const std::string module = normalizeModuleName(hostDriver);
    std::string host = hostDrivers.empty() ? describeHostDriver(*s, hostDriver)
                                           : join({hostDrivers.begin(), hostDrivers.end()}, ", ");
    if (!hostDrivers.empty() && host != module) host += " (module " + module + ")";
    if (!notHost.empty()) {
      return makeCheck(id, CheckStatus::kFail,
                       what + ": shared NVSwitch mode keeps the NVSwitches on " + host + ", but " +
                           join(notHost, ", ") + " are not",
                       "run 'hostprep prepare --mode container --gpu-ids " + idList(switchIds) +
                           "' to give them back to " + host +
                           " (prepare --nvswitch auto leaves them there)");
    }
    if (!fm.pid) {
      return makeCheck(
          id, CheckStatus::kWarn,
          what + "; " + running + ": in shared NVSwitch mode it activates the VMs' partitions",
          startFm);
    }
    return makeCheck(id, CheckStatus::kPass,
                     what + "; the NVSwitches stay on " + host +
                         " (prepare --nvswitch auto leaves them); " + running);
  }
  // Full passthrough: the NVSwitches go to the VM with the GPUs.
  if (!noGroup.empty()) {
    return makeCheck(id, CheckStatus::kFail, what + ": no IOMMU group for " + join(noGroup, ", "),
                     "check dmesg for IOMMU errors; a device without a group cannot be assigned");
  }
  if (fm.pid) {
    return makeCheck(id, CheckStatus::kWarn,
                     what + "; " + running +
                         ": in full passthrough Fabric Manager runs in the VM, and the host's "
                         "holds the NVSwitches",
                     "run 'systemctl disable --now nvidia-fabricmanager' on the host");
  }
  if (onVfio.size() == switches.size()) {
    return makeCheck(id, CheckStatus::kPass,
                     what + "; the NVSwitches are on vfio-pci with the GPUs");
  }
  return makeCheck(
      id, CheckStatus::kPass,
      what + "; prepare (--nvswitch auto) passes the NVSwitches through with the GPUs");
}

}  // namespace hostprep
