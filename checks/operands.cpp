#include "checks/operands.hpp"

#include <algorithm>
#include <array>
#include <sstream>

namespace hostprep {
namespace {

constexpr Need Y = Need::kYes;
constexpr Need N = Need::kNo;
constexpr Need O = Need::kOptional;

// Indexed by Need.
constexpr std::array<std::string_view, 3> kNeedNames{"no", "yes", "optional"};

// container -> driver, gpu-feature-discovery, container-toolkit, device-plugin, dcgm,
// dcgm-exporter, node-status-exporter, operator-validator (mig-manager on MIG-capable GPUs);
// vm-passthrough -> sandbox-device-plugin, sandbox-validator, vfio-manager (kata-manager,
// cc-manager); vm-vgpu -> sandbox-device-plugin, vgpu-manager, vgpu-device-manager,
// sandbox-validator (cc-manager).
constexpr std::array kOperands{
    //       name                    container pass vgpu
    Operand{"driver", Y, N, N, "datacenter driver (nvidia) bound to every GPU"},
    Operand{"container-toolkit", Y, N, N, "NVIDIA container runtime hook for containers"},
    Operand{"device-plugin", Y, N, N, "advertises nvidia.com/gpu"},
    Operand{"gpu-feature-discovery", Y, N, N, "nvidia.com/gpu.* node labels (gpu.count, product)"},
    Operand{"dcgm", Y, N, N, "GPU telemetry host engine"},
    Operand{"dcgm-exporter", Y, N, N, "Prometheus GPU metrics"},
    Operand{"node-status-exporter", Y, N, N, "operator's node status metrics"},
    Operand{"operator-validator", Y, N, N, "validates driver, toolkit and plugin"},
    Operand{"mig-manager", O, N, N, "MIG partitions (MIG-capable GPUs only)"},
    Operand{"vfio-manager", N, Y, N, "binds every GPU to vfio-pci"},
    Operand{"vgpu-manager", N, N, Y, "NVIDIA vGPU manager (host driver in vGPU mode)"},
    Operand{"vgpu-device-manager", N, N, Y, "creates vGPU devices per nvidia.com/vgpu.config"},
    Operand{"sandbox-device-plugin", N, Y, Y, "advertises nvidia.com/<PCI name> or <vGPU type>"},
    Operand{"sandbox-validator", N, Y, Y, "validates the sandbox operands"},
    Operand{"kata-manager", N, O, N, "Kata Containers runtime (when enabled)"},
    Operand{"cc-manager", N, O, O, "confidential computing mode (when enabled)"},
};

// A cell of the --operands table: "-" for no.
std::string_view cell(Need n) { return n == Need::kNo ? "-" : toString(n); }

std::string pad(std::string_view s, size_t w) {
  std::string out(s);
  if (out.size() < w) out.append(w - out.size(), ' ');
  return out;
}

}  // namespace

std::string_view toString(Need n) { return kNeedNames[static_cast<size_t>(n)]; }

std::span<const Operand> operandTable() { return kOperands; }

const Operand* findOperand(std::string_view name) {
  auto it = std::find_if(kOperands.begin(), kOperands.end(),
                         [&](const Operand& o) { return o.name == name; });
  return it == kOperands.end() ? nullptr : &*it;
}

std::string deployLabel(const Operand& o) {
  return std::string(kDeployLabelPrefix) + std::string(o.name);
}

std::string formatOperandsTable() {
  std::ostringstream s;
  s << "Operands per mode: the GPU Operator deploys an operand on a node when the node carries\n"
       "nvidia.com/gpu.deploy.<operand>=true, which it writes from the node's mode.\n\n";
  s << pad("operand", 23) << pad("container", 11) << pad("vm-passthrough", 16) << pad("vm-vgpu", 10)
    << "what it does\n";
  for (const auto& o : kOperands) {
    s << pad(o.name, 23) << pad(cell(o.container), 11) << pad(cell(o.passthrough), 16)
      << pad(cell(o.vgpu), 10) << o.what << "\n";
  }
  return s.str();
}

}  // namespace hostprep
