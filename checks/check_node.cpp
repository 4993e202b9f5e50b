#include "checks/check_node.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "checks/operands.hpp"
#include "drivers/resource_names.hpp"
#include "drivers/text.hpp"
#include "drivers/vgpu_profiles.hpp"

namespace hostprep {

using nlohmann::json;

std::string_view toString(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "error";
}

std::string_view toString(ResourceKind k) {
  switch (k) {
    case ResourceKind::kContainer:
      return "container";
    case ResourceKind::kPassthrough:
      return "passthrough";
    case ResourceKind::kVgpu:
      return "vgpu";
    case ResourceKind::kOther:
      return "other";
  }
  return "other";
}

std::string_view toString(ModeSource s) {
  switch (s) {
    case ModeSource::kLabel:
      return "label";
    case ModeSource::kDefault:
      return "default";
    case ModeSource::kInvalidLabel:
      return "invalid-label";
    case ModeSource::kSandboxDisabled:
      return "sandbox-disabled";
  }
  return "default";
}

ResourceKind kindOfMode(Mode m) {
  switch (m) {
    case Mode::kContainer:
      return ResourceKind::kContainer;
    case Mode::kVmPassthrough:
      return ResourceKind::kPassthrough;
    case Mode::kVmVgpu:
      return ResourceKind::kVgpu;
  }
  return ResourceKind::kContainer;
}

namespace {

bool isUpperAlnum(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool isAlnum(char c) { return isUpperAlnum(c) || (c >= 'a' && c <= 'z'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isLowerHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f'); }

// vgpu-device-manager's type names: time-sliced "<GPU>-<GB><Series>" ("A10-4Q", "H200X-141C"),
// MIG-backed "<GPU>-<G>-<GB>C[ME|NOME|MEALL|GFX]" ("A100-1-5C", "A100-1-5CME").
bool isVgpuTypeName(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && isAlnum(s[i])) ++i;
  if (i == 0) return false;
  int groups = 0;
  while (i < s.size() && s[i] == '-') {
    size_t start = ++i;
    while (i < s.size() && isDigit(s[i])) ++i;
    if (i == start) return false;
    ++groups;
  }
  if (groups < 1 || groups > 2 || i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < 'A' || s[i] > 'Z') return false;
  }
  return true;
}

std::string_view stripVendorPrefix(std::string_view suffix) {
  for (std::string_view p : {"NVIDIA_", "GRID_"}) {
    if (startsWith(suffix, p)) return suffix.substr(p.size());
  }
  return suffix;
}

// The raw-id fallback of the sandbox device plugin: "nvidia.com/2236".
std::optional<uint16_t> rawDeviceId(std::string_view resource) {
  if (!startsWith(resource, kResourcePrefix)) return std::nullopt;
  auto s = resource.substr(kResourcePrefix.size());
  if (s.size() != 4 || !std::all_of(s.begin(), s.end(), isLowerHex)) return std::nullopt;
  return static_cast<uint16_t>(*parseUnsigned(s, 16));
}

}  // namespace

ResourceKind classifyResource(std::string_view name) {
  if (!startsWith(name, kResourcePrefix)) return ResourceKind::kOther;
  auto s = name.substr(kResourcePrefix.size());
  if (s.empty()) return ResourceKind::kOther;
  if (s == "gpu" || s == "gpu.shared" || startsWith(s, "mig-")) return ResourceKind::kContainer;
  // A PCI name is sanitized to [A-Z0-9_.]: a '-' only ever appears in a vGPU type.
  if (s.find('-') != std::string_view::npos) {
    return isVgpuTypeName(stripVendorPrefix(s)) ? ResourceKind::kVgpu : ResourceKind::kOther;
  }
  if (rawDeviceId(name)) return ResourceKind::kPassthrough;
  bool pciName = std::all_of(s.begin(), s.end(),
                             [](char c) { return isUpperAlnum(c) || c == '_' || c == '.'; });
  return pciName ? ResourceKind::kPassthrough : ResourceKind::kOther;
}

std::optional<std::string> vgpuTypeOf(std::string_view resource) {
  if (classifyResource(resource) != ResourceKind::kVgpu) return std::nullopt;
  return std::string(stripVendorPrefix(resource.substr(kResourcePrefix.size())));
}

std::optional<int64_t> parseCount(const json& v) {
  if (v.is_number_integer()) {
    auto n = v.get<int64_t>();
    return n >= 0 ? std::optional<int64_t>(n) : std::nullopt;
  }
  if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
  if (!v.is_string()) return std::nullopt;
  std::string_view s = trim(v.get_ref<const std::string&>());
  int64_t mul = 1;
  if (endsWith(s, "k"))
    mul = 1000, s.remove_suffix(1);
  else if (endsWith(s, "M"))
    mul = 1000'000, s.remove_suffix(1);
  auto n = parseUnsigned(s);
  if (!n || *n > (uint64_t{1} << 40)) return std::nullopt;
  return static_cast<int64_t>(*n) * mul;
}

int NodeResult::count(Severity s) const {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(),
                                        [&](const Finding& f) { return f.severity == s; }));
}

int CheckNodeReport::count(Severity s) const {
  int n = 0;
  for (const auto& node : nodes) n += node.count(s);
  for (const auto& f : clusterFindings) n += f.severity == s ? 1 : 0;
  return n;
}

