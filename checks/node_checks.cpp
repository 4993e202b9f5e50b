#include "checks/node_checks.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "checks/findings.hpp"
#include "checks/operands.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {

using nlohmann::json;

NodeFacts readNodeFacts(const json& node, const Statuses& statuses, const std::string& name) {
  NodeFacts f{Labels(at(node, {"metadata", "labels"})), statuses.find(name), false, std::nullopt,
              nullptr};
  f.migSingle = f.labels.is(kMigStrategyLabel, "single");
  if (auto r = f.labels.get(kGpuReplicasLabel)) {
    if (auto v = parseUnsigned(*r); v && *v > 0 && *v < 1024) f.replicas = static_cast<int64_t>(*v);
  }
  return f;
}

// 1. The node's effective mode.
void decideMode(NodeResult& n, const NodeFacts& f, const Policy& policy) {
  const Labels& labels = f.labels;
  n.label = labels.get(kWorkloadLabel);
  const auto& pv = policy.view;
  if (!pv.sandboxEnabled) {
    n.mode = Mode::kContainer;
    n.modeSource = ModeSource::kSandboxDisabled;
    if (n.label && *n.label != "container") {
      addFinding(n, "workload-label-ignored", Severity::kError,
                 "label " + std::string(kWorkloadLabel) + "=" + *n.label +
                     " is ignored: " + policy.ref() +
                     " has sandboxWorkloads.enabled=false, so the operator prepares every node for "
                     "containers and never reads the label (no event, no warning)",
                 "set spec.sandboxWorkloads.enabled: true in the ClusterPolicy (kubectl patch "
                 "clusterpolicy/" +
                     policy.name +
                     " --type merge -p '{\"spec\":{\"sandboxWorkloads\":{\"enabled\":true}}}'), or "
                     "remove "
                     "the label if this node is meant for containers");
    }
    return;
  }
  const std::string def(toString(pv.defaultWorkload));
  if (!n.label) {
    n.mode = pv.defaultWorkload;
    n.modeSource = ModeSource::kDefault;
    addFinding(n, "workload-label-missing", Severity::kInfo,
               "no " + std::string(kWorkloadLabel) + " label: the operator uses defaultWorkload " +
                   def + (pv.given ? "" : " (assumed)"),
               "label the node to make its mode explicit: kubectl label node " + n.name + " " +
                   std::string(kWorkloadLabel) + "=" + def);
    return;
  }
  if (auto m = parseMode(*n.label)) {
    n.mode = *m;
    n.modeSource = ModeSource::kLabel;
    return;
  }
  n.mode = pv.defaultWorkload;
  n.modeSource = ModeSource::kInvalidLabel;
  addFinding(n, "workload-label-invalid", Severity::kError,
             "label " + std::string(kWorkloadLabel) + "='" + *n.label +
                 "' is not a mode: the operator silently uses defaultWorkload " + def,
             "kubectl label node " + n.name + " --overwrite " + std::string(kWorkloadLabel) +
                 "=<one of " + std::string(kModeChoices) + ">");
}

namespace {

// The modes a node serves: its split's, or its one mode.
std::vector<Mode> servedModes(const NodeResult& n) {
  if (!n.split) return {n.mode};
  std::vector<Mode> out;
  for (Mode m : {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu}) {
    if (n.split->of(m) > 0) out.push_back(m);
  }
  return out;
}

}  // namespace

