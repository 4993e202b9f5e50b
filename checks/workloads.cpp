#include "checks/workloads.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "checks/findings.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {

using nlohmann::json;

namespace {

struct Request {
  std::string workload;  // "VirtualMachineInstance default/a10-vm"
  bool vm = false;
  std::string resource;
  int64_t count = 0;
};

std::string workloadName(const json& body) {
  std::string s = kindOf(body);
  const json* ns = at(body, {"metadata", "namespace"});
  const json* name = at(body, {"metadata", "name"});
  s += " ";
  if (ns && ns->is_string()) s += ns->get<std::string>() + "/";
  s += name && name->is_string() ? name->get<std::string>() : std::string("(unnamed)");
  return s;
}

void addRequest(std::vector<Request>& out, const std::string& workload, bool vm,
                const std::string& resource, int64_t count) {
  for (auto& r : out) {
    if (r.workload == workload && r.resource == resource) {
      r.count += count;
      return;
    }
  }
  out.push_back({workload, vm, resource, count});
}

void podRequests(std::vector<Request>& out, const std::string& workload, const json& spec) {
  std::map<std::string, int64_t> sum, initMax;
  auto scan = [&](const char* list, std::map<std::string, int64_t>& into, bool add) {
    const json* cs = at(spec, {list});
    if (!cs || !cs->is_array()) return;
    for (const auto& c : *cs) {
      const json* res = at(c, {"resources", "limits"});
      if (!res || !res->is_object()) res = at(c, {"resources", "requests"});
      if (!res || !res->is_object()) continue;
      forEachPrefixed(*res, kResourcePrefix, [&](const std::string& key, const json& value) {
        int64_t v = parseCount(value).value_or(0);
        into[key] = add ? into[key] + v : std::max(into[key], v);
      });
    }
  };
  scan("containers", sum, true);
  scan("initContainers", initMax, false);
  for (const auto& [k, v] : initMax) sum[k] = std::max(sum[k], v);
  for (const auto& [k, v] : sum) {
    if (v > 0) addRequest(out, workload, false, k, v);
  }
}

// Why none of the nodes (indices into report.nodes, each advertising resource) can take count
// devices of it; nullopt when one can.
std::optional<std::string> shortfall(const CheckNodeReport& report,
                                     const std::vector<size_t>& nodes, const std::string& resource,
                                     int64_t count) {
  int64_t best = 0;
  std::string bestNode;
  int cordoned = 0;
  for (size_t i : nodes) {
    const auto& n = report.nodes[i];
    if (n.scheduling == Scheduling::kCordoned) {
      ++cordoned;
      continue;
    }
    auto r = std::find_if(n.resources.begin(), n.resources.end(),
                          [&](const ResourceCount& x) { return x.name == resource; });
    int64_t a = r->allocatable.value_or(0);
    if (a >= count) return std::nullopt;
    if (a > best) best = a, bestNode = n.name;
  }
  return "no schedulable node has " + std::to_string(count) + " allocatable; the most is " +
         std::to_string(best) + (bestNode.empty() ? "" : " (" + bestNode + ")") +
         (cordoned ? ", " + plural(cordoned, "node", "nodes") + " cordoned" : "");
}

}  // namespace