namespace {

constexpr std::string_view kGpuCountLabel = "nvidia.com/gpu.count";
constexpr std::string_view kGpuPresentLabel = "nvidia.com/gpu.present";
constexpr std::string_view kGpuReplicasLabel = "nvidia.com/gpu.replicas";
constexpr std::string_view kMigStrategyLabel = "nvidia.com/mig.strategy";
constexpr std::string_view kVgpuStateLabel = "nvidia.com/vgpu.config.state";

// Calls fn(key, value) for each member whose key starts with prefix (keys are sorted: a range).
template <class F>
void forEachPrefixed(const json& obj, std::string_view prefix, F&& fn) {
  if (!obj.is_object()) return;
  const auto& m = obj.get_ref<const json::object_t&>();
  for (auto it = m.lower_bound(prefix); it != m.end() && startsWith(it->first, prefix); ++it) {
    fn(it->first, it->second);
  }
}

std::string plural(int64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

// "a, b, c and 4 more"
std::string nameList(const std::vector<std::string>& names, size_t max = 3) {
  std::vector<std::string> shown(names.begin(),
                                 names.begin() + static_cast<long>(std::min(max, names.size())));
  std::string s = join(shown, ", ");
  if (names.size() > max) s += " and " + std::to_string(names.size() - max) + " more";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Inputs, read defensively into small views.

struct Policy {
  PolicyView view;
  std::string name = "cluster-policy";
};

Result<Policy> readPolicy(const std::optional<Document>& doc, std::vector<Finding>& cluster) {
  Policy p;
  if (!doc) return p;
  const json* cp = &doc->body;
  if (const json* items = at(*cp, {"items"}); items && items->is_array()) {
    auto it = std::find_if(items->begin(), items->end(),
                           [](const json& i) { return kindOf(i) == "ClusterPolicy"; });
    if (it == items->end()) {
      return usageError(doc->source + ": no ClusterPolicy in the list",
                        "pass 'kubectl get clusterpolicies -o json'");
    }
    cp = &*it;
  }
  auto kind = kindOf(*cp);
  if (!kind.empty() && kind != "ClusterPolicy") {
    return usageError(doc->source + ": a " + kind + ", not a ClusterPolicy",
                      "pass 'kubectl get clusterpolicies -o json'");
  }
  p.view.given = true;
  p.view.source = doc->source;
  p.view.sandboxEnabled = false;  // the operator's default
  if (const json* n = at(*cp, {"metadata", "name"}); n && n->is_string())
    p.name = n->get<std::string>();
  const json* sw = at(*cp, {"spec", "sandboxWorkloads"});
  if (sw && sw->is_object()) {
    if (const json* e = at(*sw, {"enabled"})) {
      auto t = scalarText(*e);
      p.view.sandboxEnabled = t == std::optional<std::string>("true");
    }
    if (const json* d = at(*sw, {"defaultWorkload"}); d && !d->is_null()) {
      auto t = scalarText(*d).value_or("");
      if (auto m = parseMode(t)) {
        p.view.defaultWorkload = *m;
      } else {
        cluster.push_back({"cluster-policy-default-invalid", Severity::kError, "", "", doc->source,
                           "ClusterPolicy " + p.name + " has sandboxWorkloads.defaultWorkload '" +
                               t + "', which is not a mode; the operator falls back to container",
                           "set it to one of " + std::string(kModeChoices)});
      }
    }
  }
  return p;
}

struct StatusView {
  std::string source;
  std::string node;
  std::optional<std::string> actualMode;
  bool hasAdvertised = false;
  std::vector<std::pair<std::string, int64_t>> advertised;
  std::optional<int> gpus;                         // devices with role "gpu"
  std::vector<uint16_t> gpuDeviceIds;              // NVIDIA device ids of those GPUs
  std::map<std::string, uint16_t> resourceDevice;  // from a device's "resource" field
  bool used = false;
};

std::optional<uint16_t> hexId(const json& v) {
  auto t = scalarText(v);
  if (!t) return std::nullopt;
  auto n = parseUnsigned(*t, 16);
  if (!n || *n > 0xffff) return std::nullopt;
  return static_cast<uint16_t>(*n);
}

Result<std::vector<StatusView>> readStatuses(const std::vector<Document>& docs) {
  std::vector<StatusView> out;
  for (const auto& d : expandLists(docs)) {
    std::vector<std::pair<std::string, const json*>> objs;
    if (d.body.is_array()) {
      for (size_t i = 0; i < d.body.size(); ++i)
        objs.emplace_back(d.source + " [" + std::to_string(i) + "]", &d.body[i]);
    } else {
      objs.emplace_back(d.source, &d.body);
    }
    for (const auto& [source, o] : objs) {
      const json* node = at(*o, {"node"});
      if (!node || !node->is_string() || node->get<std::string>().empty()) {
        return usageError(source + ": not a hostprep status document: no \"node\" name",
                          "pass the file written by 'hostprep status --output json' on each node");
      }
      StatusView s;
      s.source = source;
      s.node = node->get<std::string>();
      if (const json* m = at(*o, {"actual_mode"})) s.actualMode = scalarText(*m);
      if (const json* adv = at(*o, {"advertised"}); adv && adv->is_object()) {
        s.hasAdvertised = true;
        for (const auto& [name, n] : adv->items()) {
          auto c = parseCount(n);
          if (!c) {
            return usageError(
                source + ": advertised." + name + ": '" + n.dump() + "' is not a count",
                "pass the file written by 'hostprep status --output json'");
          }
          s.advertised.emplace_back(name, *c);
        }
      }
      if (const json* devs = at(*o, {"devices"}); devs && devs->is_array()) {
        int gpus = 0;
        for (const auto& dev : *devs) {
          if (!dev.is_object()) continue;
          const json* role = at(dev, {"role"});
          const json* vendor = at(dev, {"vendor"});
          const json* device = at(dev, {"device"});
          std::optional<uint16_t> v, id;
          if (vendor) v = hexId(*vendor);
          if (device) id = hexId(*device);
          if (const json* r = at(dev, {"resource"}); r && r->is_string() && id) {
            s.resourceDevice[r->get<std::string>()] = *id;
          }
          if (role && scalarText(*role) == std::optional<std::string>("gpu")) {
            ++gpus;
            if (id && (!v || *v == kNvidiaVendor)) s.gpuDeviceIds.push_back(*id);
          }
        }
        s.gpus = gpus;
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

struct HostDeviceEntry {
  std::string resource;
  bool mediated = false;  // mediatedDevices, else pciHostDevices
  bool external = false;
  std::optional<std::string> selector;  // pciVendorSelector or mdevNameSelector
  bool advertised = false;
};

struct KubeVirtView {
  std::string source;
  std::vector<HostDeviceEntry> entries;
  std::vector<std::string> gates;

  const HostDeviceEntry* find(std::string_view resource) const {
    for (const auto& e : entries) {
      if (e.resource == resource) return &e;
    }
    return nullptr;
  }
  HostDeviceEntry* find(std::string_view resource) {
    return const_cast<HostDeviceEntry*>(std::as_const(*this).find(resource));
  }
  bool gate(std::string_view g) const {
    return std::find(gates.begin(), gates.end(), g) != gates.end();
  }
};

Result<std::optional<KubeVirtView>> readKubeVirt(const std::optional<Document>& doc) {
  if (!doc) return std::optional<KubeVirtView>();
  const json* kv = &doc->body;
  if (const json* items = at(*kv, {"items"}); items && items->is_array()) {
    auto it = std::find_if(items->begin(), items->end(),
                           [](const json& i) { return kindOf(i) == "KubeVirt"; });
    if (it == items->end()) {
      return usageError(doc->source + ": no KubeVirt in the list",
                        "pass 'kubectl get kubevirt -A -o json'");
    }
    kv = &*it;
  }
  auto kind = kindOf(*kv);
  if (!kind.empty() && kind != "KubeVirt") {
    return usageError(doc->source + ": a " + kind + ", not a KubeVirt CR",
                      "pass 'kubectl get kubevirt -n kubevirt kubevirt -o json'");
  }
  KubeVirtView v;
  v.source = doc->source;
  if (const json* g = at(*kv, {"spec", "configuration", "developerConfiguration", "featureGates"});
      g && g->is_array()) {
    for (const auto& x : *g) {
      if (auto t = scalarText(x)) v.gates.push_back(*t);
    }
  }
  const json* phd = at(*kv, {"spec", "configuration", "permittedHostDevices"});
  auto readList = [&](const char* key, bool mediated, const char* selectorKey) {
    const json* list = phd ? at(*phd, {key}) : nullptr;
    if (!list || !list->is_array()) return;
    for (const auto& e : *list) {
      const json* rn = at(e, {"resourceName"});
      if (!rn || !rn->is_string()) continue;
      HostDeviceEntry h;
      h.resource = rn->get<std::string>();
      h.mediated = mediated;
      const json* ext = at(e, {"externalResourceProvider"});
      h.external = ext && scalarText(*ext) == std::optional<std::string>("true");
      if (const json* s = at(e, {selectorKey})) h.selector = scalarText(*s);
      v.entries.push_back(std::move(h));
    }
  };
  readList("pciHostDevices", false, "pciVendorSelector");
  readList("mediatedDevices", true, "mdevNameSelector");
  return std::optional<KubeVirtView>(std::move(v));
}

// ---------------------------------------------------------------------------------------------
// Nodes.

struct NodeDoc {
  const json* body;
  std::string source;
};

Result<std::vector<NodeDoc>> collectNodes(const std::vector<Document>& docs) {
  std::vector<NodeDoc> out;
  auto take = [&](const json& item, std::string source) -> Status {
    auto kind = kindOf(item);
    if (!item.is_object() || (!kind.empty() && kind != "Node")) {
      return usageError(source + ": " +
                            (kind.empty() ? std::string("not an object") : "a " + kind) +
                            ", not a Node",
                        "pass 'kubectl get nodes -o json' or 'kubectl get node NAME -o json'");
    }
    const json* name = at(item, {"metadata", "name"});
    if (!name || !name->is_string() || name->get<std::string>().empty()) {
      return usageError(source + ": a Node without metadata.name",
                        "pass 'kubectl get nodes -o json' unchanged");
    }
    out.push_back({&item, std::move(source)});
    return {};
  };
  for (const auto& d : docs) {
    const json* items = at(d.body, {"items"});
    if (items && items->is_array()) {
      out.reserve(out.size() + items->size());
      for (size_t i = 0; i < items->size(); ++i) {
        if (auto s = take((*items)[i], d.source + " (item " + std::to_string(i + 1) + ")"); !s)
          return s.error();
      }
    } else if (auto s = take(d.body, d.source); !s) {
      return s.error();
    }
  }
  return out;
}

class Labels {
 public:
  explicit Labels(const json* l) : l_(l && l->is_object() ? l : nullptr) {}
  std::optional<std::string> get(std::string_view key) const {
    if (!l_) return std::nullopt;
    auto it = l_->find(key);
    if (it == l_->end()) return std::nullopt;
    return scalarText(*it);
  }
  const json* raw() const { return l_; }

 private:
  const json* l_;
};

void addResources(NodeResult& n, const json* obj, bool capacity, std::vector<Finding>& bad) {
  if (!obj || !obj->is_object()) return;
  forEachPrefixed(*obj, kResourcePrefix, [&](const std::string& key, const json& value) {
    auto c = parseCount(value);
    if (!c) {
      bad.push_back({"quantity-invalid", Severity::kWarning, n.name, key, "",
                     std::string(capacity ? "capacity" : "allocatable") + " of " + key + " is '" +
                         scalarText(value).value_or(value.dump()) + "', not a whole count",
                     "pass 'kubectl get node -o json' unchanged"});
    }
    auto r = std::find_if(n.resources.begin(), n.resources.end(),
                          [&](const ResourceCount& x) { return x.name == key; });
    if (r == n.resources.end()) {
      n.resources.push_back(ResourceCount{key, classifyResource(key), std::nullopt, std::nullopt});
      r = n.resources.end() - 1;
    }
    (capacity ? r->capacity : r->allocatable) = c.value_or(0);
  });
}

int64_t shown(const ResourceCount& r) { return r.capacity.value_or(r.allocatable.value_or(0)); }
bool advertised(const ResourceCount& r) {
  return r.capacity.value_or(0) > 0 || r.allocatable.value_or(0) > 0;
}

std::string_view kindWord(ResourceKind k) {
  switch (k) {
    case ResourceKind::kContainer:
      return "container";
    case ResourceKind::kPassthrough:
      return "passthrough";
    case ResourceKind::kVgpu:
      return "vGPU";
    case ResourceKind::kOther:
      return "other";
  }
  return "other";
}

std::string modeRule(Mode m) {
  switch (m) {
    case Mode::kContainer:
      return "a container node advertises nvidia.com/gpu and no sandbox resources";
    case Mode::kVmPassthrough:
      return "a vm-passthrough node advertises PCI-name resources such as nvidia.com/GA102GL_A10 "
             "and never nvidia.com/gpu";
    case Mode::kVmVgpu:
      return "a vm-vgpu node advertises vGPU type resources such as nvidia.com/NVIDIA_A10-12Q only";
  }
  return "";
}

struct Checker {
  explicit Checker(const CheckNodeInput& input) : in(input) {}
  const CheckNodeInput& in;
  Policy policy;
  std::vector<StatusView> statuses;
  std::optional<KubeVirtView> kubevirt;
  CheckNodeReport report;
  std::unordered_map<std::string, size_t> nodeIndex;
  std::vector<std::string> unschedulable;  // indexed like report.nodes: "" or "cordoned"

  void add(NodeResult& n, std::string id, Severity s, std::string message, std::string fix,
           std::string resource = {}) {
    n.findings.push_back(
        {std::move(id), s, n.name, std::move(resource), "", std::move(message), std::move(fix)});
  }
  void addCluster(std::string id, Severity s, std::string subject, std::string message,
                  std::string fix, std::string resource = {}) {
    report.clusterFindings.push_back({std::move(id), s, "", std::move(resource), std::move(subject),
                                      std::move(message), std::move(fix)});
  }

  std::string policyRef() const {
    return policy.view.given ? "the ClusterPolicy " + policy.name + " (" + policy.view.source + ")"
                             : std::string("the ClusterPolicy");
  }

  // 1. The node's effective mode.
  void decideMode(NodeResult& n, const Labels& labels) {
    n.label = labels.get(kWorkloadLabel);
    const auto& pv = policy.view;
    if (!pv.sandboxEnabled) {
      n.mode = Mode::kContainer;
      n.modeSource = ModeSource::kSandboxDisabled;
      if (n.label && *n.label != "container") {
        add(n, "workload-label-ignored", Severity::kError,
            "label " + std::string(kWorkloadLabel) + "=" + *n.label +
                " is ignored: " + policyRef() +
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
      add(n, "workload-label-missing", Severity::kInfo,
          "no " + std::string(kWorkloadLabel) + " label: the operator uses defaultWorkload " + def +
              (pv.given ? "" : " (assumed)"),
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
    add(n, "workload-label-invalid", Severity::kError,
        "label " + std::string(kWorkloadLabel) + "='" + *n.label +
            "' is not a mode: the operator silently uses defaultWorkload " + def,
        "kubectl label node " + n.name + " --overwrite " + std::string(kWorkloadLabel) +
            "=<one of " + std::string(kModeChoices) + ">");
  }

  // 2. nvidia.com/gpu.deploy.* against the table of operands.
  void checkDeployLabels(NodeResult& n, const Labels& labels) {
    const json* l = labels.raw();
    if (!l) return;
    if (labels.get(kDeployOperandsLabel) == std::optional<std::string>("false")) {
      add(n, "deploy-operands-disabled", Severity::kInfo,
          std::string(kDeployOperandsLabel) +
              "=false: the operator deploys no operand on this node",
          "remove the label if the operator should manage this node");
      return;
    }
    std::vector<std::string> conflicting, disabled, missing;
    bool any = false;
    forEachPrefixed(*l, kDeployLabelPrefix, [&](const std::string& key, const json& v) {
      any = true;
      const Operand* op = findOperand(std::string_view(key).substr(kDeployLabelPrefix.size()));
      if (!op) return;
      auto value = scalarText(v).value_or("");
      if (value == "true" && op->in(n.mode) == Need::kNo) conflicting.push_back(key);
      if (value != "true" && op->in(n.mode) == Need::kYes) disabled.push_back(key + "=" + value);
    });
    if (!any) {
      add(n, "deploy-labels-absent", Severity::kInfo,
          "no nvidia.com/gpu.deploy.* labels: the GPU Operator has not labelled this node (not "
          "installed, or it did not see a GPU), so the operands could not be checked",
          "check the operator is installed and the node has nvidia.com/gpu.present=true");
      return;
    }
    for (const auto& op : operandTable()) {
      if (op.in(n.mode) != Need::kYes) continue;
      if (!labels.get(deployLabel(op))) missing.push_back(deployLabel(op));
    }
    const std::string mode(toString(n.mode));
    if (!conflicting.empty()) {
      add(n, "deploy-label-conflict", Severity::kError,
          "operand labels of another mode are set on this " + mode +
              " node: " + join(conflicting, ", ") +
              "; their operands fight over the GPUs with the " + mode + " ones",
          "the operator rewrites these labels from the workload label: check it reconciled the "
          "node "
          "(operator logs); see 'hostprep check-node --operands' for the operands of each mode");
    }
    if (!missing.empty()) {
      add(n, "deploy-label-missing", Severity::kWarning,
          "operand labels of the " + mode + " mode are missing: " + join(missing, ", ") +
              "; those operands will not run on this node",
          "wait for the operator to reconcile the node, or check its logs; see 'hostprep "
          "check-node --operands'");
    }
    if (!disabled.empty()) {
      add(n, "deploy-label-disabled", Severity::kInfo,
          "operands of the " + mode + " mode switched off on purpose: " + join(disabled, ", "),
          "fine when the host provides them itself (e.g. a pre-installed driver); otherwise remove "
          "the labels");
    }
  }

  // 3. Resource kinds, zero allocatable, capacity vs allocatable.
  void checkResources(NodeResult& n) {
    const ResourceKind want = kindOfMode(n.mode);
    const std::string mode(toString(n.mode));
    std::set<ResourceKind> kinds;
    for (const auto& r : n.resources) {
      if (r.kind != ResourceKind::kOther && advertised(r)) kinds.insert(r.kind);
    }
    for (const auto& r : n.resources) {
      if (r.kind == ResourceKind::kOther || r.kind == want) continue;
      if (!advertised(r)) {
        add(n, "resource-stale", Severity::kInfo,
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
      add(n, "resource-wrong-kind", Severity::kError,
          "advertises " + r.name + " (" + std::to_string(shown(r)) + "), a " +
              std::string(kindWord(r.kind)) + " resource, but the node's mode is " + mode + ": " +
              modeRule(n.mode),
          fix, r.name);
    }
    if (kinds.size() >= 2) {
      std::vector<std::string> ks;
      for (auto k : kinds) ks.emplace_back(kindWord(k));
      add(n, "mixed-resource-kinds", Severity::kError,
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
    if (mine.empty()) {
      static const char* kWhy[] = {
          "no nvidia.com/gpu in the node's capacity: the device plugin is not running or found no "
          "GPU on the nvidia driver",
          "no passthrough resource (nvidia.com/<PCI device name>): the sandbox device plugin is "
          "not "
          "running, or no GPU is bound to vfio-pci",
          "no vGPU type resource (nvidia.com/NVIDIA_<type>): no vGPU device was created, or the "
          "sandbox device plugin started before they existed"};
      add(n, "mode-resource-missing", Severity::kError,
          std::string(kWhy[static_cast<int>(n.mode)]) + " (mode " + mode + ")",
          "run 'hostprep prepare --mode " + mode + "' on the node, then check the " +
              (n.mode == Mode::kContainer ? "nvidia-device-plugin" : "sandbox device plugin") +
              " pod on it");
    }
    for (const auto* r : mine) {
      const int64_t cap = r->capacity.value_or(0);
      const int64_t alloc = r->allocatable.value_or(0);
      if (alloc == 0) {
        add(n, "allocatable-zero", Severity::kError,
            r->name + " has 0 allocatable" +
                (cap > 0
                     ? " out of " + std::to_string(cap) +
                           " in capacity: every device is "
                           "unhealthy or was taken away from the plugin"
                     : ": the plugin is up but found no device (" +
                           std::string(n.mode == Mode::kVmPassthrough ? "no GPU bound to vfio-pci"
                                       : n.mode == Mode::kVmVgpu      ? "no vGPU device created"
                                                                 : "no GPU on the nvidia driver") +
                           ")"),
            "run 'hostprep prepare --mode " + mode +
                "' on the node and restart the device plugin "
                "there; it counts devices when it starts",
            r->name);
      } else if (r->capacity && cap != alloc) {
        add(n, "capacity-allocatable-mismatch", Severity::kWarning,
            r->name + ": " + std::to_string(cap) + " in capacity but " + std::to_string(alloc) +
                " allocatable: " + std::to_string(std::max<int64_t>(cap - alloc, 0)) +
                " device(s) unhealthy or reserved",
            "check the device plugin's log on the node for unhealthy devices", r->name);
      } else if (!r->capacity) {
        add(n, "capacity-allocatable-mismatch", Severity::kWarning,
            r->name + " is allocatable (" + std::to_string(alloc) + ") but absent from capacity",
            "pass 'kubectl get node -o json' unchanged", r->name);
      }
      if (rawDeviceId(r->name)) {
        add(n, "resource-raw-device-id", Severity::kWarning,
            r->name +
                " is a raw PCI device id: the host's pci.ids does not know this GPU, and the "
                "name will change when pci.ids is updated",
            "update pci.ids on the host (update-pciids, or the hwdata package), restart the "
            "sandbox "
            "device plugin, and ask for the new name in the VM manifests",
            r->name);
      }
    }

    // GPU count against what the mode's plugin shows (vGPU: see checkVgpu).
    if (!n.gpus || mine.empty()) return;
    int64_t total = 0;
    for (const auto* r : mine) total += shown(*r);
    if (n.mode == Mode::kVmPassthrough && total < *n.gpus) {
      add(n, "gpu-count-mismatch", Severity::kWarning,
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
      if (gpu != mine.end() && !mig && !migSingle) {
        int64_t replicas = replicasLabel.value_or(1);
        if (shown(**gpu) < *n.gpus * replicas) {
          add(n, "gpu-count-mismatch", Severity::kWarning,
              "the node has " + plural(*n.gpus, "GPU", "GPUs") + " but advertises only " +
                  std::to_string(shown(**gpu)) + " nvidia.com/gpu",
              "check the nvidia-device-plugin log on the node: some GPUs are not on the nvidia "
              "driver or are unhealthy");
        }
      }
    }
  }
  // Per-node facts for the container count check, set before checkResources.
  bool migSingle = false;
  std::optional<int64_t> replicasLabel;

  // 4. vGPU: nvidia.com/vgpu.config against the advertised types and counts.
  struct Expected {
    std::string type;
    std::optional<int64_t> total;  // nullopt: GPU count unknown
    std::string why;               // "6 per GPU × 2 GPUs, built-in profile table"
  };

  void checkVgpu(NodeResult& n, const Labels& labels, const StatusView* st) {
    auto state = labels.get(kVgpuStateLabel);
    auto label = labels.get(kVgpuConfigLabel);
    const std::string config = label.value_or("default");
    if (state == std::optional<std::string>("failed")) {
      add(n, "vgpu-config-failed", Severity::kError,
          std::string(kVgpuStateLabel) + "=failed: the vgpu-device-manager could not apply '" +
              config + "'",
          "read the nvidia-vgpu-device-manager log on the node; on Ampere and newer enable SR-IOV "
          "VFs first (hostprep prepare --mode vm-vgpu)");
    } else if (state == std::optional<std::string>("pending")) {
      add(n, "vgpu-config-pending", Severity::kWarning,
          std::string(kVgpuStateLabel) + "=pending: '" + config +
              "' is still being applied; the "
              "counts below may be in flux",
          "wait, then run check-node again");
    }

    // What the node advertises, by type.
    std::map<std::string, const ResourceCount*> have;
    for (const auto& r : n.resources) {
      if (r.kind == ResourceKind::kVgpu && advertised(r)) have[*vgpuTypeOf(r.name)] = &r;
    }

    // What the config asks for.
    std::vector<Expected> want;
    std::optional<std::string> unknown;  // why the config could not be resolved
    bool assumedFilter = false;
    const std::string gpusText = n.gpus ? " × " + plural(*n.gpus, "GPU", "GPUs") : std::string();
    auto perGpu = [&](const std::string& type, int64_t count, const std::string& from) {
      auto it =
          std::find_if(want.begin(), want.end(), [&](const Expected& e) { return e.type == type; });
      if (it == want.end()) {
        want.push_back({type, n.gpus ? std::optional<int64_t>(0) : std::nullopt, ""});
        it = want.end() - 1;
      }
      if (it->total && n.gpus) *it->total += count * *n.gpus;
      it->why += (it->why.empty() ? "" : " + ") + std::to_string(count) + " per GPU" + gpusText +
                 ", " + from;
    };
    const std::vector<uint16_t> ids = st ? st->gpuDeviceIds : std::vector<uint16_t>{};
    if (in.vgpuConfigs) {
      const auto* entries = in.vgpuConfigs->find(config);
      if (!entries) {
        add(n, "vgpu-config-unknown", Severity::kError,
            std::string(kVgpuConfigLabel) + "=" + config +
                " names no config in --vgpu-config: the "
                "vgpu-device-manager cannot apply it",
            "use one of the names under vgpu-configs, or add '" + config + "' to the ConfigMap");
        return;
      }
      for (const auto& e : *entries) {
        int64_t gpusMatching = n.gpus.value_or(0);
        if (!e.filters.empty()) {
          if (!ids.empty()) {
            // The node's labels give device ids, not subsystems: a filter's subsystem is not
            // judged.
            gpusMatching = std::count_if(ids.begin(), ids.end(), [&](uint16_t id) {
              return std::any_of(e.filters.begin(), e.filters.end(),
                                 [&](const VgpuDeviceFilter& f) {
                                   return f.device.device == id && f.device.vendor == kNvidiaVendor;
                                 });
            });
            if (gpusMatching == 0) continue;
          } else {
            // The GPU model is unknown: take the entry if the node shows one of its types.
            bool shows = std::any_of(e.vgpuDevices.begin(), e.vgpuDevices.end(),
                                     [&](const auto& t) { return have.count(t.first) != 0; });
            if (!shows) continue;
            assumedFilter = true;
          }
        }
        for (const auto& entry : e.vgpuDevices) {
          const std::string& type = entry.first;
          const auto count = entry.second;
          if (!e.devices) {
            perGpu(type, count, "config '" + config + "' in --vgpu-config");
          } else {
            // Explicit GPU indices: the count is per listed GPU, not per node GPU.
            int64_t listed = static_cast<int64_t>(e.devices->size());
            if (n.gpus)
              listed = std::count_if(e.devices->begin(), e.devices->end(),
                                     [&](int i) { return i < *n.gpus; });
            auto w = std::find_if(want.begin(), want.end(),
                                  [&](const Expected& x) { return x.type == type; });
            if (w == want.end()) {
              want.push_back({type, 0, ""});
              w = want.end() - 1;
            }
            if (w->total) *w->total += count * listed;
            w->why += (w->why.empty() ? "" : " + ") + std::to_string(count) + " per GPU × " +
                      plural(listed, "listed GPU", "listed GPUs") + ", config '" + config +
                      "' in --vgpu-config";
          }
        }
        (void)gpusMatching;
      }
    } else if (config == "default") {
      std::vector<VgpuDefault> defaults;
      if (!ids.empty()) {
        for (uint16_t id : std::set<uint16_t>(ids.begin(), ids.end())) {
          for (const auto& d : vgpuProfiles().defaultsFor({kNvidiaVendor, id}))
            defaults.push_back(d);
        }
      } else {
        for (const auto& d : vgpuProfiles().defaults) {
          if (have.count(d.type)) defaults.push_back(d);
        }
        assumedFilter = !defaults.empty();
      }
      for (const auto& d : defaults) perGpu(d.type, d.count, "the operator's default config");
      if (defaults.empty()) {
        unknown = "the 'default' config depends on the GPU model, which is unknown here";
      }
    } else if (auto max = vgpuProfiles().maxInstances(config)) {
      perGpu(config, *max, "built-in profile table");
    } else {
      unknown =
          "'" + config + "' is neither a vGPU type in the built-in profile table nor 'default'";
    }
    if (unknown) {
      add(n, "vgpu-config-unverified", Severity::kWarning,
          "could not verify " + std::string(kVgpuConfigLabel) + "=" + config + ": " + *unknown,
          "pass the vgpu-device-manager config with --vgpu-config (and the node's status with "
          "--status for its GPU model)");
      return;
    }
    if (assumedFilter) {
      add(n, "vgpu-device-filter-assumed", Severity::kInfo,
          "the GPU model is unknown: assumed every GPU matches the config entries whose types the "
          "node advertises",
          "pass the node's hostprep status document with --status to check by device id");
    }

    // Types: exactly the configured ones, no others.
    std::vector<std::string> extra, absent;
    for (const auto& [haveType, r] : have) {
      const std::string& type = haveType;
      if (std::none_of(want.begin(), want.end(),
                       [&](const Expected& e) { return e.type == type; })) {
        extra.push_back(r->name + " (" + std::to_string(shown(*r)) + ")");
      }
    }
    for (const auto& e : want) {
      if (!have.count(e.type)) absent.push_back(e.type);
    }
    if (!have.empty() && (!extra.empty() || !absent.empty())) {
      std::vector<std::string> wanted;
      for (const auto& e : want) wanted.push_back(e.type);
      add(n, "vgpu-type-mismatch", Severity::kError,
          std::string(kVgpuConfigLabel) + "=" + config + " asks for " + join(wanted, ", ") +
              (extra.empty() ? std::string() : ", but the node advertises " + join(extra, ", ")) +
              (absent.empty()
                   ? std::string()
                   : (extra.empty() ? ", but " : "; ") + join(absent, ", ") + " not advertised"),
          "the devices were created for another config, or the sandbox device plugin still shows "
          "the old ones: check " +
              std::string(kVgpuStateLabel) +
              " and restart the sandbox device "
              "plugin on the node");
    }
    // Counts.
    bool countUnknown = false;
    for (const auto& e : want) {
      auto h = have.find(e.type);
      if (h == have.end()) continue;
      if (!e.total) {
        countUnknown = true;
        continue;
      }
      const int64_t got = shown(*h->second);
      if (got != *e.total) {
        add(n, "vgpu-count-mismatch", Severity::kError,
            "advertises " + std::to_string(got) + " × " + h->second->name + ", but " +
                std::string(kVgpuConfigLabel) + "=" + config + " on " +
                plural(*n.gpus, "GPU", "GPUs") + " must give " + std::to_string(*e.total) + " (" +
                e.why + ")",
            "check " + std::string(kVgpuStateLabel) +
                " and the vgpu-device-manager log; on Ampere "
                "and newer each vGPU needs its own SR-IOV VF (hostprep prepare --mode vm-vgpu "
                "enables "
                "them); the sandbox device plugin counts devices only when it starts, so restart "
                "it "
                "after the devices exist",
            h->second->name);
      }
    }
    if (countUnknown) {
      add(n, "gpu-count-unknown", Severity::kInfo,
          "the vGPU count was not checked: the node has no " + std::string(kGpuCountLabel) +
              " label and no --status document",
          "pass the node's hostprep status document with --status");
    }
  }

  // 5. The host's status document against the node object.
  void checkStatus(NodeResult& n, const StatusView& st) {
    if (st.actualMode && parseMode(*st.actualMode) && *parseMode(*st.actualMode) != n.mode) {
      add(n, "status-mode-mismatch", Severity::kError,
          "the host is prepared for " + *st.actualMode + " (" + st.source +
              ") but the cluster "
              "treats the node as " +
              std::string(toString(n.mode)) + " (" + std::string(toString(n.modeSource)) + ")",
          "make the label and the host agree: relabel the node, or run 'hostprep prepare --mode " +
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
      std::string fix =
          c.first > c.second
              ? "the device plugin has not counted what the host prepared: restart it "
                "on the node (the sandbox device plugin scans only at start)"
              : "the node shows devices the host no longer has for this mode (a stale "
                "plugin registration): restart the device plugin on the node";
      add(n, "status-advertised-mismatch", Severity::kError,
          "the host expects " + std::to_string(c.first) + " × " + name + " (" + st.source +
              ") but the node shows " + std::to_string(c.second) + " allocatable",
          fix, name);
    }
  }

  // 6. KubeVirt: every sandbox resource permitted, external, with a matching selector.
  void checkKubeVirt() {
    auto& kv = *kubevirt;
    bool anySandbox = false, anyVgpu = false;
    std::set<std::string> unverified;
    for (auto& n : report.nodes) {
      const StatusView* st = statusFor(n.name);
      for (const auto& r : n.resources) {
        if ((r.kind != ResourceKind::kPassthrough && r.kind != ResourceKind::kVgpu) ||
            !advertised(r))
          continue;
        anySandbox = true;
        anyVgpu = anyVgpu || r.kind == ResourceKind::kVgpu;
        const bool mediated = r.kind == ResourceKind::kVgpu;
        const char* list = mediated ? "mediatedDevices" : "pciHostDevices";
        HostDeviceEntry* e = kv.find(r.name);
        if (!e) {
          add(n, "kubevirt-not-permitted", Severity::kError,
              r.name + " is advertised but not in the KubeVirt CR's permittedHostDevices." + list +
                  " (" + kv.source + "): VMs asking for it are rejected",
              mediated
                  ? "add {mdevNameSelector: \"" + spaced(r.name) + "\", resourceName: " + r.name +
                        ", externalResourceProvider: true} under spec.configuration."
                        "permittedHostDevices.mediatedDevices"
                  : "add {pciVendorSelector: \"10DE:<device id>\", resourceName: " + r.name +
                        ", externalResourceProvider: true} under spec.configuration."
                        "permittedHostDevices.pciHostDevices",
              r.name);
          continue;
        }
        e->advertised = true;
        if (e->mediated != mediated) {
          add(n, "kubevirt-wrong-list", Severity::kError,
              r.name + " is a " + std::string(kindWord(r.kind)) +
                  " resource but KubeVirt lists it under " +
                  (e->mediated ? "mediatedDevices" : "pciHostDevices"),
              std::string("move the entry to permittedHostDevices.") + list, r.name);
          continue;
        }
        if (!e->external) {
          add(n, "kubevirt-not-external", Severity::kError,
              "KubeVirt permits " + r.name + " (" + list +
                  ") without externalResourceProvider: "
                  "true: KubeVirt runs its own device plugin for it, which competes with the "
                  "sandbox "
                  "device plugin for the same resource name",
              "set externalResourceProvider: true on the " + r.name + " entry in " + kv.source,
              r.name);
        }
        if (mediated) {
          if (!e->selector || underscored(*e->selector) != r.name.substr(kResourcePrefix.size())) {
            add(n, "kubevirt-selector-mismatch", Severity::kError,
                "mdevNameSelector " +
                    (e->selector ? "'" + *e->selector + "'" : std::string("(missing)")) +
                    " does not match " + r.name + ": the mdev type name is '" + spaced(r.name) +
                    "'",
                "set mdevNameSelector: \"" + spaced(r.name) + "\"", r.name);
          }
          continue;
        }
        // PCI: "10DE:2236". The device id is known from a raw-id name or the node's status.
        auto sel = e->selector ? parsePciId(*e->selector) : std::nullopt;
        if (!sel) {
          add(n, "kubevirt-selector-mismatch", Severity::kError,
              "pciVendorSelector " +
                  (e->selector ? "'" + *e->selector + "'" : std::string("(missing)")) + " of " +
                  r.name + " is not VVVV:DDDD",
              "set pciVendorSelector: \"10DE:<device id>\" (lspci -nn on the node)", r.name);
          continue;
        }
        std::optional<uint16_t> device = rawDeviceId(r.name);
        if (!device && st) device = deviceOf(*st, r.name);
        if (sel->vendor != kNvidiaVendor || (device && sel->device != *device)) {
          char want[16];
          std::snprintf(want, sizeof want, "10DE:%04X",
                        static_cast<unsigned>(device.value_or(sel->device)));
          add(n, "kubevirt-selector-mismatch", Severity::kError,
              "pciVendorSelector '" + *e->selector + "' of " + r.name +
                  " does not match the device " +
                  (device ? std::string(want) : std::string("(vendor must be 10DE)")) +
                  ": KubeVirt will not hand this device to VMs",
              "set pciVendorSelector: \"" + std::string(want) + "\"", r.name);
        } else if (!device) {
          unverified.insert(r.name);
        }
      }
    }
    for (const auto& name : unverified) {
      const auto* e = kv.find(name);
      addCluster("kubevirt-selector-unverified", Severity::kInfo, kv.source,
                 "could not verify pciVendorSelector '" + e->selector.value_or("") + "' of " +
                     name + ": no --status document of a node advertising it gives the device id",
                 "pass the nodes' hostprep status documents with --status", name);
    }
    if ((anySandbox || !kv.entries.empty()) && !kv.gate("GPU")) {
      addCluster("kubevirt-gpu-gate-missing", Severity::kError, kv.source,
                 "the KubeVirt CR lacks the feature gate GPU: VMs cannot ask for host GPUs",
                 "add GPU to spec.configuration.developerConfiguration.featureGates");
    }
    if (anyVgpu && !kv.gate("DisableMDEVConfiguration")) {
      addCluster(
          "kubevirt-mdev-gate-missing", Severity::kWarning, kv.source,
          "vGPU nodes exist but the KubeVirt CR lacks the feature gate "
          "DisableMDEVConfiguration: KubeVirt may create or remove mdevs itself, against "
          "the vgpu-device-manager",
          "add DisableMDEVConfiguration to spec.configuration.developerConfiguration.featureGates");
    }
    for (const auto& e : kv.entries) {
      if (e.advertised) continue;
      addCluster("kubevirt-permitted-unused", Severity::kInfo, kv.source,
                 "KubeVirt permits " + e.resource + " but no node advertises it",
                 "fine if such nodes come later; otherwise check the resource name", e.resource);
    }
  }

  static std::string spaced(std::string_view resource) {
    std::string s(resource.substr(kResourcePrefix.size()));
    std::replace(s.begin(), s.end(), '_', ' ');
    return s;
  }
  static std::string underscored(std::string_view selector) {
    // The plugin's rule for mdev type names: whitespace runs to '_'.
    return vgpuResourceName(selector).substr(kResourcePrefix.size());
  }

  static std::optional<uint16_t> deviceOf(const StatusView& st, const std::string& resource) {
    if (auto it = st.resourceDevice.find(resource); it != st.resourceDevice.end())
      return it->second;
    // One passthrough resource and one GPU model on the node: they are the same device.
    int pt = 0;
    bool listed = false;
    for (const auto& [name, c] : st.advertised) {
      if (classifyResource(name) == ResourceKind::kPassthrough && c > 0) {
        ++pt;
        listed = listed || name == resource;
      }
    }
    std::set<uint16_t> ids(st.gpuDeviceIds.begin(), st.gpuDeviceIds.end());
    if (pt == 1 && listed && ids.size() == 1) return *ids.begin();
    return std::nullopt;
  }

  std::unordered_map<std::string, StatusView*> statusByNode;
  const StatusView* statusFor(const std::string& node) const {
    auto it = statusByNode.find(node);
    return it == statusByNode.end() ? nullptr : it->second;
  }

  void run(const std::vector<NodeDoc>& docs);
  void checkWorkloads();
};

void Checker::run(const std::vector<NodeDoc>& docs) {
  for (auto& s : statuses) statusByNode.emplace(s.node, &s);
  report.nodes.reserve(docs.size());
  unschedulable.reserve(docs.size());
  for (const auto& d : docs) {
    const json& body = *d.body;
    NodeResult n;
    n.name = at(body, {"metadata", "name"})->get<std::string>();
    n.source = d.source;
    if (nodeIndex.count(n.name)) {
      addCluster("node-duplicate", Severity::kWarning, d.source,
                 "node " + n.name + " appears twice; the first one (" +
                     report.nodes[nodeIndex[n.name]].source + ") is checked",
                 "pass each node once");
      continue;
    }
    Labels labels(at(body, {"metadata", "labels"}));
    std::vector<Finding> bad;
    addResources(n, at(body, {"status", "capacity"}), true, bad);
    addResources(n, at(body, {"status", "allocatable"}), false, bad);
    std::sort(n.resources.begin(), n.resources.end(),
              [](const ResourceCount& a, const ResourceCount& b) { return a.name < b.name; });
    const json* cordon = at(body, {"spec", "unschedulable"});
    unschedulable.push_back(
        cordon && scalarText(*cordon) == std::optional<std::string>("true") ? "cordoned" : "");

    StatusView* st = statusByNode.count(n.name) ? statusByNode[n.name] : nullptr;
    if (st) st->used = true;
    auto countLabel = labels.get(kGpuCountLabel);
    if (st && st->gpus) {
      n.gpus = *st->gpus;
    } else if (countLabel) {
      if (auto c = parseUnsigned(*countLabel); c && *c < 4096) n.gpus = static_cast<int>(*c);
    }

    bool gpuNode =
        std::any_of(n.resources.begin(), n.resources.end(),
                    [](const ResourceCount& r) { return r.kind != ResourceKind::kOther; }) ||
        labels.get(kGpuPresentLabel) == std::optional<std::string>("true") ||
        labels.get(kWorkloadLabel) || (n.gpus && *n.gpus > 0) || st;
    n.hasGpus = gpuNode;
    n.findings = std::move(bad);
    if (gpuNode) {
      decideMode(n, labels);
      checkDeployLabels(n, labels);
      migSingle = labels.get(kMigStrategyLabel) == std::optional<std::string>("single");
      replicasLabel.reset();
      if (auto r = labels.get(kGpuReplicasLabel)) {
        if (auto v = parseUnsigned(*r); v && *v > 0 && *v < 1024)
          replicasLabel = static_cast<int64_t>(*v);
      }
      checkResources(n);
      if (n.mode == Mode::kVmVgpu) checkVgpu(n, labels, st);
      if (st) checkStatus(n, *st);
    }
    nodeIndex.emplace(n.name, report.nodes.size());
    report.nodes.push_back(std::move(n));
  }
  for (const auto& s : statuses) {
    if (!s.used) {
      addCluster("status-node-unknown", Severity::kWarning, s.source,
                 "status document of node " + s.node + " matches no node in the input",
                 "pass that node's 'kubectl get node' output too, or check the node name");
    }
  }
}

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

void Checker::checkWorkloads() {
  // Which nodes advertise what.
  std::map<std::string, std::vector<size_t>> offering;
  std::vector<size_t> sandboxNodes;
  for (size_t i = 0; i < report.nodes.size(); ++i) {
    const auto& n = report.nodes[i];
    bool sandbox = false;
    for (const auto& r : n.resources) {
      if (r.kind == ResourceKind::kOther || !advertised(r)) continue;
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
            advertised(r))
          res.insert(r.name);
      }
    }
    return "the GPUs are on sandbox nodes (" + nameList(parts) + "), which advertise " +
           join(std::vector<std::string>(res.begin(), res.end()), ", ") +
           " and never nvidia.com/gpu";
  };

  std::vector<Request> requests;
  for (const auto& d : expandLists(in.workloads)) {
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
      addCluster("workload-ignored", Severity::kInfo, d.source,
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
      addCluster(
          "request-wrong-kind", Severity::kError, rq.workload,
          rq.workload + " asks for " + R +
              " as a VM device: that is the container resource "
              "(device nodes for containers, not a PCI device); a VM needs a passthrough or vGPU "
              "resource",
          "ask for the sandbox resource a vm-passthrough or vm-vgpu node advertises", R);
      continue;
    }
    auto it = offering.find(R);
    if (it == offering.end()) {
      if (wantsGpu && !sandboxNodes.empty()) {
        addCluster("request-gpu-only-sandbox", Severity::kError, rq.workload,
                   rq.workload + " asks for " + R +
                       ": will stay Pending forever: no node "
                       "advertises " +
                       R + "; " + sandboxSentence(),
                   "label a node container (nvidia.com/gpu.workload.config=container, then "
                   "'hostprep prepare --mode container' there), or run the workload as a VM",
                   R);
      } else {
        addCluster(
            "request-unsatisfiable", Severity::kError, rq.workload,
            rq.workload + " asks for " + R +
                ": will stay Pending forever: no node "
                "advertises " +
                R + "; " + everything(),
            "ask for a name a node advertises (keep model-specific names in one place, a "
            "Helm value or kustomize patch), or add a node with this GPU in the matching mode",
            R);
      }
    } else {
      int64_t best = 0;
      std::string bestNode;
      int cordoned = 0;
      bool fits = false;
      for (size_t i : it->second) {
        const auto& n = report.nodes[i];
        auto r = std::find_if(n.resources.begin(), n.resources.end(),
                              [&](const ResourceCount& x) { return x.name == R; });
        int64_t a = r->allocatable.value_or(0);
        if (!unschedulable[i].empty()) {
          ++cordoned;
          continue;
        }
        if (a >= rq.count) fits = true;
        if (a > best) best = a, bestNode = n.name;
      }
      if (!fits) {
        bool sandboxFree =
            wantsGpu && std::any_of(sandboxNodes.begin(), sandboxNodes.end(),
                                    [&](size_t i) { return unschedulable[i].empty(); });
        std::string why = "no schedulable node has " + std::to_string(rq.count) +
                          " allocatable; the most is " + std::to_string(best) +
                          (bestNode.empty() ? "" : " (" + bestNode + ")") +
                          (cordoned ? ", " + plural(cordoned, "node", "nodes") + " cordoned" : "");
        if (sandboxFree) {
          addCluster("request-gpu-only-sandbox", Severity::kError, rq.workload,
                     rq.workload + " asks for " + std::to_string(rq.count) + " × " + R + ": " +
                         why + "; the other " + sandboxSentence(),
                     "free container GPUs (uncordon, fix the device plugin), or move a node to "
                     "container mode",
                     R);
        } else {
          addCluster("request-unsatisfiable", Severity::kError, rq.workload,
                     rq.workload + " asks for " + std::to_string(rq.count) + " × " + R + ": " + why,
                     "ask for fewer devices, uncordon nodes, or fix the nodes' allocatable", R);
        }
      }
    }
    if (rq.vm && kubevirt && !kubevirt->find(R)) {
      addCluster("request-not-permitted", Severity::kError, rq.workload,
                 rq.workload + " asks for " + R +
                     ", which the KubeVirt CR does not list in "
                     "permittedHostDevices (" +
                     kubevirt->source + "): the VM is rejected",
                 "add " + R + " to permittedHostDevices with externalResourceProvider: true", R);
    }
  }
}

}  // namespace

Result<CheckNodeReport> checkNodes(const CheckNodeInput& in) {
  Checker c(in);
  auto policy = readPolicy(in.clusterPolicy, c.report.clusterFindings);
  if (!policy) return policy.error();
  c.policy = *policy;
  c.report.policy = c.policy.view;
  auto statuses = readStatuses(in.statuses);
  if (!statuses) return statuses.error();
  c.statuses = std::move(*statuses);
  auto kv = readKubeVirt(in.kubevirt);
  if (!kv) return kv.error();
  c.kubevirt = std::move(*kv);
  auto docs = collectNodes(in.nodes);
  if (!docs) return docs.error();

  // The assumption, said out loud when there is no ClusterPolicy.
  c.run(*docs);
  if (!in.clusterPolicy) {
    bool sandboxLabels =
        std::any_of(c.report.nodes.begin(), c.report.nodes.end(),
                    [](const NodeResult& n) { return n.label && *n.label != "container"; });
    c.addCluster("cluster-policy-assumed", sandboxLabels ? Severity::kWarning : Severity::kInfo, "",
                 "no --cluster-policy: assumed sandboxWorkloads.enabled=true and defaultWorkload="
                 "container, so each label is taken at its word; with the operator's default "
                 "(enabled=false) every node is prepared for containers and the labels are ignored",
                 "pass 'kubectl get clusterpolicies -o json' with --cluster-policy to check");
  }
  if (c.kubevirt) c.checkKubeVirt();
  if (!in.workloads.empty()) c.checkWorkloads();
  return std::move(c.report);
}

// -----------------------------------------------------------------------------------------------
// Output.

namespace {

json findingJson(const Finding& f) {
  json j{{"id", f.id},
         {"severity", std::string(toString(f.severity))},
         {"node", f.node.empty() ? json(nullptr) : json(f.node)},
         {"message", f.message},
         {"fix", f.fix}};
  j["resource"] = f.resource.empty() ? json(nullptr) : json(f.resource);
  j["subject"] = f.subject.empty() ? json(nullptr) : json(f.subject);
  return j;
}

std::string nodeState(const NodeResult& n) {
  if (n.count(Severity::kError)) return "error";
  if (n.count(Severity::kWarning)) return "warning";
  return "ok";
}

}  // namespace

json reportJson(const CheckNodeReport& r) {
  json j;
  j["schema"] = "hostprep.check-node/v1";
  j["ok"] = r.exitCode() == 0;
  j["policy"] = {{"given", r.policy.given},
                 {"source", r.policy.given ? json(r.policy.source) : json(nullptr)},
                 {"sandbox_workloads_enabled", r.policy.sandboxEnabled},
                 {"default_workload", std::string(toString(r.policy.defaultWorkload))}};
  int ok = 0, warn = 0, err = 0, nogpu = 0;
  json nodes = json::array();
  json findings = json::array();
  for (const auto& n : r.nodes) {
    auto state = nodeState(n);
    (state == "error" ? err : state == "warning" ? warn : ok)++;
    nogpu += n.hasGpus ? 0 : 1;
    json res = json::object();
    for (const auto& rc : n.resources) {
      res[rc.name] = {{"kind", std::string(toString(rc.kind))},
                      {"capacity", rc.capacity ? json(*rc.capacity) : json(nullptr)},
                      {"allocatable", rc.allocatable ? json(*rc.allocatable) : json(nullptr)}};
    }
    nodes.push_back(
        {{"name", n.name},
         {"source", n.source},
         {"has_gpus", n.hasGpus},
         {"mode", n.hasGpus ? json(std::string(toString(n.mode))) : json(nullptr)},
         {"mode_source", n.hasGpus ? json(std::string(toString(n.modeSource))) : json(nullptr)},
         {"label", n.label ? json(*n.label) : json(nullptr)},
         {"gpus", n.gpus ? json(*n.gpus) : json(nullptr)},
         {"resources", std::move(res)},
         {"state", state}});
    for (const auto& f : n.findings) findings.push_back(findingJson(f));
  }
  for (const auto& f : r.clusterFindings) findings.push_back(findingJson(f));
  j["summary"] = {{"nodes", r.nodes.size()},
                  {"ok", ok},
                  {"with_warnings", warn},
                  {"with_errors", err},
                  {"without_gpus", nogpu},
                  {"errors", r.count(Severity::kError)},
                  {"warnings", r.count(Severity::kWarning)},
                  {"infos", r.count(Severity::kInfo)}};
  j["nodes"] = std::move(nodes);
  j["findings"] = std::move(findings);
  return j;
}

std::string summaryLine(const CheckNodeReport& r) {
  int ok = 0, warn = 0, err = 0;
  for (const auto& n : r.nodes) {
    auto s = nodeState(n);
    (s == "error" ? err : s == "warning" ? warn : ok)++;
  }
  std::string line = plural(static_cast<int64_t>(r.nodes.size()), "node", "nodes") + ", " +
                     std::to_string(ok) + " ok";
  if (warn) line += ", " + std::to_string(warn) + " with warnings";
  if (err) line += ", " + std::to_string(err) + " with errors";
  int clusterErr = 0;
  for (const auto& f : r.clusterFindings) clusterErr += f.severity == Severity::kError ? 1 : 0;
  if (clusterErr) line += "; " + plural(clusterErr, "cluster error", "cluster errors");
  return line;
}

std::string reportText(const CheckNodeReport& r) {
  std::ostringstream s;
  s << "policy: sandbox workloads " << (r.policy.sandboxEnabled ? "enabled" : "disabled")
    << ", default workload " << toString(r.policy.defaultWorkload) << " ("
    << (r.policy.given ? "from " + r.policy.source : std::string("assumed: no --cluster-policy"))
    << ")\n";
  auto print = [&](const Finding& f) {
    s << "  " << toString(f.severity) << " " << f.id << ": " << f.message << "\n"
      << "    fix: " << f.fix << "\n";
  };
  for (const auto& n : r.nodes) {
    s << n.name << ": ";
    if (!n.hasGpus) {
      s << "no GPU\n";
    } else {
      s << toString(n.mode);
      switch (n.modeSource) {
        case ModeSource::kLabel:
          s << " (label)";
          break;
        case ModeSource::kDefault:
          s << " (no label: default workload)";
          break;
        case ModeSource::kInvalidLabel:
          s << " (invalid label: default workload)";
          break;
        case ModeSource::kSandboxDisabled:
          s << " (sandbox workloads disabled)";
          break;
      }
      if (n.gpus) s << ", " << plural(*n.gpus, "GPU", "GPUs");
      int e = n.count(Severity::kError), w = n.count(Severity::kWarning);
      if (e == 0 && w == 0) {
        s << ": ok\n";
      } else {
        s << ": ";
        if (e) s << plural(e, "error", "errors") << (w ? ", " : "");
        if (w) s << plural(w, "warning", "warnings");
        s << "\n";
      }
    }
    for (const auto& f : n.findings) print(f);
  }
  if (!r.clusterFindings.empty()) {
    s << "cluster:\n";
    for (const auto& f : r.clusterFindings) print(f);
  }
  s << summaryLine(r) << "\n";
  return s.str();
}

}  // namespace hostprep
