#include "checks/kubevirt_check.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "checks/findings.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {
namespace {

std::string spaced(std::string_view resource) {
  std::string s(resource.substr(kResourcePrefix.size()));
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}
std::string underscored(std::string_view selector) {
  // The plugin's rule for mdev type names: whitespace runs to '_'.
  return vgpuResourceName(selector).substr(kResourcePrefix.size());
}

std::optional<uint16_t> deviceOf(const StatusView& st, const std::string& resource) {
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

// The entries a merge patch adds, by resource name (the first node's wins).
struct PatchEntries {
  std::map<std::string, nlohmann::json> pci, mdev;
  std::set<std::string> unknownDevice;  // passthrough resources whose device id no input gives
};

// The PCI id a passthrough resource stands for: the node's status document's own
// permittedHostDevices entry (the function the host saw the plugin name it after), else a
// raw-id name ("nvidia.com/2236"), else the status document's GPUs (deviceOf).
std::optional<PciId> pciIdOf(const StatusView* st, const std::string& resource) {
  if (st) {
    if (auto it = st->permittedPci.find(resource); it != st->permittedPci.end()) return it->second;
  }
  std::optional<uint16_t> dev = rawDeviceId(resource);
  if (!dev && st) dev = deviceOf(*st, resource);
  if (!dev) return std::nullopt;
  return PciId{kNvidiaVendor, *dev};
}

// The mdevNameSelector of a vGPU resource: the type name as the node's status document gives it
// (the kernel's mdev_type/name, which KubeVirt matches the selector to), else the name the
// plugin's rule (whitespace runs to '_') most likely came from.
std::string mdevSelectorOf(const StatusView* st, const std::string& resource) {
  if (st) {
    if (auto it = st->permittedMdev.find(resource); it != st->permittedMdev.end())
      return it->second;
  }
  return spaced(resource);
}

}  // namespace

std::optional<nlohmann::json> permittedDevicesPatch(const KubeVirtView& kv,
                                                    const std::vector<nlohmann::json>& pci,
                                                    const std::vector<nlohmann::json>& mdev) {
  if (pci.empty() && mdev.empty()) return std::nullopt;
  nlohmann::json phd = nlohmann::json::object();
  auto extend = [](const nlohmann::json& have, const std::vector<nlohmann::json>& add) {
    nlohmann::json out = have.is_array() ? have : nlohmann::json::array();
    for (const auto& e : add) out.push_back(e);
    return out;
  };
  if (!pci.empty()) phd["pciHostDevices"] = extend(kv.pciHostDevices, pci);
  if (!mdev.empty()) phd["mediatedDevices"] = extend(kv.mediatedDevices, mdev);
  return nlohmann::json{{"spec", {{"configuration", {{"permittedHostDevices", phd}}}}}};
}

namespace {

void addPatchFinding(CheckNodeReport& report, const KubeVirtView& kv, const PatchEntries& p) {
  std::vector<nlohmann::json> pci, mdev;
  for (const auto& [name, e] : p.pci) pci.push_back(e);
  for (const auto& [name, e] : p.mdev) mdev.push_back(e);
  auto patch = permittedDevicesPatch(kv, pci, mdev);
  if (!patch) return;
  std::vector<std::string> names;
  for (const auto& [name, e] : p.pci) names.push_back(name);
  for (const auto& [name, e] : p.mdev) names.push_back(name);
  std::string note;
  if (!p.unknownDevice.empty()) {
    std::vector<std::string> u(p.unknownDevice.begin(), p.unknownDevice.end());
    note = "; not in it, no --status document gives the device id of " + join(u, ", ");
  }
  addClusterFinding(report.clusterFindings, "kubevirt-permit-patch", Severity::kInfo, kv.source,
                    "one merge patch permits the " + std::to_string(names.size()) +
                        " missing resource(s) (" + join(names, ", ") +
                        "), keeping the entries the CR has" + note,
                    "kubectl patch kubevirt " + kv.name + " -n " + kv.namespace_ +
                        " --type merge -p '" + patch->dump() + "'");
}

}  // namespace

void checkKubeVirt(CheckNodeReport& report, const KubeVirtView& kv, const Statuses& statuses) {
  PatchEntries patch;
  std::set<const HostDeviceEntry*> permittedAndAdvertised;  // entries a node advertises
  bool anySandbox = false, anyVgpu = false;
  std::set<std::string> unverified;
  for (auto& n : report.nodes) {
    const StatusView* st = statuses.find(n.name);
    for (const auto& r : n.resources) {
      if ((r.kind != ResourceKind::kPassthrough && r.kind != ResourceKind::kVgpu) ||
          !r.advertised())
        continue;
      anySandbox = true;
      anyVgpu = anyVgpu || r.kind == ResourceKind::kVgpu;
      const bool mediated = r.kind == ResourceKind::kVgpu;
      const char* list = mediated ? "mediatedDevices" : "pciHostDevices";
      const HostDeviceEntry* e = kv.find(r.name);
      if (!e) {
        // The entry as the sandbox device plugin names the resource; a PCI one needs the device
        // id (the node's status document's own entry, a raw-id name, or its GPUs).
        const std::optional<PciId> id = mediated ? std::nullopt : pciIdOf(st, r.name);
        if (mediated) {
          patch.mdev.emplace(r.name,
                             nlohmann::json{{"mdevNameSelector", mdevSelectorOf(st, r.name)},
                                            {"resourceName", r.name},
                                            {"externalResourceProvider", true}});
        } else if (id) {
          patch.pci.emplace(r.name, nlohmann::json{{"pciVendorSelector", pciVendorSelector(*id)},
                                                   {"resourceName", r.name},
                                                   {"externalResourceProvider", true}});
        } else {
          patch.unknownDevice.insert(r.name);
        }
        addFinding(n, "kubevirt-not-permitted", Severity::kError,
                   r.name + " is advertised but not in the KubeVirt CR's permittedHostDevices." +
                       list + " (" + kv.source + "): VMs asking for it are rejected",
                   mediated ? "add {mdevNameSelector: \"" + mdevSelectorOf(st, r.name) +
                                  "\", resourceName: " + r.name +
                                  ", externalResourceProvider: true} under spec.configuration."
                                  "permittedHostDevices.mediatedDevices"
                            : "add {pciVendorSelector: \"" +
                                  (id ? pciVendorSelector(*id) : std::string("10DE:<device id>")) +
                                  "\", resourceName: " + r.name +
                                  ", externalResourceProvider: true} under spec.configuration."
                                  "permittedHostDevices.pciHostDevices",
                   r.name);
        continue;
      }
      permittedAndAdvertised.insert(e);
      if (e->mediated != mediated) {
        addFinding(n, "kubevirt-wrong-list", Severity::kError,
                   r.name + " is a " + std::string(kindWord(r.kind)) +
                       " resource but KubeVirt lists it under " +
                       (e->mediated ? "mediatedDevices" : "pciHostDevices"),
                   std::string("move the entry to permittedHostDevices.") + list, r.name);
        continue;
      }
      if (!e->external) {
        addFinding(n, "kubevirt-not-external", Severity::kError,
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
          const std::string want = mdevSelectorOf(st, r.name);
          addFinding(n, "kubevirt-selector-mismatch", Severity::kError,
                     "mdevNameSelector " +
                         (e->selector ? "'" + *e->selector + "'" : std::string("(missing)")) +
                         " does not match " + r.name + ": the mdev type name is '" + want + "'",
                     "set mdevNameSelector: \"" + want + "\"", r.name);
        }
        continue;
      }
      // PCI: "10DE:2236". The device id is known from a raw-id name or the node's status.
      auto sel = e->selector ? parsePciId(*e->selector) : std::nullopt;
      if (!sel) {
        addFinding(n, "kubevirt-selector-mismatch", Severity::kError,
                   "pciVendorSelector " +
                       (e->selector ? "'" + *e->selector + "'" : std::string("(missing)")) +
                       " of " + r.name + " is not VVVV:DDDD",
                   "set pciVendorSelector: \"10DE:<device id>\" (lspci -nn on the node)", r.name);
        continue;
      }
      const std::optional<PciId> device = pciIdOf(st, r.name);
      if (sel->vendor != kNvidiaVendor || (device && *sel != *device)) {
        const std::string want =
            pciVendorSelector(device.value_or(PciId{kNvidiaVendor, sel->device}));
        addFinding(n, "kubevirt-selector-mismatch", Severity::kError,
                   "pciVendorSelector '" + *e->selector + "' of " + r.name +
                       " does not match the device " +
                       (device ? want : std::string("(vendor must be 10DE)")) +
                       ": KubeVirt will not hand this device to VMs",
                   "set pciVendorSelector: \"" + std::string(want) + "\"", r.name);
      } else if (!device) {
        unverified.insert(r.name);
      }
    }
  }
  addPatchFinding(report, kv, patch);
  for (const auto& name : unverified) {
    const auto* e = kv.find(name);
    addClusterFinding(
        report.clusterFindings, "kubevirt-selector-unverified", Severity::kInfo, kv.source,
        "could not verify pciVendorSelector '" + e->selector.value_or("") + "' of " + name +
            ": no --status document of a node advertising it gives the device id",
        "pass the nodes' hostprep status documents with --status", name);
  }
  if ((anySandbox || !kv.entries.empty()) && !kv.gate("GPU")) {
    addClusterFinding(report.clusterFindings, "kubevirt-gpu-gate-missing", Severity::kError,
                      kv.source,
                      "the KubeVirt CR lacks the feature gate GPU: VMs cannot ask for host GPUs",
                      "add GPU to spec.configuration.developerConfiguration.featureGates");
  }
  // vm-vgpu nodes: their mdevs belong to the vgpu-device-manager, not to KubeVirt. KubeVirt's
  // virt-handler creates the types of spec.configuration.mediatedDevicesConfiguration
  // (kubevirt.io/api v1.MediatedDevicesConfiguration: mediatedDeviceTypes,
  // nodeMediatedDeviceTypes) unless the DisableMDEVConfiguration gate is on.
  std::vector<std::string> vgpuNodes;
  for (const auto& n : report.nodes) {
    if (n.hasGpus && n.mode == Mode::kVmVgpu) vgpuNodes.push_back(n.name);
  }
  anyVgpu = anyVgpu || !vgpuNodes.empty();
  const bool gateOn = kv.gate("DisableMDEVConfiguration");
  if (anyVgpu && kv.mdevConfig) {
    const std::string field = "spec.configuration.mediatedDevicesConfiguration";
    addClusterFinding(
        report.clusterFindings, "kubevirt-mdev-config-set",
        gateOn ? Severity::kInfo : Severity::kError, kv.source,
        "the KubeVirt CR sets " + field +
            (kv.mdevConfig->empty() ? std::string() : " (" + join(*kv.mdevConfig, ", ") + ")") +
            " while the vgpu-device-manager creates the vGPU devices of " +
            (vgpuNodes.empty() ? std::string("the vGPU nodes")
                               : "the vm-vgpu nodes (" + nameList(vgpuNodes) + ")") +
            (gateOn ? ": the feature gate DisableMDEVConfiguration keeps KubeVirt from acting on "
                      "it, so it only misleads"
                    : ": KubeVirt's virt-handler creates and removes mdevs of the types it lists, "
                      "against the devices the vgpu-device-manager made"),
        "remove " + field +
            " (kubectl patch kubevirt kubevirt -n kubevirt --type json -p "
            "'[{\"op\":\"remove\",\"path\":\"/spec/configuration/"
            "mediatedDevicesConfiguration\"}]') and keep the vGPU types in the "
            "vgpu-device-manager config (nvidia.com/vgpu.config)");
  }
  if (anyVgpu && !gateOn) {
    addClusterFinding(
        report.clusterFindings, "kubevirt-mdev-gate-missing", Severity::kWarning, kv.source,
        "vGPU nodes exist but the KubeVirt CR lacks the feature gate "
        "DisableMDEVConfiguration: KubeVirt may create or remove mdevs itself, against "
        "the vgpu-device-manager",
        "add DisableMDEVConfiguration to spec.configuration.developerConfiguration.featureGates");
  }
  for (const auto& e : kv.entries) {
    if (permittedAndAdvertised.count(&e)) continue;
    addClusterFinding(report.clusterFindings, "kubevirt-permitted-unused", Severity::kInfo,
                      kv.source, "KubeVirt permits " + e.resource + " but no node advertises it",
                      "fine if such nodes come later; otherwise check the resource name",
                      e.resource);
  }
}

}  // namespace hostprep