void checkWorkloads(CheckNodeReport& report, const std::vector<Document>& workloads,
                    const KubeVirtView* kubevirt) {
  // Which nodes advertise what.
  std::map<std::string, std::vector<size_t>> offering;
  std::vector<size_t> sandboxNodes;
  for (size_t i = 0; i < report.nodes.size(); ++i) {
    const auto& n = report.nodes[i];
    bool sandbox = false;
    for (const auto& r : n.resources) {
      if (r.kind == ResourceKind::kOther || !r.advertised()) continue;
      offering[r.name].push_back(i);
      sandbox = sandbox || r.kind == ResourceKind::kPassthrough || r.kind == ResourceKind::kVgpu;
    }
    if (sandbox) sandboxNodes.push_back(i);
  }
  auto names = [&](const std::vector<size_t>& idx) {
    std::vector<std::string> v;
    for (size_t i : idx) v.push_back(report.nodes[i].name);
    return nameList(v);
  };
  auto everything = [&] {
    if (offering.empty()) return std::string("nodes advertise no nvidia.com/ resource at all");
    std::vector<std::string> parts;
    for (const auto& [name, idx] : offering) parts.push_back(name + " (" + names(idx) + ")");
    return "nodes advertise " + join(parts, ", ");
  };
  auto sandboxSentence = [&] {
    std::vector<std::string> parts;
    std::set<std::string> res;
    for (size_t i : sandboxNodes) {
      const auto& n = report.nodes[i];
      parts.push_back(n.name + " " + std::string(toString(n.mode)));
      for (const auto& r : n.resources) {
        if ((r.kind == ResourceKind::kPassthrough || r.kind == ResourceKind::kVgpu) &&
            r.advertised())
          res.insert(r.name);
      }
    }
    return "the GPUs are on sandbox nodes (" + nameList(parts) + "), which advertise " +
           join(std::vector<std::string>(res.begin(), res.end()), ", ") +
           " and never nvidia.com/gpu";
  };

  std::vector<Request> requests;
  for (const auto& d : expandLists(workloads)) {
    const auto& b = d.body;
    const auto kind = kindOf(b);
    const auto who = workloadName(b);
    const json* devices = nullptr;
    const json* podSpec = nullptr;
    if (kind == "VirtualMachineInstance") {
      devices = at(b, {"spec", "domain", "devices"});
    } else if (kind == "VirtualMachine" || kind == "VirtualMachineInstanceReplicaSet") {
      devices = at(b, {"spec", "template", "spec", "domain", "devices"});
    } else if (kind == "Pod") {
      podSpec = at(b, {"spec"});
    } else if (kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" ||
               kind == "ReplicaSet" || kind == "Job" || kind == "ReplicationController") {
      podSpec = at(b, {"spec", "template", "spec"});
    } else if (kind == "CronJob") {
      podSpec = at(b, {"spec", "jobTemplate", "spec", "template", "spec"});
    } else {
      addClusterFinding(report.clusterFindings, "workload-ignored", Severity::kInfo, d.source,
                        d.source + ": " +
                            (kind.empty() ? std::string("a document without kind") : "a " + kind) +
                            " is neither a VM nor a pod; ignored",
                        "pass VirtualMachine, VirtualMachineInstance or Pod manifests with --vms");
      continue;
    }
    if (devices) {
      for (const char* key : {"gpus", "hostDevices"}) {
        const json* list = at(*devices, {key});
        if (!list || !list->is_array()) continue;
        for (const auto& g : *list) {
          const json* dn = at(g, {"deviceName"});
          if (dn && dn->is_string()) addRequest(requests, who, true, dn->get<std::string>(), 1);
        }
      }
    }
    if (podSpec) podRequests(requests, who, *podSpec);
  }

  for (const auto& rq : requests) {
    const auto& R = rq.resource;
    const bool wantsGpu = classifyResource(R) == ResourceKind::kContainer;
    if (rq.vm && wantsGpu) {
      addClusterFinding(
          report.clusterFindings, "request-wrong-kind", Severity::kError, rq.workload,
          rq.workload + " asks for " + R +
              " as a VM device: that is the container resource "
              "(device nodes for containers, not a PCI device); a VM needs a passthrough or vGPU "
              "resource",
          "ask for the sandbox resource a vm-passthrough or vm-vgpu node advertises", R);
      continue;
    }
    auto it = offering.find(R);
    // The sentence after "<workload> asks for ", when the request cannot be met. It is
    // request-gpu-only-sandbox when only sandbox nodes could have held the container GPUs.
    std::optional<std::string> unmet;
    bool onlySandbox = false;
    std::string fix;
    if (it == offering.end()) {
      onlySandbox = wantsGpu && !sandboxNodes.empty();
      unmet = R + ": will stay Pending forever: no node advertises " + R + "; " +
              (onlySandbox ? sandboxSentence() : everything());
      fix = onlySandbox
                ? "label a node container (nvidia.com/gpu.workload.config=container, then "
                  "'hostprep prepare --mode container' there), or run the workload as a VM"
                : "ask for a name a node advertises (keep model-specific names in one place, a "
                  "Helm value or kustomize patch), or add a node with this GPU in the matching "
                  "mode";
    } else if (auto why = shortfall(report, it->second, R, rq.count)) {
      onlySandbox =
          wantsGpu && std::any_of(sandboxNodes.begin(), sandboxNodes.end(), [&](size_t i) {
            return report.nodes[i].scheduling == Scheduling::kSchedulable;
          });
      unmet = std::to_string(rq.count) + " × " + R + ": " + *why +
              (onlySandbox ? "; the other " + sandboxSentence() : std::string());
      fix = onlySandbox ? "free container GPUs (uncordon, fix the device plugin), or move a node "
                          "to container mode"
                        : "ask for fewer devices, uncordon nodes, or fix the nodes' allocatable";
    }
    if (unmet) {
      addClusterFinding(report.clusterFindings,
                        onlySandbox ? "request-gpu-only-sandbox" : "request-unsatisfiable",
                        Severity::kError, rq.workload, rq.workload + " asks for " + *unmet, fix, R);
    }
    if (rq.vm && kubevirt && !kubevirt->find(R)) {
      addClusterFinding(
          report.clusterFindings, "request-not-permitted", Severity::kError, rq.workload,
          rq.workload + " asks for " + R +
              ", which the KubeVirt CR does not list in "
              "permittedHostDevices (" +
              kubevirt->source + "): the VM is rejected",
          "add " + R + " to permittedHostDevices with externalResourceProvider: true", R);
    }
  }
}

}  // namespace hostprep