// 2. nvidia.com/gpu.deploy.* against the table of operands.
void checkDeployLabels(NodeResult& n, const NodeFacts& f) {
  const Labels& labels = f.labels;
  const json* l = labels.raw();
  if (!l) return;
  if (labels.get(kDeployOperandsLabel) == std::optional<std::string>("false")) {
    addFinding(
        n, "deploy-operands-disabled", Severity::kInfo,
        std::string(kDeployOperandsLabel) + "=false: the operator deploys no operand on this node",
        "remove the label if the operator should manage this node");
    return;
  }
  std::vector<std::string> conflicting, disabled, missing;
  // On a split node an operand belongs when one of its modes needs it.
  const std::vector<Mode> modes = servedModes(n);
  auto need = [&](const Operand& op) {
    Need best = Need::kNo;
    for (Mode m : modes) {
      if (op.in(m) == Need::kYes) return Need::kYes;
      if (op.in(m) == Need::kOptional) best = Need::kOptional;
    }
    return best;
  };
  // vfio-manager binds every GPU to vfio-pci (the table's own row): on a split node it would take
  // the GPUs of the other mode too; hostprep binds the split's vm-passthrough GPUs itself.
  auto takesEveryGpu = [&](const Operand& op) { return n.split && op.name == "vfio-manager"; };
  bool any = false;
  forEachPrefixed(*l, kDeployLabelPrefix, [&](const std::string& key, const json& v) {
    any = true;
    const Operand* op = findOperand(std::string_view(key).substr(kDeployLabelPrefix.size()));
    if (!op) return;
    auto value = scalarText(v).value_or("");
    if (value == "true" && takesEveryGpu(*op)) {
      addFinding(n, "deploy-label-conflict", Severity::kError,
                 key + "=true on a node split " + n.split->describe() +
                     ": the vfio-manager binds every GPU of the node to vfio-pci, the other "
                     "mode's GPUs too",
                 "kubectl label node " + n.name + " --overwrite " + key +
                     "=false; hostprep binds the vm-passthrough GPUs of the split itself");
      return;
    }
    if (value == "true" && need(*op) == Need::kNo) conflicting.push_back(key);
    // A paused operand is deploy-label-paused (checks/lifecycle_labels), not switched off.
    if (value != "true" && need(*op) == Need::kYes && !takesEveryGpu(*op) &&
        !startsWith(value, kPausedPrefix))
      disabled.push_back(key + "=" + value);
  });
  if (!any) {
    addFinding(
        n, "deploy-labels-absent", Severity::kInfo,
        "no nvidia.com/gpu.deploy.* labels: the GPU Operator has not labelled this node (not "
        "installed, or it did not see a GPU), so the operands could not be checked",
        "check the operator is installed and the node has nvidia.com/gpu.present=true");
    return;
  }
  for (const auto& op : operandTable()) {
    if (need(op) != Need::kYes || takesEveryGpu(op)) continue;
    if (!labels.get(deployLabel(op))) missing.push_back(deployLabel(op));
  }
  const std::string mode =
      n.split ? "split (" + n.split->describe() + ")" : std::string(toString(n.mode));
  if (!conflicting.empty()) {
    addFinding(
        n, "deploy-label-conflict", Severity::kError,
        "operand labels of another mode are set on this " + mode +
            " node: " + join(conflicting, ", ") + "; their operands fight over the GPUs with the " +
            mode + " ones",
        "the operator rewrites these labels from the workload label: check it reconciled the "
        "node "
        "(operator logs); see 'hostprep check-node --operands' for the operands of each mode");
  }
  if (!missing.empty()) {
    addFinding(n, "deploy-label-missing", Severity::kWarning,
               "operand labels of the " + mode + " mode are missing: " + join(missing, ", ") +
                   "; those operands will not run on this node",
               "wait for the operator to reconcile the node, or check its logs; see 'hostprep "
               "check-node --operands'");
  }
  if (!disabled.empty()) {
    addFinding(
        n, "deploy-label-disabled", Severity::kInfo,
        "operands of the " + mode + " mode switched off on purpose: " + join(disabled, ", "),
        "fine when the host provides them itself (e.g. a pre-installed driver); otherwise remove "
        "the labels");
  }
}

