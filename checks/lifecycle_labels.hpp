// The GPU Operator's lifecycle labels on a node: operands left paused by a manager, the state
// labels of the vGPU, MIG and confidential-computing managers, and a host driver marked
// pre-installed on a passthrough node.
#pragma once

#include "checks/check_node.hpp"
#include "checks/node_checks.hpp"

namespace hostprep {

// nvidia.com/gpu.deploy.<operand>=paused-for-*: the manager that paused the operand (driver
// upgrade, vGPU or MIG config change, CC mode change) never restored it (NVIDIA/gpu-operator
// issues 2272, 2845).
void checkPausedOperands(NodeResult& n, const NodeFacts& f);
// nvidia.com/mig.config.state and nvidia.com/cc.mode.state = failed (error), pending or rebooting
// (warning: check-node has no clock, so it cannot tell a change in progress from a stuck one).
// nvidia.com/vgpu.config.state is judged by the vGPU check.
void checkStateLabels(NodeResult& n, const NodeFacts& f);
// nvidia.com/gpu.deploy.driver=pre-installed on a vm-passthrough node: the operator's
// vfio-manager skips the node (NVIDIA/k8s-driver-manager issue 191).
void checkPreinstalledDriver(NodeResult& n, const NodeFacts& f);

}  // namespace hostprep
