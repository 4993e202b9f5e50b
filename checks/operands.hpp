// The operands the GPU Operator deploys per workload mode (NVIDIA/gpu-operator,
// controllers/state_manager.go): ONE data table. Each operand is switched on for a node by the
// label nvidia.com/gpu.deploy.<operand>=true, which the operator writes from the node's mode.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "drivers/model/mode.hpp"

namespace hostprep {

inline constexpr std::string_view kDeployLabelPrefix = "nvidia.com/gpu.deploy.";
// "false" on this label: the operator deploys nothing on the node.
inline constexpr std::string_view kDeployOperandsLabel = "nvidia.com/gpu.deploy.operands";

// Whether an operand runs on a node of a mode.
enum class Need { kNo, kYes, kOptional };  // kOptional: only when a feature asks (MIG, Kata, CC)
// "no", "yes", "optional" (check-node --operands --output json).
std::string_view toString(Need n);

struct Operand {
  std::string_view name;  // "vfio-manager"; the label is kDeployLabelPrefix + name
  Need container;
  Need passthrough;
  Need vgpu;
  std::string_view what;  // one line for --operands

  Need in(Mode m) const {
    switch (m) {
      case Mode::kContainer:
        return container;
      case Mode::kVmPassthrough:
        return passthrough;
      case Mode::kVmVgpu:
        return vgpu;
    }
    return Need::kNo;
  }
};

std::span<const Operand> operandTable();
// The operand named by a deploy label ("nvidia.com/gpu.deploy.driver" -> the driver row), or
// nullptr for a name the table does not know.
const Operand* findOperand(std::string_view name);
std::string deployLabel(const Operand& o);
// The table as printed by 'hostprep check-node --operands'.
std::string formatOperandsTable();

}  // namespace hostprep
