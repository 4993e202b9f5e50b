#include "checks/lifecycle_labels.hpp"

#include <algorithm>

#include "checks/findings.hpp"
#include "checks/operands.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {

using nlohmann::json;

void checkPausedOperands(NodeResult& n, const NodeFacts& f) {
  const json* l = f.labels.raw();
  if (!l) return;
  forEachPrefixed(*l, kDeployLabelPrefix, [&](const std::string& key, const json& v) {
    const auto value = scalarText(v).value_or("");
    if (!startsWith(value, kPausedPrefix)) return;
    const std::string operand = key.substr(kDeployLabelPrefix.size());
    std::string reason = value.substr(kPausedPrefix.size());
    std::replace(reason.begin(), reason.end(), '-', ' ');
    // Restore what the mode asks for; an operand of another mode is removed instead.
    const Operand* op = findOperand(operand);
    const bool wanted = !op || op->in(n.mode) != Need::kNo;
    const std::string restore =
        wanted ? "kubectl label node " + n.name + " " + key + "=true --overwrite"
               : "kubectl label node " + n.name + " " + key + "-";
    addFinding(n, "deploy-label-paused", Severity::kError,
               key + "=" + value + ": the " + operand + " operand was paused for " + reason +
                   " and never resumed; the operator schedules no " + operand +
                   " pod on this node while the label says paused, and the operands that wait "
                   "for it (the validators, the device plugins) wait forever",
               "once the " + reason +
                   " has finished (or failed: check the manager's log and the node's "
                   "nvidia.com/*.state labels), resume it: " +
                   restore);
  });
}

namespace {

struct StateLabel {
  std::string_view label;     // nvidia.com/mig.config.state
  std::string_view config;    // the label it applies: nvidia.com/mig.config
  std::string_view manager;   // nvidia-mig-manager
  std::string_view failedId;  // mig-config-failed
  std::string_view pendingId;
  std::string_view failedFix;
};

constexpr StateLabel kStateLabels[] = {
    {kMigStateLabel, kMigConfigLabel, "nvidia-mig-manager", "mig-config-failed",
     "mig-config-pending",
     "read the nvidia-mig-manager log on the node; MIG needs a MIG-capable GPU (A100, A30, H100 "
     "and newer) with no process holding it"},
    {kCcStateLabel, kCcModeLabel, "nvidia-cc-manager", "cc-mode-failed", "cc-mode-pending",
     "read the nvidia-cc-manager log on the node; confidential computing needs Hopper or newer "
     "GPUs and TDX or SEV-SNP enabled on the host"},
};

}  // namespace

void checkStateLabels(NodeResult& n, const NodeFacts& f) {
  for (const auto& s : kStateLabels) {
    const auto state = f.labels.get(s.label);
    if (!state) continue;
    const std::string label(s.label), config(s.config), manager(s.manager);
    const std::string asked = f.labels.get(s.config).value_or("(no " + config + " label)");
    if (*state == "failed") {
      addFinding(n, std::string(s.failedId), Severity::kError,
                 label + "=failed: the " + manager + " could not apply " + config + "=" + asked,
                 std::string(s.failedFix));
    } else if (*state == "pending" || *state == "rebooting") {
      addFinding(n, std::string(s.pendingId), Severity::kWarning,
                 label + "=" + *state + ": the " + manager + " is applying " + config + "=" +
                     asked + "; the GPUs may be reset or unavailable meanwhile",
                 "run check-node again later: a state that stays " + *state +
                     " across runs is stuck (read the " + manager + " log on the node)");
    }
  }
}

void checkPreinstalledDriver(NodeResult& n, const NodeFacts& f) {
  const std::string label = std::string(kDeployLabelPrefix) + "driver";
  if (n.mode != Mode::kVmPassthrough || !f.labels.is(label, "pre-installed")) return;
  const bool bound =
      std::any_of(n.resources.begin(), n.resources.end(), [](const ResourceCount& r) {
        return r.kind == ResourceKind::kPassthrough && r.advertised();
      });
  addFinding(n, "driver-preinstalled-passthrough", bound ? Severity::kInfo : Severity::kWarning,
             label +
                 "=pre-installed on a vm-passthrough node: the operator's vfio-manager skips "
                 "nodes with a pre-installed driver (NVIDIA/k8s-driver-manager issue 191), so "
                 "nothing in the cluster unbinds the host driver and binds the GPUs to "
                 "vfio-pci" +
                 std::string(bound ? "; the node advertises passthrough devices, so something "
                                     "on the host did it"
                                   : ""),
             "run 'hostprep prepare --mode vm-passthrough' on the node (it unbinds the host driver "
             "per device and binds vfio-pci), and 'hostprep persist --mode vm-passthrough' to keep "
             "it across reboots");
}

}  // namespace hostprep