// 3. Resource kinds, zero allocatable, capacity vs allocatable.
void checkResources(NodeResult& n, const NodeFacts& f, const Policy& policy) {
  const ResourceKind want = kindOfMode(n.mode);
  const std::string mode(toString(n.mode));
  std::set<ResourceKind> kinds;
  for (const auto& r : n.resources) {
    if (r.kind != ResourceKind::kOther && r.advertised()) kinds.insert(r.kind);
  }
  for (const auto& r : n.resources) {
    if (r.kind == ResourceKind::kOther || r.kind == want) continue;
    if (!r.advertised()) {
      addFinding(n, "resource-stale", Severity::kInfo,
                 r.name + " is registered with 0 devices: left over from an earlier mode",
                 "harmless; it disappears when the kubelet restarts", r.name);
      continue;
    }
    std::string fix;
    if (r.kind == ResourceKind::kContainer) {
      fix =
          "the container device plugin still runs or the datacenter driver still holds the "
          "GPUs: check the operator relabelled the node (nvidia.com/gpu.deploy.device-plugin "
          "gone)";
      if (!policy.view.given) {
        fix +=
            " and that the ClusterPolicy has sandboxWorkloads.enabled=true (with it false the "
            "label is ignored and this is exactly what you see)";
      }
      fix += "; then run 'hostprep prepare --mode " + mode +
             "' on the node and restart the "
             "sandbox device plugin";
    } else if (n.mode == Mode::kContainer) {
      fix =
          "the sandbox device plugin still runs or the kubelet keeps its registration: check "
          "nvidia.com/gpu.deploy.sandbox-device-plugin is gone, run 'hostprep prepare --mode "
          "container' on the node, then restart the kubelet's device plugins";
    } else {
      fix =
          "the node still shows the other sandbox mode's resource: run 'hostprep prepare "
          "--mode " +
          mode + "' on the node and restart the sandbox device plugin (it scans only at start)";
    }
    addFinding(n, "resource-wrong-kind", Severity::kError,
               "advertises " + r.name + " (" + std::to_string(r.shown()) + "), a " +
                   std::string(kindWord(r.kind)) + " resource, but the node's mode is " + mode +
                   ": " + std::string(modeRule(n.mode)),
               fix, r.name);
  }
  if (kinds.size() >= 2) {
    std::vector<std::string> ks;
    for (auto k : kinds) ks.emplace_back(kindWord(k));
    addFinding(
        n, "mixed-resource-kinds", Severity::kError,
        "advertises " + join(ks, " and ") +
            " resources at once: one node runs one kind of GPU "
            "workload only (vfio-pci or the vGPU manager takes every GPU from the datacenter "
            "driver)",
        "choose one mode for the whole node; run 'hostprep prepare --mode " + mode +
            "' and restart the device plugins");
  }

  std::vector<const ResourceCount*> mine;
  for (const auto& r : n.resources) {
    if (r.kind == want) mine.push_back(&r);
  }
  // With the device plugin off, the DRA driver's ResourceSlices are the node's advertisement
  // (NVIDIA/k8s-dra-driver-gpu publishes a GPU on the host driver as type gpu, or its MIG devices
  // as type mig, and one on vfio-pci as type vfio; the GPU Operator's "DRA Driver for NVIDIA GPUs"
  // page installs it with devicePlugin.enabled=false). It has no vGPU devices.
  const std::string_view draType = n.mode == Mode::kContainer       ? "gpu"
                                   : n.mode == Mode::kVmPassthrough ? "vfio"
                                                                    : "";
  const int64_t draShown = !f.dra                           ? 0
                           : n.mode == Mode::kContainer     ? f.dra->gpus
                           : n.mode == Mode::kVmPassthrough ? f.dra->vfio
                                                            : 0;
  if (mine.empty() && draShown == 0) {
    static const char* kWhy[] = {
        "no nvidia.com/gpu in the node's capacity: the device plugin is not running or found no "
        "GPU on the nvidia driver",
        "no passthrough resource (nvidia.com/<PCI device name>): the sandbox device plugin is "
        "not "
        "running, or no GPU is bound to vfio-pci",
        "no vGPU type resource (nvidia.com/NVIDIA_<type>): no vGPU device was created, or the "
        "sandbox device plugin started before they existed"};
    std::string dra;
    if (f.dra && !draType.empty()) {
      dra = "; nor does the DRA driver " + std::string(kNvidiaDraDriver) +
            " publish a device of type " + std::string(draType) + " on it in the ResourceSlices";
    }
    addFinding(n, "mode-resource-missing", Severity::kError,
               std::string(kWhy[static_cast<int>(n.mode)]) + " (mode " + mode + ")" + dra,
               "run 'hostprep prepare --mode " + mode + "' on the node, then check the " +
                   (n.mode == Mode::kContainer ? "nvidia-device-plugin" : "sandbox device plugin") +
                   " pod on it");
  }
  for (const auto* r : mine) {
    const int64_t cap = r->capacity.value_or(0);
    const int64_t alloc = r->allocatable.value_or(0);
    if (alloc == 0) {
      addFinding(n, "allocatable-zero", Severity::kError,
                 r->name + " has 0 allocatable" +
                     (cap > 0 ? " out of " + std::to_string(cap) +
                                    " in capacity: every device is "
                                    "unhealthy or was taken away from the plugin"
                              : ": the plugin is up but found no device (" +
                                    std::string(
                                        n.mode == Mode::kVmPassthrough ? "no GPU bound to vfio-pci"
                                        : n.mode == Mode::kVmVgpu      ? "no vGPU device created"
                                                                  : "no GPU on the nvidia driver") +
                                    ")"),
                 "run 'hostprep prepare --mode " + mode +
                     "' on the node and restart the device plugin "
                     "there; it counts devices when it starts",
                 r->name);
    } else if (r->capacity && cap != alloc) {
      addFinding(n, "capacity-allocatable-mismatch", Severity::kWarning,
                 r->name + ": " + std::to_string(cap) + " in capacity but " +
                     std::to_string(alloc) +
                     " allocatable: " + std::to_string(std::max<int64_t>(cap - alloc, 0)) +
                     " device(s) unhealthy or reserved",
                 "check the device plugin's log on the node for unhealthy devices", r->name);
    } else if (!r->capacity) {
      addFinding(
          n, "capacity-allocatable-mismatch", Severity::kWarning,
          r->name + " is allocatable (" + std::to_string(alloc) + ") but absent from capacity",
          "pass 'kubectl get node -o json' unchanged", r->name);
    }
    if (rawDeviceId(r->name)) {
      addFinding(n, "resource-raw-device-id", Severity::kWarning,
                 r->name +
                     " is a raw PCI device id: the host's pci.ids does not know this GPU, and the "
                     "name will change when pci.ids is updated",
                 "update pci.ids on the host (update-pciids, or the hwdata package), restart the "
                 "sandbox "
                 "device plugin, and ask for the new name in the VM manifests",
                 r->name);
    }
  }

  // GPU count against what the mode's plugin shows (vGPU: see checkVgpu), or the DRA driver.
  if (n.gpus && mine.empty() && draShown > 0 && draShown < *n.gpus &&
      (n.mode != Mode::kContainer || f.dra->gpusKnown)) {
    addFinding(n, "gpu-count-mismatch", Severity::kWarning,
               "the node has " + plural(*n.gpus, "GPU", "GPUs") + " but the DRA driver " +
                   std::string(kNvidiaDraDriver) + " publishes only " +
                   (n.mode == Mode::kContainer
                        ? plural(draShown, "GPU", "GPUs") + " (devices of type gpu or mig)"
                        : plural(draShown, "device", "devices") + " of type vfio") +
                   " on it (ResourceSlice " + f.dra->slice + ")",
               n.mode == Mode::kContainer
                   ? "check the DRA driver's kubelet plugin log on the node: some GPUs are not on "
                     "the nvidia driver or are unhealthy"
                   : "some GPUs are not on vfio-pci: run 'hostprep prepare --mode vm-passthrough' "
                     "on the node and restart the DRA driver's kubelet plugin there");
  }
  if (!n.gpus || mine.empty()) return;
  int64_t total = 0;
  for (const auto* r : mine) total += r->shown();
  if (n.mode == Mode::kVmPassthrough && total < *n.gpus) {
    addFinding(
        n, "gpu-count-mismatch", Severity::kWarning,
        "the node has " + plural(*n.gpus, "GPU", "GPUs") + " but advertises only " +
            std::to_string(total) + " passthrough device(s)",
        "some GPUs are not on vfio-pci: run 'hostprep prepare --mode vm-passthrough' on the node "
        "and restart the sandbox device plugin");
  }
  if (n.mode == Mode::kContainer) {
    auto gpu = std::find_if(mine.begin(), mine.end(),
                            [](const ResourceCount* r) { return r->name == kContainerResource; });
    bool mig = std::any_of(mine.begin(), mine.end(),
                           [](const ResourceCount* r) { return r->name != kContainerResource; });
    if (gpu != mine.end() && !mig && !f.migSingle) {
      int64_t replicas = f.replicas.value_or(1);
      if ((*gpu)->shown() < *n.gpus * replicas) {
        addFinding(
            n, "gpu-count-mismatch", Severity::kWarning,
            "the node has " + plural(*n.gpus, "GPU", "GPUs") + " but advertises only " +
                std::to_string((*gpu)->shown()) + " nvidia.com/gpu",
            "check the nvidia-device-plugin log on the node: some GPUs are not on the nvidia "
            "driver or are unhealthy");
      }
    }
  }
}
// 5. The host's status document against the node object.
void checkStatus(NodeResult& n, const StatusView& st) {
  // Devices that no longer answer: a VM left them so, or they fell off the bus.
  if (!st.unresponsive.empty() || st.notResponding) {
    std::vector<std::string> bdfs;
    for (const auto& b : st.unresponsiveBdfs) bdfs.push_back(b.str());
    const std::string what = st.unresponsive.empty()
                                 ? "DevicesResponsive is False: " + *st.notResponding
                                 : join(st.unresponsive, ", ") +
                                       (st.unresponsive.size() == 1 ? " does" : " do") +
                                       " not answer (config space reads 0xffff)";
    addFinding(n, "device-unresponsive", Severity::kError,
               what + " on the host (" + st.source +
                   "): no driver can use it, and a device plugin may still advertise it",
               "run 'hostprep recover --devices " +
                   (bdfs.empty() ? std::string("BDF[,...]") : join(bdfs, ",")) +
                   "' on the node; if it still does not answer, drain the node and reboot it");
  }
  if (st.actualMode && *st.actualMode != n.mode) {
    addFinding(n, "status-mode-mismatch", Severity::kError,
               "the host is prepared for " + std::string(toString(*st.actualMode)) + " (" +
                   st.source + ") but the cluster treats the node as " +
                   std::string(toString(n.mode)) + " (" + std::string(toString(n.modeSource)) + ")",
               "make the label and the host agree: relabel the node, or run 'hostprep prepare "
               "--mode " +
                   std::string(toString(n.mode)) + "' on it");
  }
  if (!st.hasAdvertised) return;
  std::map<std::string, std::pair<int64_t, int64_t>> cmp;  // name -> (host, node allocatable)
  for (const auto& [name, c] : st.advertised) cmp[name].first = c;
  for (const auto& r : n.resources) {
    if (r.kind != ResourceKind::kOther) cmp[r.name].second = r.allocatable.value_or(0);
  }
  for (const auto& [name, c] : cmp) {
    if (c.first == c.second) continue;
    std::string fix = c.first > c.second
                          ? "the device plugin has not counted what the host prepared: restart it "
                            "on the node (the sandbox device plugin scans only at start)"
                          : "the node shows devices the host no longer has for this mode (a stale "
                            "plugin registration): restart the device plugin on the node";
    addFinding(n, "status-advertised-mismatch", Severity::kError,
               "the host expects " + std::to_string(c.first) + " × " + name + " (" + st.source +
                   ") but the node shows " + std::to_string(c.second) + " allocatable",
               fix, name);
  }
}

