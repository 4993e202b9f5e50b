#include "drivers/model/vgpu.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <tuple>

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

// SHA-1 (FIPS 180-4), enough for name-based UUIDs; not for anything secret.
std::array<uint8_t, 20> sha1(std::string_view data) {
  uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  std::string msg(data);
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8u;
  msg += static_cast<char>(0x80);
  while (msg.size() % 64 != 56) msg += '\0';
  for (int i = 7; i >= 0; --i) msg += static_cast<char>((bits >> (i * 8)) & 0xffu);
  auto rol = [](uint32_t v, int n) { return (v << n) | (v >> (32 - n)); };
  for (size_t off = 0; off < msg.size(); off += 64) {
    uint32_t w[80];
    for (size_t i = 0; i < 16; ++i) {
      w[i] = 0;
      for (size_t b = 0; b < 4; ++b) {
        w[i] = (w[i] << 8) | static_cast<uint8_t>(msg[off + i * 4 + b]);
      }
    }
    for (size_t i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (size_t i = 0; i < 80; ++i) {
      uint32_t f = 0, k = 0;
      if (i < 20) {
        f = (b & c) | (~b & d), k = 0x5A827999u;
      } else if (i < 40) {
        f = b ^ c ^ d, k = 0x6ED9EBA1u;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDCu;
      } else {
        f = b ^ c ^ d, k = 0xCA62C1D6u;
      }
      uint32_t t = rol(a, 5) + f + e + k + w[i];
      e = d, d = c, c = rol(b, 30), b = a, a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
  }
  std::array<uint8_t, 20> out{};
  for (size_t i = 0; i < 5; ++i) {
    for (size_t b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<uint8_t>(h[i] >> (24 - 8 * b));
  }
  return out;
}

// The hostprep namespace for name-based vGPU UUIDs (a fixed random UUID; never change it, or
// every VM's device identity changes).
constexpr uint8_t kUuidNamespace[16] = {0x6b, 0x1f, 0x3c, 0x52, 0x9e, 0x0d, 0x4a, 0x8b,
                                        0xa1, 0x77, 0x2e, 0x5c, 0xd4, 0x90, 0x3f, 0x61};

std::optional<int> readInt(const Host& host, const std::string& path) {
  auto t = readTrimmed(host, path);
  if (!t) return std::nullopt;
  auto v = parseSigned(*t);
  if (!v || *v < 0 || *v > 1'000'000) return std::nullopt;
  return static_cast<int>(*v);
}

}  // namespace

bool vgpuTypeMatches(std::string_view configured, std::string_view typeId,
                     std::string_view typeName) {
  if (configured.empty()) return false;
  if (configured == typeId || configured == trim(typeName)) return true;
  auto words = splitWords(typeName);
  return !words.empty() && words.back() == configured;
}

std::vector<VgpuTypeId> parseCreatableVgpuTypes(std::string_view text) {
  std::vector<VgpuTypeId> out;
  for (auto line : splitLines(text)) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto id = trim(line.substr(0, colon));
    auto name = trim(line.substr(colon + 1));
    if (id.empty() || name.empty() || !parseUnsigned(id)) continue;
    out.push_back({std::string(id), std::string(name)});
  }
  return out;
}

std::string sha1Hex(std::string_view data) {
  auto d = sha1(data);
  std::string s;
  for (uint8_t b : d) s += hexDigits(b, 2);
  return s;
}

std::string vgpuUuid(const Bdf& parent, std::string_view type, int index) {
  std::string input(reinterpret_cast<const char*>(kUuidNamespace), sizeof kUuidNamespace);
  input += parent.str() + "/" + std::string(type) + "/" + std::to_string(index);
  auto d = sha1(input);
  d[6] = static_cast<uint8_t>((d[6] & 0x0f) | 0x50);  // version 5
  d[8] = static_cast<uint8_t>((d[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string s;
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hexDigits(d[i], 2);
  }
  return s;
}

bool isValidUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (s[i] == '-')) return false;
    if (!dash && !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  }
  return true;
}

std::optional<Bdf> vfAddress(const Bdf& pf, int offset, int stride, int index) {
  if (offset < 0 || stride < 0 || index < 0) return std::nullopt;
  const long rid = (static_cast<long>(pf.bus) << 8) | (pf.device << 3) | pf.function;
  const long vf = rid + offset + static_cast<long>(stride) * index;
  if (vf > 0xffff) return std::nullopt;
  return Bdf{pf.domain, static_cast<uint8_t>(vf >> 8), static_cast<uint8_t>((vf >> 3) & 0x1f),
             static_cast<uint8_t>(vf & 0x7)};
}

std::string_view toString(VgpuInterface i) { return i == VgpuInterface::kMdev ? "mdev" : "per-vf"; }

std::string mdevTypePath(const Bdf& parent, std::string_view typeId) {
  return hostPath(pciDevicePath(parent), "mdev_supported_types", typeId);
}
std::string perVfPath(const Bdf& vf, std::string_view file) {
  return hostPath(pciDevicePath(vf), "nvidia", file);
}
std::string unbindLockPath(const Bdf& gpu) {
  return hostPath("proc/driver/nvidia/gpus", gpu.str(), "unbindLock");
}

const VgpuParent* VgpuHost::parent(const Bdf& b) const {
  auto it = parents.find(b);
  return it == parents.end() ? nullptr : &it->second;
}

std::vector<const VgpuDevice*> VgpuHost::devicesOn(const Bdf& p) const {
  std::vector<const VgpuDevice*> out;
  for (const auto& d : devices) {
    if (d.parent == p) out.push_back(&d);
  }
  return out;
}

namespace {

std::optional<int> groupOf(const Host& host, const std::string& dev) {
  if (auto g = readLinkName(host, hostPath(dev, "iommu_group"))) {
    if (auto v = parseUnsigned(*g); v && *v < 1'000'000) return static_cast<int>(*v);
  }
  return std::nullopt;
}

// Every mdev device of the host. Those on one of `parents` go to `out`; the rest, when `others`
// is given, to `others`.
void readMdevDevices(const Host& host, const std::vector<Bdf>& parents,
                     std::vector<VgpuDevice>& out, std::vector<OtherMdev>* others) {
  auto uuids = host.list(kMdevDevices);
  if (!uuids) return;
  for (const auto& u : *uuids) {
    if (!isValidUuid(u)) continue;
    const std::string dev = hostPath(kMdevDevices, u);
    // ../../../devices/pci0000:3b/0000:3b:00.4/<uuid>: the parent is the component before the
    // UUID (the device plugin reads it the same way).
    auto link = host.readLink(dev);
    auto parts = link ? split(*link, '/') : std::vector<std::string_view>{};
    auto parent = parts.size() < 2 ? std::nullopt : parseBdf(parts[parts.size() - 2]);
    const bool wanted =
        parent && std::find(parents.begin(), parents.end(), *parent) != parents.end();
    if (!wanted && !others) continue;
    std::string typeId = readLinkName(host, hostPath(dev, "mdev_type")).value_or("");
    std::string typeName = readTrimmed(host, hostPath(dev, "mdev_type", "name")).value_or("");
    if (!wanted) {
      others->push_back({u, parent, std::move(typeId), std::move(typeName)});
      continue;
    }
    out.push_back({VgpuInterface::kMdev, *parent, u, std::move(typeId), std::move(typeName),
                   groupOf(host, dev)});
  }
}

// The per-VF vGPUs on `parents`: a current_vgpu_type that reads as a non-zero id, named from
// creatable_vgpu_types or, when the active type dropped out of it, supported_vgpu_types.
void readPerVfDevices(const Host& host, const std::vector<Bdf>& parents,
                      std::vector<VgpuDevice>& out) {
  for (const auto& p : parents) {
    auto cur = readTrimmed(host, perVfPath(p, "current_vgpu_type"));
    if (!cur) continue;
    auto id = parseUnsigned(*cur);
    if (!id || *id == 0) continue;
    VgpuDevice d{VgpuInterface::kPerVf, p, "", std::to_string(*id), "", std::nullopt};
    for (const char* f : {"creatable_vgpu_types", "supported_vgpu_types"}) {
      for (const auto& t : parseCreatableVgpuTypes(host.read(perVfPath(p, f)).value_or(""))) {
        if (t.id == d.typeId && d.typeName.empty()) d.typeName = t.name;
      }
    }
    d.group = groupOf(host, pciDevicePath(p));
    out.push_back(std::move(d));
  }
}

void sortDevices(std::vector<VgpuDevice>& v) {
  std::sort(v.begin(), v.end(), [](const VgpuDevice& a, const VgpuDevice& b) {
    return std::tie(a.parent, a.uuid, a.typeId) < std::tie(b.parent, b.uuid, b.typeId);
  });
}

}  // namespace

std::vector<VgpuDevice> readVgpuDevices(const Host& host, const std::vector<Bdf>& parents) {
  std::vector<VgpuDevice> out;
  readMdevDevices(host, parents, out, nullptr);
  readPerVfDevices(host, parents, out);
  sortDevices(out);
  return out;
}

namespace {

// The parents among `candidates` (mdev types, per-VF files, NVIDIA's unbind lock), into `v`.
// The per-VF files (<dev>/nvidia/) and the unbind lock (proc/driver/nvidia/gpus/<BDF>/) are the
// nvidia driver's, there while it holds the function, so they are looked for only on functions
// in `onNvidia`; any driver may register a function as an mdev parent.
void readParents(const Host& host, const std::vector<Bdf>& candidates,
                 const std::set<Bdf>& onNvidia, VgpuHost& v) {
  for (const auto& bdf : candidates) {
    VgpuParent p;
    p.bdf = bdf;
    if (auto types = host.list(hostPath(pciDevicePath(bdf), "mdev_supported_types"))) {
      p.mdevParent = true;
      for (const auto& id : *types) {
        const std::string dir = mdevTypePath(bdf, id);
        p.mdevTypes.push_back({id, readTrimmed(host, hostPath(dir, "name")).value_or(id),
                               readInt(host, hostPath(dir, "available_instances")).value_or(0)});
      }
    }
    if (!onNvidia.count(bdf)) {
      if (p.mdevParent) v.parents.emplace(bdf, std::move(p));
      continue;
    }
    if (auto text = host.read(perVfPath(bdf, "creatable_vgpu_types"))) {
      p.perVf = true;
      p.creatable = parseCreatableVgpuTypes(*text);
      for (const auto& t : parseCreatableVgpuTypes(
               host.read(perVfPath(bdf, "supported_vgpu_types")).value_or(""))) {
        if (std::find(p.creatable.begin(), p.creatable.end(), t) == p.creatable.end())
          p.creatable.push_back(t);
      }
      p.currentType = readTrimmed(host, perVfPath(bdf, "current_vgpu_type")).value_or("0");
    }
    if (host.exists(unbindLockPath(bdf))) v.unbindLocks.push_back(bdf);
    if (p.mdevParent || p.perVf) v.parents.emplace(bdf, std::move(p));
  }
}

}  // namespace

VgpuHost readVgpuHost(const Host& host, const Snapshot& s) {
  std::vector<Bdf> all;
  all.reserve(s.pci.size());
  for (const auto& f : s.pci) all.push_back(f.bdf);
  return readVgpuHost(host, s, all);
}

VgpuHost readVgpuHost(const Host& host, const Snapshot& s, const std::vector<Bdf>& candidates) {
  std::vector<Bdf> all;
  std::set<Bdf> onNvidia;
  all.reserve(s.pci.size());
  for (const auto& f : s.pci) {
    all.push_back(f.bdf);
    if (f.driver == kNvidiaDriver) onNvidia.insert(f.bdf);
  }
  std::vector<Bdf> perVf;
  for (const auto& b : candidates) {
    if (onNvidia.count(b)) perVf.push_back(b);
  }
  VgpuHost v;
  readParents(host, candidates, onNvidia, v);
  readMdevDevices(host, all, v.devices, &v.otherMdevs);
  readPerVfDevices(host, perVf, v.devices);
  sortDevices(v.devices);
  return v;
}

VgpuHost refreshVgpuHost(const Host& host, const Snapshot& s, const VgpuHost& before,
                         const std::set<Bdf>& changed) {
  std::set<Bdf> again(changed.begin(), changed.end());
  for (const auto& [bdf, p] : before.parents) again.insert(bdf);
  again.insert(before.unbindLocks.begin(), before.unbindLocks.end());
  for (const auto& d : before.devices) again.insert(d.parent);
  std::vector<Bdf> candidates;
  for (const auto& f : s.pci) {
    if (again.count(f.bdf)) candidates.push_back(f.bdf);
  }
  return readVgpuHost(host, s, candidates);
}

}  // namespace hostprep
