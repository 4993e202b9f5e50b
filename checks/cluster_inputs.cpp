#include "checks/cluster_inputs.hpp"

#include <algorithm>

#include "checks/findings.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {

using nlohmann::json;

namespace {

// The object of `kind` in doc: doc itself, or the first of that kind in a List's items. A list
// without one is a usage error advising `listHint`, a document of another kind one advising
// `kindHint`.
Result<const json*> objectOfKind(const Document& doc, std::string_view kind, std::string_view what,
                                 const std::string& listHint, const std::string& kindHint) {
  const json* o = &doc.body;
  if (const json* items = at(*o, {"items"}); items && items->is_array()) {
    auto it = std::find_if(items->begin(), items->end(),
                           [&](const json& i) { return kindOf(i) == kind; });
    if (it == items->end()) {
      return usageError(doc.source + ": no " + std::string(kind) + " in the list", listHint);
    }
    o = &*it;
  }
  auto k = kindOf(*o);
  if (!k.empty() && k != kind) {
    return usageError(doc.source + ": a " + k + ", not a " + std::string(what), kindHint);
  }
  return o;
}

// A value in a message: JSON text, invalid UTF-8 in its strings replaced (dump() would throw).
std::string printed(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool isTrue(const json* v) { return v && scalarText(*v) == std::optional<std::string>("true"); }

std::optional<uint16_t> hexId(const json& v) {
  auto t = scalarText(v);
  if (!t) return std::nullopt;
  auto n = parseUnsigned(*t, 16);
  if (!n || *n > 0xffff) return std::nullopt;
  return static_cast<uint16_t>(*n);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ClusterPolicy

std::string Policy::ref() const {
  return view.given ? "the ClusterPolicy " + name + " (" + view.source + ")"
                    : std::string("the ClusterPolicy");
}

Result<Policy> readPolicy(const std::optional<Document>& doc, std::vector<Finding>& cluster) {
  Policy p;
  if (!doc) return p;
  const std::string hint = "pass 'kubectl get clusterpolicies -o json'";
  auto cp = objectOfKind(*doc, "ClusterPolicy", "ClusterPolicy", hint, hint);
  if (!cp) return cp.error();
  p.view.given = true;
  p.view.source = doc->source;
  p.view.sandboxEnabled = false;  // the operator's default
  if (const json* n = at(**cp, {"metadata", "name"}); n && n->is_string())
    p.name = n->get<std::string>();
  // The operator's own agents for VM nodes; enabled unless the policy says false (their
  // defaults in NVIDIA/gpu-operator's Helm values: vfioManager.enabled and
  // vgpuDeviceManager.enabled true).
  if (const json* e = at(**cp, {"spec", "vfioManager", "enabled"}))
    p.view.vfioManagerEnabled = isTrue(e);
  if (const json* e = at(**cp, {"spec", "vgpuDeviceManager", "enabled"}))
    p.view.vgpuDeviceManagerEnabled = isTrue(e);
  const json* sw = at(**cp, {"spec", "sandboxWorkloads"});
  if (!sw || !sw->is_object()) return p;
  if (const json* e = at(*sw, {"enabled"})) p.view.sandboxEnabled = isTrue(e);
  if (const json* d = at(*sw, {"defaultWorkload"}); d && !d->is_null()) {
    auto t = scalarText(*d).value_or("");
    if (auto m = parseMode(t)) {
      p.view.defaultWorkload = *m;
    } else {
      addClusterFinding(cluster, "cluster-policy-default-invalid", Severity::kError, doc->source,
                        "ClusterPolicy " + p.name + " has sandboxWorkloads.defaultWorkload '" + t +
                            "', which is not a mode; the operator falls back to container",
                        "set it to one of " + std::string(kModeChoices));
    }
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Status documents

const StatusView* Statuses::find(const std::string& node) const {
  auto it = byNode.find(node);
  return it == byNode.end() ? nullptr : &all[it->second];
}

namespace {

// A member under its name in agent/status.schema.json ("nodeName"), else under the name this
// reader first took ("node"); nullptr when neither is there.
const json* member(const json& o, std::string_view name, std::string_view legacy) {
  const json* v = at(o, {name});
  return v ? v : at(o, {legacy});
}

// The drivers a device moved to passthrough sits on: vfio-pci, and the variant driver of Grace
// Hopper/Blackwell superchips (Linux drivers/vfio/pci/nvgrace-gpu).
bool isVfioDriver(std::string_view d) { return d == "vfio-pci" || d == "nvgrace_gpu_vfio_pci"; }

Result<StatusView> readStatus(const std::string& source, const json& o) {
  const json* node = member(o, "nodeName", "node");
  if (!node || !node->is_string() || node->get<std::string>().empty()) {
    return usageError(source + ": not a hostprep status document: no \"nodeName\"",
                      "pass the file written by 'hostprep status --output json' on each node");
  }
  StatusView s;
  s.source = source;
  s.node = node->get<std::string>();
  if (const json* m = member(o, "actualMode", "actual_mode")) {
    if (auto t = scalarText(*m)) s.actualMode = parseMode(*t);
  }
  if (const json* adv = at(o, {"advertised"}); adv && adv->is_object()) {
    s.hasAdvertised = true;
    for (const auto& [name, n] : adv->items()) {
      auto c = parseCount(n);
      if (!c) {
        return usageError(source + ": advertised." + name + ": '" + printed(n) + "' is not a count",
                          "pass the file written by 'hostprep status --output json'");
      }
      s.advertised.emplace_back(name, *c);
    }
  }
  // The KubeVirt entries the host computed (agent/status.schema.json permittedHostDevices); an
  // entry of the wrong shape is skipped, as a field of the wrong type reads as absent.
  auto entries = [&](std::string_view list, std::string_view selectorKey, auto&& add) {
    const json* l = at(o, {"permittedHostDevices", list});
    if (!l || !l->is_array()) return;
    for (const auto& e : *l) {
      const json* name = at(e, {"resourceName"});
      const json* sel = at(e, {selectorKey});
      if (!name || !name->is_string() || !sel || !sel->is_string()) continue;
      add(name->get<std::string>(), sel->get_ref<const std::string&>());
    }
  };
  entries("pciHostDevices", "pciVendorSelector", [&](std::string name, const std::string& sel) {
    if (auto id = parsePciId(sel)) s.permittedPci.emplace(std::move(name), *id);
  });
  entries("mediatedDevices", "mdevNameSelector", [&](std::string name, const std::string& sel) {
    if (!sel.empty()) s.permittedMdev.emplace(std::move(name), sel);
  });
  if (const json* cs = at(o, {"conditions"}); cs && cs->is_array()) {
    for (const auto& c : *cs) {
      const json* type = at(c, {"type"});
      const json* status = at(c, {"status"});
      if (!type || !status ||
          scalarText(*type) != std::optional<std::string>("DevicesResponsive") ||
          scalarText(*status) != std::optional<std::string>("False"))
        continue;
      const json* m = at(c, {"message"});
      s.notResponding = m && m->is_string() ? m->get<std::string>() : std::string();
    }
  }
  const json* devs = at(o, {"devices"});
  if (!devs || !devs->is_array()) return s;
  int gpus = 0;
  for (const auto& dev : *devs) {
    if (!dev.is_object()) continue;
    const json* role = at(dev, {"role"});
    const json* vendor = member(dev, "vendorId", "vendor");
    const json* device = member(dev, "deviceId", "device");
    std::optional<uint16_t> v, id;
    if (vendor) v = hexId(*vendor);
    if (device) id = hexId(*device);
    if (role && scalarText(*role) == std::optional<std::string>("gpu")) {
      ++gpus;
      if (id && (!v || *v == kNvidiaVendor)) s.gpuDeviceIds.push_back(*id);
    }
    const json* bdf = at(dev, {"bdf"});
    const json* driver = at(dev, {"driver"});
    if (bdf && bdf->is_string() && driver && driver->is_string() &&
        isVfioDriver(driver->get_ref<const std::string&>())) {
      if (auto b = parseBdf(bdf->get_ref<const std::string&>())) s.vfioDevices.push_back(*b);
    }
    if (const json* r = at(dev, {"responsive"});
        r && r->is_boolean() && !r->get<bool>() && bdf && bdf->is_string()) {
      if (auto b = parseBdf(bdf->get_ref<const std::string&>())) {
        const json* ps = at(dev, {"powerState"});
        s.unresponsiveBdfs.push_back(*b);
        s.unresponsive.push_back(b->str() + (ps && ps->is_string()
                                                 ? " (" + ps->get<std::string>() + ")"
                                                 : std::string()));
      }
    }
  }
  s.gpus = gpus;
  return s;
}

}  // namespace

Result<Statuses> readStatuses(const std::vector<Document>& docs) {
  Statuses out;
  for (const auto& d : expandLists(docs)) {
    std::vector<std::pair<std::string, const json*>> objs;
    if (d.body.is_array()) {
      for (size_t i = 0; i < d.body.size(); ++i)
        objs.emplace_back(d.source + " [" + std::to_string(i) + "]", &d.body[i]);
    } else {
      objs.emplace_back(d.source, &d.body);
    }
    for (const auto& [source, o] : objs) {
      auto s = readStatus(source, *o);
      if (!s) return s.error();
      out.byNode.emplace(s->node, out.all.size());
      out.all.push_back(std::move(*s));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// KubeVirt CR

const HostDeviceEntry* KubeVirtView::find(std::string_view resource) const {
  auto it = std::find_if(entries.begin(), entries.end(),
                         [&](const HostDeviceEntry& e) { return e.resource == resource; });
  return it == entries.end() ? nullptr : &*it;
}

bool KubeVirtView::gate(std::string_view g) const {
  return std::find(gates.begin(), gates.end(), g) != gates.end();
}

Result<std::optional<KubeVirtView>> readKubeVirt(const std::optional<Document>& doc) {
  if (!doc) return std::optional<KubeVirtView>();
  auto kv = objectOfKind(*doc, "KubeVirt", "KubeVirt CR", "pass 'kubectl get kubevirt -A -o json'",
                         "pass 'kubectl get kubevirt -n kubevirt kubevirt -o json'");
  if (!kv) return kv.error();
  KubeVirtView v;
  v.source = doc->source;
  if (const json* n = at(**kv, {"metadata", "name"}); n && n->is_string())
    v.name = n->get<std::string>();
  if (const json* n = at(**kv, {"metadata", "namespace"}); n && n->is_string())
    v.namespace_ = n->get<std::string>();
  const json* config = at(**kv, {"spec", "configuration"});
  if (!config) return std::optional<KubeVirtView>(std::move(v));
  if (const json* g = at(*config, {"developerConfiguration", "featureGates"}); g && g->is_array()) {
    for (const auto& x : *g) {
      if (auto t = scalarText(x)) v.gates.push_back(*t);
    }
  }
  if (const json* mdc = at(*config, {"mediatedDevicesConfiguration"}); mdc && !mdc->is_null()) {
    v.mdevConfig.emplace();
    if (mdc->is_object()) {
      for (const auto& [key, value] : mdc->items()) v.mdevConfig->push_back(key);
    }
  }
  const json* phd = at(*config, {"permittedHostDevices"});
  auto readList = [&](const char* key, bool mediated, const char* selectorKey) {
    const json* list = phd ? at(*phd, {key}) : nullptr;
    if (!list || !list->is_array()) return;
    (mediated ? v.mediatedDevices : v.pciHostDevices) = *list;
    for (const auto& e : *list) {
      const json* rn = at(e, {"resourceName"});
      if (!rn || !rn->is_string()) continue;
      HostDeviceEntry h;
      h.resource = rn->get<std::string>();
      h.mediated = mediated;
      h.external = isTrue(at(e, {"externalResourceProvider"}));
      if (const json* s = at(e, {selectorKey})) h.selector = scalarText(*s);
      v.entries.push_back(std::move(h));
    }
  };
  readList("pciHostDevices", false, "pciVendorSelector");
  readList("mediatedDevices", true, "mdevNameSelector");
  return std::optional<KubeVirtView>(std::move(v));
}

// ---------------------------------------------------------------------------------------------
// Nodes

namespace {

// A node input's item that is not a named Node: not an object, of another kind, or unnamed.
Error notANode(const std::string& source, bool object, const std::string& kind) {
  if (!object || (!kind.empty() && kind != "Node")) {
    return usageError(source + ": " + (kind.empty() ? std::string("not an object") : "a " + kind) +
                          ", not a Node",
                      "pass 'kubectl get nodes -o json' or 'kubectl get node NAME -o json'");
  }
  return usageError(source + ": a Node without metadata.name",
                    "pass 'kubectl get nodes -o json' unchanged");
}

}  // namespace

Result<std::vector<NodeDoc>> collectNodes(const std::vector<Document>& docs) {
  std::vector<NodeDoc> out;
  auto take = [&](const json& item, std::string source) -> Status {
    auto kind = kindOf(item);
    const json* name = at(item, {"metadata", "name"});
    if (!item.is_object() || (!kind.empty() && kind != "Node") || !name || !name->is_string() ||
        name->get<std::string>().empty()) {
      return notANode(source, item.is_object(), kind);
    }
    out.push_back({&item, std::move(source)});
    return {};
  };
  for (const auto& d : docs) {
    if (d.items) {
      if (const auto& bad = d.items->firstBad()) {
        return notANode(d.source + " (item " + std::to_string(bad->index + 1) + ")", bad->object,
                        bad->kind);
      }
      out.push_back({nullptr, d.source, d.items.get()});
      continue;
    }
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

std::optional<std::string> Labels::get(std::string_view key) const {
  if (!l_) return std::nullopt;
  auto it = l_->find(key);
  if (it == l_->end()) return std::nullopt;
  return scalarText(*it);
}

namespace {

void addResources(NodeResult& n, const json* obj, bool capacity, std::vector<Finding>& bad) {
  if (!obj || !obj->is_object()) return;
  forEachPrefixed(*obj, kResourcePrefix, [&](const std::string& key, const json& value) {
    auto c = parseCount(value);
    if (!c) {
      bad.push_back({"quantity-invalid", Severity::kWarning, n.name, key, "",
                     std::string(capacity ? "capacity" : "allocatable") + " of " + key + " is '" +
                         scalarText(value).value_or(printed(value)) + "', not a whole count",
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

}  // namespace

void readResources(NodeResult& n, const json& node, std::vector<Finding>& bad) {
  addResources(n, at(node, {"status", "capacity"}), true, bad);
  addResources(n, at(node, {"status", "allocatable"}), false, bad);
  std::sort(n.resources.begin(), n.resources.end(),
            [](const ResourceCount& a, const ResourceCount& b) { return a.name < b.name; });
}

}  // namespace hostprep