void checkOperatorAgents(NodeResult& n, const NodeFacts& f, const Policy& policy) {
  const PolicyView& p = policy.view;
  if (!p.given || !p.sandboxEnabled) return;  // the operator deploys them with sandbox workloads
  bool hostprep = f.status != nullptr;
  if (const json* l = f.labels.raw()) {
    forEachPrefixed(*l, kHostprepLabelPrefix,
                    [&](const std::string&, const json&) { hostprep = true; });
  }
  if (!hostprep) return;
  std::vector<std::string> fields;
  std::vector<std::string> patch;
  std::vector<std::string> helm;
  if (p.vfioManagerEnabled) {
    fields.push_back("spec.vfioManager.enabled");
    patch.push_back("\"vfioManager\":{\"enabled\":false}");
    helm.push_back("--set vfioManager.enabled=false");
  }
  if (p.vgpuDeviceManagerEnabled) {
    fields.push_back("spec.vgpuDeviceManager.enabled");
    patch.push_back("\"vgpuDeviceManager\":{\"enabled\":false}");
    helm.push_back("--set vgpuDeviceManager.enabled=false");
  }
  if (fields.empty()) return;
  addFinding(n, "operator-agent-enabled", Severity::kError,
             "hostprep runs on this node (" +
                 std::string(f.status ? "its status document" : "its hostprep.* NFD labels") +
                 ") and " + policy.ref() + " still has " + join(fields, " and ") +
                 " true: the operator's vfio-manager (vfio-manage bind --all) or "
                 "vgpu-device-manager would move the same GPUs, racing hostprep",
             "turn them off: kubectl patch clusterpolicy/" + policy.name +
                 " --type merge -p '{\"spec\":{" + join(patch, ",") +
                 "}}' (Helm: " + join(helm, " ") +
                 "); keep sandboxDevicePlugin and the validators; see README, Deploying beside "
                 "the GPU Operator");
}

}  // namespace hostprep
