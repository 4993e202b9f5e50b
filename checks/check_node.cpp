// check-node's driver: reads the inputs, runs the per-node checks node by node, then the cluster
// checks (KubeVirt, workloads). The checks themselves live in one file each.
#include "checks/check_node.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

#include "checks/cluster_inputs.hpp"
#include "checks/findings.hpp"
#include "checks/kubevirt_check.hpp"
#include "checks/lifecycle_labels.hpp"
#include "checks/node_checks.hpp"
#include "checks/resource_slices.hpp"
#include "checks/split_checks.hpp"
#include "checks/vgpu_check.hpp"
#include "checks/workloads.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {

using nlohmann::json;

namespace {

// Indexed by the enums.
constexpr std::array<std::string_view, 3> kSeverityNames{"info", "warning", "error"};
constexpr std::array<std::string_view, 4> kModeSourceNames{"label", "default", "invalid-label",
                                                           "sandbox-disabled"};
constexpr std::array<std::string_view, 3> kNodeStateNames{"ok", "warning", "error"};

}  // namespace

std::string_view toString(Severity s) { return kSeverityNames[static_cast<size_t>(s)]; }
std::string_view toString(ModeSource s) { return kModeSourceNames[static_cast<size_t>(s)]; }
std::string_view toString(NodeState s) { return kNodeStateNames[static_cast<size_t>(s)]; }

int NodeResult::count(Severity s) const {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(),
                                        [&](const Finding& f) { return f.severity == s; }));
}

NodeState NodeResult::state() const {
  if (count(Severity::kError)) return NodeState::kError;
  if (count(Severity::kWarning)) return NodeState::kWarning;
  return NodeState::kOk;
}

int CheckNodeReport::count(Severity s) const {
  int n = 0;
  for (const auto& node : nodes) n += node.count(s);
  for (const auto& f : clusterFindings) n += f.severity == s ? 1 : 0;
  return n;
}

namespace {

// The inputs every check reads, once read.
struct Cluster {
  Policy policy;
  Statuses statuses;
  std::optional<KubeVirtView> kubevirt;
  std::optional<std::map<std::string, DraNodeDevices>> dra;  // with --resource-slices
};

// One node: its result, with every per-node finding.
NodeResult checkNode(const NodeDoc& d, const Cluster& c, const CheckNodeInput& in) {
  const json& body = *d.body;
  NodeResult n;
  n.name = at(body, {"metadata", "name"})->get<std::string>();
  n.source = d.source;
  std::vector<Finding> bad;
  readResources(n, body, bad);
  if (const json* cordon = at(body, {"spec", "unschedulable"});
      cordon && scalarText(*cordon) == std::optional<std::string>("true")) {
    n.scheduling = Scheduling::kCordoned;
  }
  NodeFacts f = readNodeFacts(body, c.statuses, n.name);
  static const DraNodeDevices kNoDevices;
  if (c.dra) {
    auto it = c.dra->find(n.name);
    f.dra = it == c.dra->end() ? &kNoDevices : &it->second;
  }
  if (f.status && f.status->gpus) {
    n.gpus = *f.status->gpus;
  } else if (auto countLabel = f.labels.get(kGpuCountLabel)) {
    if (auto v = parseUnsigned(*countLabel); v && *v < 4096) n.gpus = static_cast<int>(*v);
  }
  n.hasGpus = std::any_of(n.resources.begin(), n.resources.end(),
                          [](const ResourceCount& r) { return r.kind != ResourceKind::kOther; }) ||
              f.labels.is(kGpuPresentLabel, "true") || f.labels.get(kWorkloadLabel) ||
              (n.gpus && *n.gpus > 0) || f.status || (f.dra && f.dra->gpus + f.dra->vfio > 0);
  n.findings = std::move(bad);
  if (!n.hasGpus) return n;
  decideMode(n, f, c.policy);
  readSplit(n, f);
  checkDeployLabels(n, f);
  checkPausedOperands(n, f);
  checkStateLabels(n, f);
  checkPreinstalledDriver(n, f);
  checkOperatorAgents(n, f, c.policy);
  if (n.split) {
    checkSplit(n, f);
    // The vGPU config applies to the split's vm-vgpu GPUs only.
    if (const int64_t vgpus = n.split->of(Mode::kVmVgpu); vgpus > 0) {
      const auto all = n.gpus;
      n.gpus = static_cast<int>(vgpus);
      checkVgpu(n, f, in.vgpuConfigs);
      n.gpus = all;
    }
  } else {
    checkResources(n, f, c.policy);
    if (n.mode == Mode::kVmVgpu) checkVgpu(n, f, in.vgpuConfigs);
  }
  if (f.status) checkStatus(n, *f.status);
  return n;
}

}  // namespace

