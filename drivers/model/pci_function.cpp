#include "drivers/model/pci_function.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "drivers/common/text.hpp"
#include "drivers/model/vgpu.hpp"

namespace hostprep {
namespace {

std::optional<uint32_t> readHex(const Host& host, const std::string& path) {
  auto t = readTrimmed(host, path);
  if (!t) return std::nullopt;
  auto v = parseUnsigned(*t, 16);
  if (!v || *v > 0xffffffffu) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

// A function's vendor, device and class from their three files, where its modalias does not say
// them (parsePciModalias); whether the vendor file could be read.
bool readIdFiles(const Host& host, const std::string& dir, PciFunction& f) {
  const auto vendor = readHex(host, hostPath(dir, "vendor"));
  f.id.vendor = static_cast<uint16_t>(vendor.value_or(0));
  f.id.device = static_cast<uint16_t>(readHex(host, hostPath(dir, "device")).value_or(0));
  f.classCode = readHex(host, hostPath(dir, "class")).value_or(0) & 0xffffff;
  return vendor.has_value();
}

std::optional<int> readInt(const Host& host, const std::string& path) {
  auto t = readTrimmed(host, path);
  if (!t) return std::nullopt;
  auto v = parseSigned(*t);
  if (!v || *v < -1 || *v > 1'000'000) return std::nullopt;
  return static_cast<int>(*v);
}

// A PCI-to-PCI bridge's secondary bus and whether userspace may reset it (pci.hpp): read light,
// since a plan needs the bridge above a selected function without selecting the bridge.
void readBridgeBus(const Host& host, const std::string& dir, PciFunction& f) {
  if (classPrefix(f.classCode) != classPrefix(pci_class::kPciBridge)) return;
  f.secondaryBus = readInt(host, hostPath(dir, "secondary_bus_number"));
  f.resetSubordinate = host.exists(hostPath(dir, "reset_subordinate"));
}

// Every virtfn<N> link of a PF's directory listing, read one by one, by N.
std::vector<Bdf> readVirtfnLinks(const Host& host, const std::string& dir,
                                 const std::vector<std::string>& entries) {
  std::vector<std::pair<uint64_t, Bdf>> byIndex;
  for (const auto& name : entries) {
    if (!startsWith(name, "virtfn")) continue;
    auto n = parseUnsigned(std::string_view(name).substr(6));
    auto vf = readLinkName(host, hostPath(dir, name));
    if (!n || !vf) continue;
    if (auto b = parseBdf(*vf)) byIndex.emplace_back(*n, *b);
  }
  std::sort(byIndex.begin(), byIndex.end());
  std::vector<Bdf> out;
  out.reserve(byIndex.size());
  for (const auto& [n, b] : byIndex) out.push_back(b);
  return out;
}

// The VFs a PF's virtfn<N> links name, by N, without reading 255 links: the kernel places VF N at
// the PF's routing ID + First VF Offset + N * VF Stride (drivers/pci/iov.c pci_iov_virtfn_bus and
// pci_iov_virtfn_devfn; PCIe Base Specification, SR-IOV Extended Capability), and shows offset and
// stride as sriov_offset and sriov_stride. The listing must hold exactly virtfn0 .. virtfn<n-1>,
// and the first and last links must name the computed addresses; anything else (VFs being added
// or removed, a sysfs that does not follow the kernel) reads every link.
std::vector<Bdf> virtfnsOf(const Host& host, const Bdf& pf, const std::vector<std::string>& entries,
                           std::optional<int> offset, std::optional<int> stride) {
  const std::string dir = pciDevicePath(pf);
  uint64_t count = 0;
  uint64_t maxIndex = 0;
  bool wellFormed = true;
  for (const auto& name : entries) {
    if (!startsWith(name, "virtfn")) continue;
    auto n = parseUnsigned(std::string_view(name).substr(6));
    if (!n) wellFormed = false;
    ++count;
    maxIndex = std::max(maxIndex, n.value_or(0));
  }
  if (count == 0) return {};
  if (!wellFormed || !offset || !stride || maxIndex + 1 != count || count > 0x10000)
    return readVirtfnLinks(host, dir, entries);
  std::vector<Bdf> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    auto vf = vfAddress(pf, *offset, *stride, static_cast<int>(i));
    if (!vf) return readVirtfnLinks(host, dir, entries);
    out.push_back(*vf);
  }
  auto linked = [&](uint64_t i) {
    auto name = readLinkName(host, hostPath(dir, "virtfn" + std::to_string(i)));
    auto b = name ? parseBdf(*name) : std::nullopt;
    return b && *b == out[i];
  };
  if (!linked(0) || !linked(count - 1)) return readVirtfnLinks(host, dir, entries);
  return out;
}

// A function directory's listing, and which optional attributes it shows. A directory that cannot
// be listed (but exists) has every attribute opened one by one, as if it listed them all.
struct FunctionDir {
  std::string dir;
  std::vector<std::string> entries;
  std::set<std::string_view> present;

