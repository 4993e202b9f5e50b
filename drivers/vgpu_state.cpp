#include "drivers/vgpu_state.hpp"

#include <algorithm>
#include <cctype>

#include "drivers/text.hpp"

namespace hostprep {

namespace {

// sys/bus/mdev/devices/<uuid> -> ../../../devices/pci0000:3b/0000:3b:00.4/<uuid>: the parent is
// the component before the UUID (the device plugin reads it the same way).
std::optional<Bdf> mdevParent(const Host& host, const std::string& uuid) {
  auto link = host.readLink(hostPath("sys/bus/mdev/devices", uuid));
  if (!link) return std::nullopt;
  auto parts = split(*link, '/');
  if (parts.size() < 2) return std::nullopt;
  return parseBdf(parts[parts.size() - 2]);
}

void readMdevDevices(const Host& host, VgpuState& st) {
  auto uuids = host.list("sys/bus/mdev/devices");
  if (!uuids) return;
  for (const auto& uuid : *uuids) {
    if (!isValidUuid(uuid)) continue;
    const std::string dir = hostPath("sys/bus/mdev/devices", uuid);
    ObservedVgpu d;
    d.interface = VgpuInterface::kMdev;
    d.uuid = uuid;
    d.parent = mdevParent(host, uuid);
    d.typeId = readLinkName(host, hostPath(dir, "mdev_type")).value_or("");
    d.typeName = readTrimmed(host, hostPath(dir, "mdev_type/name")).value_or("");
    st.devices.push_back(std::move(d));
  }
}

void readPerVf(const Host& host, const Snapshot& s, VgpuState& st) {
  for (const auto& f : s.pci) {
    const std::string dir = hostPath(pciDevicePath(f.bdf), "nvidia");
    auto creatable = host.read(hostPath(dir, "creatable_vgpu_types"), 256 * 1024);
    if (!f.mdevTypes.empty() || creatable) st.vgpuCapable.push_back(f.bdf);
    auto current = readTrimmed(host, hostPath(dir, "current_vgpu_type"));
    if (!current) continue;
    auto id = parseUnsigned(*current);
    if (!id || *id == 0) continue;
    ObservedVgpu d;
    d.interface = VgpuInterface::kPerVf;
    d.parent = f.bdf;
    d.typeId = std::to_string(*id);
    // An active type may drop out of creatable_vgpu_types; supported_vgpu_types still lists it.
    for (const char* list : {"creatable_vgpu_types", "supported_vgpu_types"}) {
      if (!d.typeName.empty()) break;
      auto text = host.read(hostPath(dir, list), 256 * 1024);
      if (!text) continue;
      for (const auto& e : parseCreatableVgpuTypes(*text)) {
        if (e.id == d.typeId) d.typeName = e.name;
      }
    }
    if (d.typeName.empty()) d.typeName = d.typeId;
    st.devices.push_back(std::move(d));
  }
}

}  // namespace

VgpuState readVgpuState(const Host& host, const Snapshot& s) {
  VgpuState st;
  readMdevDevices(host, st);
  readPerVf(host, s, st);
  std::sort(st.vgpuCapable.begin(), st.vgpuCapable.end());
  return st;
}

}  // namespace hostprep
