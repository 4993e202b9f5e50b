#include "checks/resource_slices.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "checks/findings.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {

using nlohmann::json;

namespace {

// An attribute's value: {"string": "vfio"} (also "version", "int", "bool", printed). The name is
// looked up as given and qualified by the driver's domain ("gpu.nvidia.com/type"), as the DRA
// API treats an unqualified name.
std::optional<std::string> attribute(const json& attrs, std::string_view name) {
  const json* a = at(attrs, {name});
  if (!a) a = at(attrs, {std::string(kNvidiaDraDriver) + "/" + std::string(name)});
  if (!a || !a->is_object()) return std::nullopt;
  for (const char* key : {"string", "version", "int", "bool"}) {
    if (const json* v = at(*a, {key})) return scalarText(*v);
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<SliceDevice>> readResourceSlices(const std::vector<Document>& docs) {
  std::vector<SliceDevice> out;
  for (const auto& d : expandLists(docs)) {
    const auto kind = kindOf(d.body);
    if (!d.body.is_object() || kind != "ResourceSlice") {
      return usageError(d.source + ": " +
                            (kind.empty() ? std::string("a document without kind") : "a " + kind) +
                            ", not a ResourceSlice",
                        "pass 'kubectl get resourceslices -o json'");
    }
    const json* driver = at(d.body, {"spec", "driver"});
    const json* node = at(d.body, {"spec", "nodeName"});
    if (!driver || scalarText(*driver) != std::optional<std::string>(kNvidiaDraDriver)) continue;
    if (!node || !node->is_string() || node->get<std::string>().empty()) continue;
    const json* name = at(d.body, {"metadata", "name"});
    const std::string slice = name && name->is_string() ? name->get<std::string>() : d.source;
    const json* devices = at(d.body, {"spec", "devices"});
    if (!devices || !devices->is_array()) continue;
    for (const auto& dev : *devices) {
      const json* dn = at(dev, {"name"});
      if (!dn || !dn->is_string()) continue;
      // v1beta1 nests the attributes under "basic"; v1 and v1beta2 do not.
      const json* attrs = at(dev, {"basic", "attributes"});
      if (!attrs) attrs = at(dev, {"attributes"});
      SliceDevice s{slice, node->get<std::string>(), dn->get<std::string>(), {}, {}, {}, {}};
      if (attrs) {
        s.type = attribute(*attrs, "type");
        s.pciBusId = attribute(*attrs, kPciBusIdAttribute);
        if (!s.pciBusId) s.pciBusId = attribute(*attrs, kDriverPciBusIdAttribute);
        s.uuid = attribute(*attrs, "uuid");
        s.parentUuid = attribute(*attrs, "parentUUID");
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::map<std::string, DraNodeDevices> draDevicesByNode(const std::vector<SliceDevice>& devices) {
  std::map<std::string, DraNodeDevices> out;
  std::map<std::string, std::set<std::string>> gpus;  // node -> the GPUs of type gpu and mig
  for (const auto& d : devices) {
    DraNodeDevices& n = out[d.node];
    const auto type = d.type.value_or("");
    if (type == "vfio") {
      ++n.vfio;
    } else if (type == "gpu") {
      // A GPU in MIG mode may also be published whole (DynamicMIG): its uuid is the mig
      // devices' parentUUID, and it counts once.
      gpus[d.node].insert(d.uuid ? "uuid " + *d.uuid : "name " + d.name);
    } else if (type == "mig") {
      if (d.parentUuid) {
        gpus[d.node].insert("uuid " + *d.parentUuid);
      } else {
        n.gpusKnown = false;
      }
    } else {
      continue;
    }
    if (n.slice.empty()) n.slice = d.slice;
  }
  for (auto& [node, n] : out) n.gpus = static_cast<int64_t>(gpus[node].size());
  return out;
}

namespace {

// "gpu-0 (0000:3b:00.0)"
std::string deviceText(const SliceDevice& d) {
  return d.name + (d.pciBusId ? " (" + *d.pciBusId + ")" : std::string());
}

std::string namesOf(const std::vector<const SliceDevice*>& devs) {
  std::vector<std::string> v;
  for (const auto* d : devs) v.push_back(deviceText(*d));
  return nameList(v);
}

}  // namespace

void checkResourceSlices(CheckNodeReport& report, const std::vector<SliceDevice>& devices,
                         const Statuses& statuses) {
  std::map<std::string, std::vector<const SliceDevice*>> byNode;
  for (const auto& d : devices) byNode[d.node].push_back(&d);
  std::vector<std::string> unknown;
  for (const auto& entry : byNode) {
    const std::string& node = entry.first;  // not a structured binding: the lambda captures it
    const auto& devs = entry.second;
    auto n = std::find_if(report.nodes.begin(), report.nodes.end(),
                          [&](const NodeResult& r) { return r.name == node; });
    if (n == report.nodes.end()) {
      unknown.push_back(node);
      continue;
    }
    std::vector<const SliceDevice*> vfio, gpu;
    for (const auto* d : devs) {
      if (d->type == std::optional<std::string>("vfio")) vfio.push_back(d);
      if (d->type == std::optional<std::string>("gpu")) gpu.push_back(d);
    }
    const bool passthrough = n->hasGpus && n->mode == Mode::kVmPassthrough;
    const std::string mode = n->hasGpus ? std::string(toString(n->mode)) : "(no GPU)";
    // Every valid split has vm-passthrough GPUs and GPUs on the host driver: both types belong.
    if (!vfio.empty() && !passthrough && !n->split) {
      addFinding(*n, "dra-vfio-wrong-mode", Severity::kError,
                 "the DRA driver gpu.nvidia.com publishes " +
                     plural(static_cast<int64_t>(vfio.size()), "device", "devices") +
                     " of type vfio on this node (" + namesOf(vfio) + ", ResourceSlice " +
                     vfio.front()->slice + "), but the node's mode is " + mode +
                     ": claims of DeviceClass vfio.gpu.nvidia.com land on GPUs the host driver "
                     "should hold",
                 "make the node vm-passthrough (label it, then 'hostprep prepare --mode "
                 "vm-passthrough' there), or stop the DRA driver from publishing passthrough "
                 "devices on it");
    }
    if (!gpu.empty() && passthrough && !n->split) {
      addFinding(*n, "dra-gpu-on-passthrough", Severity::kError,
                 "the DRA driver gpu.nvidia.com publishes " +
                     plural(static_cast<int64_t>(gpu.size()), "device", "devices") +
                     " of type gpu on this vm-passthrough node (" + namesOf(gpu) +
                     ", ResourceSlice " + gpu.front()->slice +
                     "): a GPU on the host driver, which the node's mode gives to vfio-pci; "
                     "claims for it fail once the GPU is moved, or keep it from moving",
                 "run 'hostprep prepare --mode vm-passthrough' on the node and restart the DRA "
                 "driver's kubelet plugin there, so it republishes the GPUs as vfio devices");
    }
    const StatusView* st = statuses.find(node);
    if (!st || vfio.empty()) continue;
    std::set<Bdf> moved(st->vfioDevices.begin(), st->vfioDevices.end());
    std::vector<const SliceDevice*> notMoved;
    for (const auto* d : vfio) {
      auto bdf = d->pciBusId ? parseBdf(*d->pciBusId) : std::nullopt;
      if (!bdf || !moved.count(*bdf)) notMoved.push_back(d);
    }
    if (notMoved.empty()) continue;
    std::vector<std::string> movedText;
    for (const auto& b : moved) movedText.push_back(b.str());
    addFinding(*n, "dra-vfio-not-prepared", Severity::kError,
               "the DRA driver publishes " + namesOf(notMoved) + " as type vfio, but " +
                   (notMoved.size() == 1 ? std::string("its") : std::string("their")) + " " +
                   std::string(kPciBusIdAttribute) +
                   " is not a device hostprep moved to vfio-pci on this node (" + st->source +
                   ": " + (movedText.empty() ? std::string("none") : nameList(movedText, 8)) +
                   "): a VM claiming it gets a GPU that is not prepared for passthrough",
               "select the devices in hostprep (--gpu-ids or the config) to match what the DRA "
               "driver publishes, run 'hostprep prepare --mode vm-passthrough' on the node, and "
               "write its status again");
  }
  if (!unknown.empty()) {
    addClusterFinding(report.clusterFindings, "dra-node-unknown", Severity::kInfo, "",
                      "ResourceSlices of gpu.nvidia.com name " +
                          plural(static_cast<int64_t>(unknown.size()), "node", "nodes") +
                          " not in the node input (" + nameList(unknown) +
                          "); their devices were not checked",
                      "pass every node's 'kubectl get node' output");
  }
}

}  // namespace hostprep