Result<CheckNodeReport> checkNodes(const CheckNodeInput& in) {
  // 1. Read every input; a document of the wrong shape stops here (exit 2).
  CheckNodeReport report;
  Cluster c;
  auto policy = readPolicy(in.clusterPolicy, report.clusterFindings);
  if (!policy) return policy.error();
  c.policy = std::move(*policy);
  report.policy = c.policy.view;
  auto statuses = readStatuses(in.statuses);
  if (!statuses) return statuses.error();
  c.statuses = std::move(*statuses);
  auto kv = readKubeVirt(in.kubevirt);
  if (!kv) return kv.error();
  c.kubevirt = std::move(*kv);
  auto slices = readResourceSlices(in.resourceSlices);
  if (!slices) return slices.error();
  if (!in.resourceSlices.empty()) c.dra = draDevicesByNode(*slices);
  auto docs = collectNodes(in.nodes);
  if (!docs) return docs.error();

  // 2. Each node on its own; a node given twice is checked once.
  // The items of a large List are read one at a time (NodeItems::forEach), never all at once.
  std::unordered_map<std::string, size_t> nodeIndex;
  size_t total = 0;
  for (const auto& d : *docs) total += d.items ? d.items->size() : 1;
  report.nodes.reserve(total);
  auto visit = [&](const NodeDoc& d) {
    const auto name = at(*d.body, {"metadata", "name"})->get<std::string>();
    if (auto seen = nodeIndex.find(name); seen != nodeIndex.end()) {
      addClusterFinding(report.clusterFindings, "node-duplicate", Severity::kWarning, d.source,
                        "node " + name + " appears twice; the first one (" +
                            report.nodes[seen->second].source + ") is checked",
                        "pass each node once");
      return;
    }
    nodeIndex.emplace(name, report.nodes.size());
    report.nodes.push_back(checkNode(d, c, in));
  };
  for (const auto& d : *docs) {
    if (!d.items) {
      visit(d);
      continue;
    }
    auto read = d.items->forEach([&](size_t i, const json& body) {
      visit(NodeDoc{&body, d.source + " (item " + std::to_string(i + 1) + ")"});
    });
    if (!read) return read.error();
  }
  for (size_t i = 0; i < c.statuses.all.size(); ++i) {
    const auto& s = c.statuses.all[i];
    if (c.statuses.byNode.at(s.node) == i && nodeIndex.count(s.node)) continue;
    addClusterFinding(report.clusterFindings, "status-node-unknown", Severity::kWarning, s.source,
                      "status document of node " + s.node + " matches no node in the input",
                      "pass that node's 'kubectl get node' output too, or check the node name");
  }

  if (!in.resourceSlices.empty()) checkResourceSlices(report, *slices, c.statuses);

  // 3. The cluster: the assumption said out loud when there is no ClusterPolicy, KubeVirt, and
  // what the workloads ask for.
  if (!in.clusterPolicy) {
    bool sandboxLabels =
        std::any_of(report.nodes.begin(), report.nodes.end(),
                    [](const NodeResult& n) { return n.label && *n.label != "container"; });
    addClusterFinding(
        report.clusterFindings, "cluster-policy-assumed",
        sandboxLabels ? Severity::kWarning : Severity::kInfo, "",
        "no --cluster-policy: assumed sandboxWorkloads.enabled=true and defaultWorkload="
        "container, so each label is taken at its word; with the operator's default "
        "(enabled=false) every node is prepared for containers and the labels are ignored",
        "pass 'kubectl get clusterpolicies -o json' with --cluster-policy to check");
  }
  if (c.kubevirt) checkKubeVirt(report, *c.kubevirt, c.statuses);
  if (!in.workloads.empty())
    checkWorkloads(report, in.workloads, c.kubevirt ? &*c.kubevirt : nullptr);
  return report;
}

}  // namespace hostprep
