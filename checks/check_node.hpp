// check-node: does each node's workload label agree with what the node advertises? Documents in
// (Nodes, ClusterPolicy, KubeVirt CR, VM/VMI/Pod manifests, hostprep status documents, DRA
// ResourceSlices), findings out. Pure: no files, no clock, no cluster access.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checks/documents.hpp"
#include "checks/resource_kinds.hpp"
#include "checks/vgpu_configs.hpp"
#include "drivers/common/error.hpp"
#include "drivers/model/mode.hpp"

namespace hostprep {

enum class Severity { kInfo, kWarning, kError };
std::string_view toString(Severity s);

struct Finding {
  std::string id;  // stable, e.g. "resource-wrong-kind"; documented in the README
  Severity severity = Severity::kError;
  std::string node;      // empty: about the cluster, not one node
  std::string resource;  // the resource it is about, when one
  std::string subject;   // the workload or document it is about, when one
  std::string message;
  std::string fix;
};

// How the node's mode was decided.
enum class ModeSource {
  kLabel,            // the label's value
  kDefault,          // no label: defaultWorkload
  kInvalidLabel,     // a value that is not a mode: defaultWorkload
  kSandboxDisabled,  // sandboxWorkloads.enabled is false: container, the label is never read
};
std::string_view toString(ModeSource s);

// Whether new pods and VMs can land on the node (spec.unschedulable).
enum class Scheduling { kSchedulable, kCordoned };

// A node's verdict: its worst finding (infos do not count).
enum class NodeState { kOk, kWarning, kError };
std::string_view toString(NodeState s);

// The split a mixed node declares: GPUs per mode, from hostprep's NFD labels
// feature.node.kubernetes.io/hostprep.gpus.<mode>=N beside hostprep.desired-mode=mixed.
struct GpuSplit {
  std::array<int64_t, 3> gpus{};  // indexed by Mode

  int64_t of(Mode m) const { return gpus[static_cast<size_t>(m)]; }
  // "container=2, vm-passthrough=2": the modes with GPUs, in Mode order.
  std::string describe() const;
};

struct NodeResult {
  std::string name;
  std::string source;  // the document it came from
  bool hasGpus = false;
  Mode mode = Mode::kContainer;
  ModeSource modeSource = ModeSource::kDefault;
  std::optional<std::string> label;  // the workload label's value
  std::optional<int> gpus;           // GPU count, from nvidia.com/gpu.count or --status
  Scheduling scheduling = Scheduling::kSchedulable;
  std::optional<GpuSplit> split;         // a valid declared split; nullopt: one mode
  std::vector<ResourceCount> resources;  // nvidia.com/* from capacity and allocatable
  std::vector<Finding> findings;

  int count(Severity s) const;
  NodeState state() const;
};

struct PolicyView {
  bool given = false;  // false: no ClusterPolicy, the values below are assumed
  bool sandboxEnabled = true;
  Mode defaultWorkload = Mode::kContainer;
  // spec.vfioManager.enabled, spec.vgpuDeviceManager.enabled (the operator's defaults: true);
  // with hostprep on a node they are a second owner of its GPUs.
  bool vfioManagerEnabled = true;
  bool vgpuDeviceManagerEnabled = true;
  std::string source;  // the document, or empty
};

struct CheckNodeReport {
  PolicyView policy;
  std::vector<NodeResult> nodes;
  std::vector<Finding> clusterFindings;  // not about one node (workloads, KubeVirt, policy)

  int count(Severity s) const;
  int exitCode() const { return count(Severity::kError) > 0 ? 1 : 0; }
};

struct CheckNodeInput {
  std::vector<Document> nodes;  // Node documents and Lists of them
  std::optional<Document> clusterPolicy;
  std::optional<Document> kubevirt;
  std::vector<Document> workloads;  // VirtualMachine, VirtualMachineInstance, Pod, pod templates
  std::vector<Document> statuses;   // hostprep status documents
  std::vector<Document> resourceSlices;  // resource.k8s.io ResourceSlices (DRA)
  std::optional<VgpuConfigFile> vgpuConfigs;
};

// Runs every check. Documents of the wrong shape (a Pod among the nodes, a Node without a name)
// are a usage error (exit 2) naming the document; everything else becomes findings.
Result<CheckNodeReport> checkNodes(const CheckNodeInput& in);

// The report as documented in checks/check-node.schema.json.
nlohmann::json reportJson(const CheckNodeReport& r);
// Text: one block per node, cluster findings, and the summary line.
std::string reportText(const CheckNodeReport& r);
std::string summaryLine(const CheckNodeReport& r);

}  // namespace hostprep