  static std::optional<FunctionDir> list(const Host& host, const Bdf& bdf) {
    FunctionDir d;
    d.dir = pciDevicePath(bdf);
    auto entries = host.listUnordered(d.dir);  // looked up by name; consumers sorted after
    if (!entries && !host.exists(d.dir)) return std::nullopt;
    if (entries) d.entries = std::move(*entries);
    return d;
  }
  // `present` points into `entries`: filled once the object has its final address.
  void index() { present = {entries.begin(), entries.end()}; }
  bool has(std::string_view name) const { return entries.empty() || present.count(name) != 0; }
  // Whether the file is there: the listing says so; without one, the file is looked up.
  bool shows(const Host& host, std::string_view name) const {
    return entries.empty() ? host.exists(at(name)) : present.count(name) != 0;
  }
  std::string at(std::string_view name) const { return hostPath(dir, name); }
};

// What a bind or an unbind can change, or a write that sends no event: the driver, the override,
// the SR-IOV switches, device links, and what a driver creates under the function (mdev types
// with NVIDIA's vGPU manager, vfio-dev with a VFIO driver).
void readBindingState(const Host& host, const Bdf& bdf, const FunctionDir& d, bool lockHeld,
                      PciFunction& f) {
  f.driver = d.has("driver") ? readLinkName(host, d.at("driver")) : std::nullopt;
  f.unbindPending = lockHeld;
  f.driverOverride.reset();
  if (!lockHeld && d.has("driver_override")) {
    if (auto o = host.read(d.at("driver_override"), 4096))
      f.driverOverride = parseDriverOverride(*o);
  }
  f.sriovNumVfs.reset();
  f.sriovDriversAutoprobe.reset();
  if (d.has("sriov_totalvfs")) {
    if (!lockHeld) f.sriovNumVfs = readInt(host, d.at("sriov_numvfs"));
    if (auto a = readInt(host, d.at("sriov_drivers_autoprobe"))) f.sriovDriversAutoprobe = *a != 0;
  }
  f.consumers.clear();
  for (const auto& name : d.entries) {
    if (startsWith(name, "consumer:pci:")) {
      if (auto b = parseBdf(std::string_view(name).substr(13))) f.consumers.push_back(*b);
    }
  }
  std::sort(f.consumers.begin(), f.consumers.end());
  f.mdevTypes.clear();
  if (d.has("mdev_supported_types")) {
    if (auto types = host.list(d.at("mdev_supported_types"))) f.mdevTypes = *types;
  }
  f.vfioDevice = d.has("vfio-dev") ? vfioDeviceName(host, bdf) : std::nullopt;
  // Whether it answers and its power state change without an event (a VM's crash, a link
  // down): read again with the binding. Not while a pending write holds its lock. The power state
  // first: a read of `config` resumes a function in D3cold before it reads (drivers/pci/pci.c,
  // pci_config_pm_runtime_get, as for lspci), so power_state read after it says D0, or whatever
  // the failed resume left, instead of where the function was.
  f.responsive.reset();
  f.powerState.reset();
  if (!lockHeld) {
    if (d.has("power_state")) f.powerState = readTrimmed(host, d.at("power_state"));
    if (d.has("config")) f.responsive = readResponsive(host, bdf);
  }
}

}  // namespace

std::vector<PciBar> parsePciResource(std::string_view text) {
  // include/linux/ioport.h
  constexpr uint64_t kIoresourceMem = 0x00000200;
  constexpr uint64_t kIoresourcePrefetch = 0x00002000;
  constexpr uint64_t kIoresourceMem64 = 0x00100000;
  std::vector<PciBar> out;
  int index = 0;
  for (auto line : splitLines(text)) {
    if (index >= 6) break;
    const int i = index++;
    auto w = splitWords(line);
    if (w.size() < 3) continue;
    auto start = parseUnsigned(w[0], 16), end = parseUnsigned(w[1], 16),
         flags = parseUnsigned(w[2], 16);
    if (!start || !end || !flags || *end <= *start || !(*flags & kIoresourceMem)) continue;
    out.push_back({i, *end - *start + 1, (*flags & kIoresourceMem64) != 0,
                   (*flags & kIoresourcePrefetch) != 0});
  }
  return out;
}

std::optional<bool> parseVfBarsAssigned(std::string_view text) {
  const auto lines = splitLines(text);
  if (lines.size() < 8) return std::nullopt;
  for (size_t i = 7; i < lines.size() && i < 13; ++i) {
    auto w = splitWords(lines[i]);
    if (w.size() < 2) continue;
    auto start = parseUnsigned(w[0], 16), end = parseUnsigned(w[1], 16);
    if (start && end && *end > *start) return true;
  }
  return false;
}

std::string pciDevicePath(const Bdf& bdf) { return hostPath("sys/bus/pci/devices", bdf.str()); }
std::string pciDriverPath(std::string_view driver) {
  return hostPath("sys/bus/pci/drivers", driver);
}
std::optional<bool> readResponsive(const Host& host, const Bdf& bdf) {
  auto c = host.readHead(hostPath(pciDevicePath(bdf), "config"), 4);
  if (!c) return std::nullopt;
  return configAnswers(*c);
}

std::optional<std::string> vfioDeviceName(const Host& host, const Bdf& bdf) {
  const std::string dir = hostPath(pciDevicePath(bdf), "vfio-dev");
  auto names = host.list(dir);
  if (!names) return std::nullopt;
  for (const auto& n : *names) {
    if (n.size() <= 4 || !startsWith(n, "vfio") ||
        !std::all_of(n.begin() + 4, n.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (host.exists(hostPath(dir, n, "dev")) && host.exists(hostPath("dev/vfio/devices", n)))
      return n;
  }
  return std::nullopt;
}

std::optional<PciFunction> readPciFunction(const Host& host, const Bdf& bdf, bool lockHeld,
                                           const PciFunction* light) {
  // The directory's listing says which optional attributes exist (SR-IOV, boot_vga, physfn,
  // mdev types): only those are opened, which halves the reads of a typical function.
  auto d = FunctionDir::list(host, bdf);
  if (!d) return std::nullopt;
  d->index();
  auto at = [&](std::string_view name) { return d->at(name); };
  PciFunction f;
  f.bdf = bdf;
  // The modalias holds the ids and class of five files; those are read only when it does not
  // parse (a tree that is not a kernel's). A light read has it already (the ids do not change).
  if (light && !light->modalias.empty()) {
    f.modalias = light->modalias;
  } else if (d->has("modalias")) {
    f.modalias = readTrimmed(host, at("modalias")).value_or("");
  }
  const auto ids = parsePciModalias(f.modalias);
  if (light) {
    f.id = light->id;
    f.classCode = light->classCode;
    f.physfn = light->physfn;
  } else {
    if (ids) {
      f.id = ids->id;
      f.classCode = ids->classCode;
    } else {
      readIdFiles(host, d->dir, f);
    }
    if (d->has("physfn")) {
      if (auto pf = readLinkName(host, at("physfn"))) f.physfn = parseBdf(*pf);
    }
  }
  if (ids) {
    f.subsystem = ids->subsystem;
  } else {
    f.subsystem.vendor = static_cast<uint16_t>(readHex(host, at("subsystem_vendor")).value_or(0));
    f.subsystem.device = static_cast<uint16_t>(readHex(host, at("subsystem_device")).value_or(0));
  }
  if (d->has("iommu_group")) {
    if (auto g = readLinkName(host, at("iommu_group"))) {
      if (auto v = parseSigned(*g); v && *v >= 0 && *v < 1'000'000)
        f.iommuGroup = static_cast<int>(*v);
    }
  }
  if (d->has("sriov_totalvfs")) {
    f.sriovTotalVfs = readInt(host, at("sriov_totalvfs"));
    f.sriovOffset = readInt(host, at("sriov_offset"));
    f.sriovStride = readInt(host, at("sriov_stride"));
  }
  if (d->has("boot_vga")) {
    if (auto v = readInt(host, at("boot_vga"))) f.bootVga = *v != 0;
  }
  f.numaNode = readInt(host, at("numa_node"));
  f.virtfns = virtfnsOf(host, bdf, d->entries, f.sriovOffset, f.sriovStride);
  std::sort(f.virtfns.begin(), f.virtfns.end());
  if (d->has("resource")) {
    if (auto r = host.read(at("resource"), 4096)) {
      f.bars = parsePciResource(*r);
      f.vfBarsAssigned = parseVfBarsAssigned(*r);
    }
  }
  f.resetFile = d->shows(host, "reset");
  if (d->has("reset_method")) {
    if (auto m = readTrimmed(host, d->at("reset_method"))) {
      f.resetMethods.emplace();
      for (auto w : splitWords(*m)) f.resetMethods->emplace_back(w);
    }
  }
  if (d->has("d3cold_allowed")) {
    if (auto v = readInt(host, d->at("d3cold_allowed"))) f.d3coldAllowed = *v != 0;
  }
  readBridgeBus(host, d->dir, f);
  readBindingState(host, bdf, *d, lockHeld, f);
  return f;
}

bool readBindingOf(const Host& host, PciFunction& f, bool lockHeld) {
  auto d = FunctionDir::list(host, f.bdf);
  if (!d) return false;
  d->index();
  readBindingState(host, f.bdf, *d, lockHeld, f);
  return true;
}

std::optional<PciFunction> readLightFunction(const Host& host, const Bdf& bdf) {
  const std::string dir = pciDevicePath(bdf);
  auto at = [&](std::string_view name) { return hostPath(dir, name); };
  PciFunction f;
  f.bdf = bdf;
  // One file for the ids and class (the modalias), or the three that hold them. The modalias is
  // kept for a whole read of the function after this one (readSnapshot clears it otherwise).
  const auto text = readTrimmed(host, at("modalias"));
  if (const auto ids = parsePciModalias(text.value_or(""))) {
    f.id = ids->id;
    f.classCode = ids->classCode;
    f.modalias = *text;
  } else if (!readIdFiles(host, dir, f) && !text && !host.exists(dir)) {
    return std::nullopt;
  }
  f.driver = readLinkName(host, at("driver"));
  if (auto pf = readLinkName(host, at("physfn"))) f.physfn = parseBdf(*pf);
  readBridgeBus(host, dir, f);
  return f;
}

std::vector<Bdf> readVirtfns(const Host& host, const Bdf& bdf) {
  const std::string dir = pciDevicePath(bdf);
  if (!host.readLink(hostPath(dir, "virtfn0"))) return {};
  auto entries = host.listUnordered(dir);
  if (!entries) return {};
  return virtfnsOf(host, bdf, *entries, readInt(host, hostPath(dir, "sriov_offset")),
                   readInt(host, hostPath(dir, "sriov_stride")));
}

}  // namespace hostprep
