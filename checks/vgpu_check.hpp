// The vGPU check of check-node: a vm-vgpu node's nvidia.com/vgpu.config against the vGPU types
// and counts it advertises, from the vgpu-device-manager config (--vgpu-config) or the built-in
// profile table.
#pragma once

#include <optional>

#include "checks/check_node.hpp"
#include "checks/node_checks.hpp"
#include "checks/vgpu_configs.hpp"

namespace hostprep {

void checkVgpu(NodeResult& n, const NodeFacts& f, const std::optional<VgpuConfigFile>& configs);

}  // namespace hostprep
