// The per-node checks of check-node: the effective mode, the operator's deploy labels, the
// advertised resources and the host's own status document (a mixed node's split:
// split_checks.hpp). Each takes the node's result (to add findings to) and the facts read once
// from the node's documents.
#pragma once

#include <cstdint>
#include <optional>

#include "checks/check_node.hpp"
#include "checks/cluster_inputs.hpp"
#include "checks/resource_slices.hpp"

namespace hostprep {

inline constexpr std::string_view kGpuCountLabel = "nvidia.com/gpu.count";
inline constexpr std::string_view kGpuPresentLabel = "nvidia.com/gpu.present";
inline constexpr std::string_view kGpuReplicasLabel = "nvidia.com/gpu.replicas";
inline constexpr std::string_view kMigStrategyLabel = "nvidia.com/mig.strategy";
inline constexpr std::string_view kVgpuStateLabel = "nvidia.com/vgpu.config.state";
inline constexpr std::string_view kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr std::string_view kMigStateLabel = "nvidia.com/mig.config.state";
inline constexpr std::string_view kCcModeLabel = "nvidia.com/cc.mode";
inline constexpr std::string_view kCcStateLabel = "nvidia.com/cc.mode.state";
// hostprep's NFD features as NFD publishes them on the Node (its local source prefixes
// un-namespaced names with feature.node.kubernetes.io/; kubernetes-sigs/node-feature-discovery,
// docs/usage/customization-guide.md, "Feature files").
inline constexpr std::string_view kDesiredModeLabel =
    "feature.node.kubernetes.io/hostprep.desired-mode";
inline constexpr std::string_view kSplitLabelPrefix = "feature.node.kubernetes.io/hostprep.gpus.";
// The desired-mode value of a node whose GPUs are split between modes.
inline constexpr std::string_view kMixedMode = "mixed";
// A deploy label's value while a manager has paused the operand: "paused-for-driver-upgrade".
inline constexpr std::string_view kPausedPrefix = "paused-for-";

// What the checks of one node read, besides its result: built once per node, before any check.
struct NodeFacts {
  Labels labels;
  const StatusView* status = nullptr;  // the node's hostprep status document, if given
  bool migSingle = false;              // nvidia.com/mig.strategy=single
  std::optional<int64_t> replicas;     // nvidia.com/gpu.replicas (time-slicing), when valid
  // What gpu.nvidia.com publishes on the node in --resource-slices: nullptr without the option,
  // else the node's devices (none when no slice names it).
  const DraNodeDevices* dra = nullptr;
};
NodeFacts readNodeFacts(const nlohmann::json& node, const Statuses& statuses,
                        const std::string& name);

// 1. The node's effective mode (n.mode, n.modeSource, n.label) from its label and the policy.
void decideMode(NodeResult& n, const NodeFacts& f, const Policy& policy);
// 2. nvidia.com/gpu.deploy.* against the table of operands of the node's mode.
void checkDeployLabels(NodeResult& n, const NodeFacts& f);
// 3. Resource kinds, zero allocatable, capacity against allocatable, the GPU count. A node without
// a resource of its mode whose GPUs the DRA driver publishes (gpu devices on a container node,
// vfio devices on a vm-passthrough one) is advertised by its ResourceSlices instead.
void checkResources(NodeResult& n, const NodeFacts& f, const Policy& policy);
// 4b. One owner per GPU: a node where hostprep runs (its NFD labels
// feature.node.kubernetes.io/hostprep.*, or its status document) under a ClusterPolicy that
// still deploys the operator's vfio-manager or vgpu-device-manager (spec.vfioManager.enabled,
// spec.vgpuDeviceManager.enabled, both true by default with sandbox workloads on): an error
// naming the fields to turn off.
inline constexpr std::string_view kHostprepLabelPrefix = "feature.node.kubernetes.io/hostprep.";
void checkOperatorAgents(NodeResult& n, const NodeFacts& f, const Policy& policy);
// 5. The host's status document against the node object.
void checkStatus(NodeResult& n, const StatusView& st);

}  // namespace hostprep
