#include "drivers/published/advertised.hpp"

#include <algorithm>
#include <set>

#include "drivers/common/text.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {
namespace {

// The device plugin's drivers (kubevirt-gpu-device-plugin; nvgrace for Grace Hopper).
bool isPluginVfioDriver(const std::optional<std::string>& d) {
  return d && (*d == "vfio-pci" || *d == "nvgrace_gpu_vfio_pci" || *d == "nvgrace-gpu-vfio-pci");
}

// The mark of the vGPU host driver: the function offers vGPU types (mdev types, or a per-VF
// creatable_vgpu_types file).
bool vgpuCapable(const VgpuParent& p) { return !p.mdevTypes.empty() || p.perVf; }

// The devices the sandbox plugin advertises for passthrough: it walks PCI functions in address
// order, keeps vendor 10de bound to a vfio driver, and counts one device per IOMMU group under
// the resource of the group's first such function (each device id's name looked up in pci.ids
// once).
struct PluginPassthrough {
  const PciFunction* fn;  // the function the group's resource is named after
  std::string resource;
};
std::vector<PluginPassthrough> pluginPassthrough(const Snapshot& s,
                                                 std::optional<std::string_view> pciIds) {
  std::vector<PluginPassthrough> out;
  std::set<int> seenGroups;
  std::map<uint16_t, std::string> resourceOf;
  for (const auto& f : s.pci) {  // sorted by address, as the plugin's directory walk is
    if (f.id.vendor != kNvidiaVendor || !isPluginVfioDriver(f.driver) || !f.iommuGroup) continue;
    if (!seenGroups.insert(*f.iommuGroup).second) continue;
    auto [resource, fresh] = resourceOf.try_emplace(f.id.device);
    if (fresh) resource->second = passthroughResourceName(pciIds.value_or(""), f.id.device);
    out.push_back({&f, resource->second});
  }
  return out;
}

}  // namespace

// A GPU is a vGPU host when it, or one of its VFs, offers vGPU types or carries a vGPU.
bool isVgpuHost(const PciFunction& gpu, const VgpuHost& v) {
  auto related = [&](const Bdf& b) {
    return b == gpu.bdf ||
           std::find(gpu.virtfns.begin(), gpu.virtfns.end(), b) != gpu.virtfns.end();
  };
  for (const auto& [b, p] : v.parents) {
    if (vgpuCapable(p) && related(b)) return true;
  }
  for (const auto& d : v.devices) {
    if (related(d.parent)) return true;
  }
  for (const auto& d : v.otherMdevs) {
    if (d.parent && related(*d.parent)) return true;
  }
  return false;
}

std::vector<ObservedVgpu> observedVgpus(const VgpuHost& v) {
  std::vector<ObservedVgpu> mdevs, perVf;
  for (const auto& d : v.devices) {
    ObservedVgpu o{d.iface, d.uuid, d.parent, d.typeId, d.typeName};
    if (d.iface == VgpuInterface::kPerVf && o.typeName.empty()) o.typeName = o.typeId;
    (d.iface == VgpuInterface::kMdev ? mdevs : perVf).push_back(std::move(o));
  }
  for (const auto& d : v.otherMdevs)
    mdevs.push_back({VgpuInterface::kMdev, d.uuid, d.parent, d.typeId, d.typeName});
  std::sort(mdevs.begin(), mdevs.end(), [](auto& a, auto& b) { return a.uuid < b.uuid; });
  std::stable_sort(perVf.begin(), perVf.end(),
                   [](auto& a, auto& b) { return a.parent < b.parent; });
  mdevs.insert(mdevs.end(), perVf.begin(), perVf.end());
  return mdevs;
}

Advertised advertise(const Snapshot& s, const VgpuHost& v, const Selection& sel,
                     std::string_view hostDriver, std::optional<std::string_view> pciIds) {
  Advertised out;
  const auto passthrough = pluginPassthrough(s, pciIds);
  // By resource name: one entry each, sorted; the first device of the walk gives the selector.
  std::map<std::string, std::string> pci, mediated;
  for (const auto& p : passthrough) {
    ++out.resources[p.resource];
    pci.try_emplace(p.resource, pciVendorSelector(p.fn->id));
  }
  for (const auto& d : observedVgpus(v)) {
    if (d.typeName.empty()) continue;
    const std::string resource = vgpuResourceName(d.typeName);
    ++out.resources[resource];
    mediated.try_emplace(resource, d.typeName);
  }
  int gpus = 0;
  for (const auto& t : sel.targets) {
    const auto* f = s.find(t.bdf);
    if (t.role == Role::kGpu && f && isDriverOfModule(s, f->driver.value_or(""), hostDriver) &&
        !isVgpuHost(*f, v))
      ++gpus;
  }
  if (gpus > 0) out.resources[std::string(kContainerResource)] += gpus;
  for (auto& [resource, selector] : pci) out.permitted.pci.push_back({selector, resource});
  for (auto& [resource, selector] : mediated)
    out.permitted.mediated.push_back({selector, resource});
  return out;
}

std::map<std::string, int> advertisedResources(const Snapshot& s, const VgpuHost& v,
                                               const Selection& sel, std::string_view hostDriver,
                                               std::optional<std::string_view> pciIds) {
  return advertise(s, v, sel, hostDriver, pciIds).resources;
}

}  // namespace hostprep
