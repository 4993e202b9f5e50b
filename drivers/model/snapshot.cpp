#include "drivers/model/snapshot.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/journal.hpp"
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

// The root filesystem's block device, from mountinfo "maj:min" -> sys/dev/block/<maj:min>, then
// the last PCI address in the resolved device path.
std::optional<Bdf> findRootDiskPci(const Host& host) {
  auto mi = host.read("proc/self/mountinfo");
  if (!mi) return std::nullopt;
  std::string majmin;
  for (auto line : splitLines(*mi)) {
    auto w = splitWords(line);
    if (w.size() > 4 && w[4] == "/") majmin = std::string(w[2]);
  }
  if (majmin.empty()) return std::nullopt;
  auto link = host.readLink(hostPath("sys/dev/block", majmin));
  if (!link) return std::nullopt;
  std::optional<Bdf> last;
  for (auto part : split(*link, '/')) {
    if (auto b = parseBdf(part)) last = b;
  }
  return last;
}

void readModulesAndDrivers(const Host& host, Snapshot& s) {
  s.loadedModules.clear();
  s.pciDrivers.clear();
  if (auto m = host.read("proc/modules")) s.loadedModules = parseProcModules(*m);
  if (auto d = host.list("sys/bus/pci/drivers")) {
    for (const auto& name : *d) {
      auto module = readLinkName(host, hostPath("sys/bus/pci/drivers", name, "module"));
      s.pciDrivers.emplace(name, module ? normalizeModuleName(*module) : std::string());
    }
  }
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

namespace {

// Does a timed read of this attribute of the device go unanswered for a second? Its show() then
// waits for the device lock that a write still running in the kernel holds.
bool readWaits(const Host& host, const Bdf& bdf, std::string_view attr) {
  auto r = host.readAttr(hostPath(pciDevicePath(bdf), attr), std::chrono::milliseconds(1000));
  return !r && r.error().err == ETIMEDOUT;
}

}  // namespace

bool unbindStillPending(const Host& host, const Bdf& bdf, std::string_view driver) {
  if (readLinkName(host, hostPath(pciDevicePath(bdf), "driver")) ==
      std::optional<std::string>(driver)) {
    return true;  // remove() has not started
  }
  // The kernel clears dev->driver only after remove() returns, and the uevent attribute names it
  // ("DRIVER=<name>", drivers/base/core.c dev_uevent). Debian's 6.1 takes the device lock in
  // uevent's show() (the read waits while remove() runs); 6.12 does not, and neither does its
  // driver_override show() (a spinlock of its own, drivers/base/bus.c), so on 6.12 only DRIVER=
  // tells. A timed read covers both: no answer, or DRIVER=<driver>, means still running.
  // driver_override's timed read stays for a root without a uevent file.
  auto u = host.readAttr(hostPath(pciDevicePath(bdf), "uevent"), std::chrono::milliseconds(1000));
  if (!u && u.error().err == ETIMEDOUT) return true;
  if (u) {
    for (const auto& line : splitLines(*u)) {
      if (line == "DRIVER=" + std::string(driver)) return true;
    }
    return false;
  }
  return readWaits(host, bdf, "driver_override");
}

bool probeStillPending(const Host& host, const Bdf& bdf) {
  const std::string dev = pciDevicePath(bdf);
  if (readWaits(host, bdf, host.exists(hostPath(dev, "uevent")) ? "uevent" : "driver_override"))
    return true;
  return host.exists(hostPath(dev, "sriov_numvfs")) && readWaits(host, bdf, "sriov_numvfs");
}

bool numVfsWriteStillPending(const Host& host, const Bdf& pf) {
  return readWaits(host, pf, "sriov_numvfs");
}

std::vector<Bdf> vfSlots(const Host& host, const Bdf& pf) {
  std::set<Bdf> out;
  const std::string dir = pciDevicePath(pf);
  auto number = [&](const char* name) {
    return parseUnsigned(readTrimmed(host, hostPath(dir, name)).value_or("")).value_or(0);
  };
  const uint64_t total = std::min<uint64_t>(number("sriov_totalvfs"), 65535);
  const uint64_t offset = number("sriov_offset"), stride = number("sriov_stride");
  for (uint64_t i = 0; i < total && offset <= 65535 && stride <= 65535; ++i) {
    auto vf =
        vfAddress(pf, static_cast<int>(offset), static_cast<int>(stride), static_cast<int>(i));
    if (!vf) break;
    out.insert(*vf);
  }
  if (auto names = host.list(dir)) {
    for (const auto& n : *names) {
      if (!startsWith(n, "virtfn")) continue;
      if (auto target = readLinkName(host, hostPath(dir, n))) {
        if (auto b = parseBdf(*target)) out.insert(*b);
      }
    }
  }
  return {out.begin(), out.end()};
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

namespace {

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
  // down): read again with the binding. Not while a pending write holds its lock.
  f.responsive.reset();
  f.powerState.reset();
  if (!lockHeld) {
    if (d.has("config")) f.responsive = readResponsive(host, bdf);
    if (d.has("power_state")) f.powerState = readTrimmed(host, d.at("power_state"));
  }
}

}  // namespace

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
  f.resetFile = d->has("reset") && host.exists(d->at("reset"));
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

namespace {

// What every function of a scoped snapshot carries (the WholeFunction contract).
// nullopt when the function is not there (as readPciFunction).
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

// The VFs a function's virtfn<N> links name (drivers/pci/iov.c pci_iov_sysfs_link), by N; empty
// for a function that is not an enabled SR-IOV PF. One readlink of virtfn0 decides, so a function
// without VFs costs one failed system call.
std::vector<Bdf> readVirtfns(const Host& host, const Bdf& bdf) {
  const std::string dir = pciDevicePath(bdf);
  if (!host.readLink(hostPath(dir, "virtfn0"))) return {};
  auto entries = host.listUnordered(dir);
  if (!entries) return {};
  return virtfnsOf(host, bdf, *entries, readInt(host, hostPath(dir, "sriov_offset")),
                   readInt(host, hostPath(dir, "sriov_stride")));
}

// Which driver holds each bound function, from the drivers' side: sys/bus/pci/drivers/<drv>/<bdf>
// is the link the driver core makes beside the device's own driver link, and removes with it
// (drivers/base/dd.c driver_sysfs_add and driver_sysfs_remove). One listing per driver instead
// of one readlink per function: built once, and only for a PF with many VFs.
class DriverIndex {
 public:
  explicit DriverIndex(const Host& host) : host_(host) {}
  std::optional<std::string> driverOf(const Bdf& bdf) {
    if (!built_) build();
    auto it = byBdf_.find(bdf);
    if (it == byBdf_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void build() {
    built_ = true;
    // The drivers in order (a BDF two drivers list, which a consistent kernel never shows, goes
    // to the first by name, as before); each driver's devices in any order (keyed by BDF).
    auto drivers = host_.list("sys/bus/pci/drivers");
    if (!drivers) return;
    for (const auto& d : *drivers) {
      auto bound = host_.listUnordered(pciDriverPath(d));
      if (!bound) continue;
      for (const auto& name : *bound) {
        if (auto b = parseBdf(name)) byBdf_.emplace(*b, d);
      }
    }
  }
  const Host& host_;
  bool built_ = false;
  std::map<Bdf, std::string> byBdf_;
};

// A PF with more VFs than this reads its VFs' drivers from the DriverIndex.
constexpr size_t kVfsForDriverIndex = 16;

// The light attributes of a PF's VFs without opening their files: the kernel gives every VF the
// PF's vendor, the VF device id of the PF's SR-IOV capability and the class it read from the first
// VF (drivers/pci/iov.c pci_iov_add_virtfn and pci_read_vf_config_common; drivers/pci/probe.c
// pci_class() returns physfn->sriov->class for a VF). So the first VF is read light and the
// others copy it; only each VF's driver is read (its link, or the DriverIndex for many VFs).
// Functions keyed by BDF in `into`.
void readVfsLight(const Host& host, const Bdf& pf, const std::vector<Bdf>& vfs,
                  std::map<Bdf, PciFunction>& into, DriverIndex& drivers) {
  std::optional<PciFunction> first;
  const bool indexed = vfs.size() > kVfsForDriverIndex;
  for (const auto& vf : vfs) {
    if (into.count(vf)) continue;
    if (!first) {
      first = readLightFunction(host, vf);
      if (!first) continue;  // gone: read as any other listed function, if listed
      into.emplace(vf, *first);
      continue;
    }
    PciFunction f;
    f.bdf = vf;
    f.id = first->id;
    f.classCode = first->classCode;
    f.physfn = pf;
    f.driver =
        indexed ? drivers.driverOf(vf) : readLinkName(host, hostPath(pciDevicePath(vf), "driver"));
    into.emplace(vf, std::move(f));
  }
}

// The rest of readSnapshot: groups, modules, drivers, kernel, command line, root disk.
void readHostWide(const Host& host, Snapshot& s) {
  readModulesAndDrivers(host, s);
  // The release names lib/modules/<release>: one that could leave that directory is unknown.
  s.kernelRelease = readTrimmed(host, "proc/sys/kernel/osrelease").value_or("");
  if (!isValidKernelRelease(s.kernelRelease)) s.kernelRelease.clear();
  s.cmdlineText = readTrimmed(host, "proc/cmdline").value_or("");
  s.cmdline = parseCmdline(s.cmdlineText);
  s.rootDiskPci = findRootDiskPci(host);
  s.iommufd = host.exists("dev/iommu");
}

// The scoped snapshot reads its functions in BDF order already; moving 4,000 of them through
// std::sort for nothing showed in preflight's profile.
void sortByBdf(std::vector<PciFunction>& pci) {
  auto byBdf = [](const PciFunction& a, const PciFunction& b) { return a.bdf < b.bdf; };
  if (!std::is_sorted(pci.begin(), pci.end(), byBdf)) std::sort(pci.begin(), pci.end(), byBdf);
}

std::optional<int> groupNumber(std::string_view name) {
  auto n = parseSigned(name);
  if (!n || *n < 0 || *n >= 1'000'000) return std::nullopt;
  return static_cast<int>(*n);
}

// What a plan needs of a VF besides its driver (vfMoves, the journal's VF states, a VM's
// /dev/vfio/N): its driver_override, unless a pending write holds its device lock (the read
// would wait for it), and its IOMMU group. One attribute and one link instead of a whole read's
// listing and ~14 attributes, on each of up to 255 VFs per GPU.
void readVfBinding(const Host& host, PciFunction& f, bool lockHeld) {
  const std::string dir = pciDevicePath(f.bdf);
  f.unbindPending = lockHeld;
  if (!lockHeld) {
    if (auto o = host.read(hostPath(dir, "driver_override"), 4096))
      f.driverOverride = parseDriverOverride(*o);
  }
  if (auto g = readLinkName(host, hostPath(dir, "iommu_group"))) f.iommuGroup = groupNumber(*g);
}

}  // namespace

Result<Snapshot> readSnapshot(const Host& host) {
  auto devices = host.listUnordered("sys/bus/pci/devices");
  if (!devices) {
    Error e = devices.error();
    e.advice = "is " + host.root().string() + " the root of a Linux host? --root must point at one";
    return e;
  }
  Snapshot s;
  const std::set<Bdf> locked = lockedByPendingWrites(host);
  for (const auto& name : *devices) {
    auto bdf = parseBdf(name);
    if (!bdf) continue;
    if (auto f = readPciFunction(host, *bdf, locked.count(*bdf) != 0))
      s.pci.push_back(std::move(*f));
  }
  sortByBdf(s.pci);

  if (auto groups = host.listUnordered("sys/kernel/iommu_groups")) {
    for (const auto& g : *groups) {
      auto n = groupNumber(g);
      if (!n) continue;
      auto& members = s.iommuGroups[*n];
      if (auto devs = host.list(hostPath("sys/kernel/iommu_groups", g, "devices"))) {
        for (const auto& d : *devs) {
          if (auto b = parseBdf(d)) members.push_back(*b);
        }
      }
    }
  }
  readHostWide(host, s);
  return s;
}

Result<Snapshot> readSnapshot(const Host& host, const WholeFunction& whole) {
  auto devices = host.listUnordered("sys/bus/pci/devices");
  if (!devices) return readSnapshot(host);  // the same error, with its advice
  Snapshot s;
  const std::set<Bdf> locked = lockedByPendingWrites(host);
  // A VF's routing ID is its PF's plus a positive offset (PCIe SR-IOV, First VF Offset), so in BDF
  // order a PF comes before its VFs: each PF's VFs are known (read light at once) before they are
  // reached. A VF whose PF did not name it is read as any function.
  std::vector<Bdf> listed;
  for (const auto& name : *devices) {
    if (auto bdf = parseBdf(name)) listed.push_back(*bdf);
  }
  std::sort(listed.begin(), listed.end());
  s.pci.reserve(listed.size());
  // 1. The picked functions, whole (a picked PF at once: its virtfn links name its VFs).
  std::set<Bdf> done;
  std::vector<Bdf> picked;
  std::map<Bdf, PciFunction> vfs;
  DriverIndex drivers(host);
  for (const auto& bdf : listed) {
    if (auto known = vfs.extract(bdf)) {  // read light with its PF
      if (whole(known.mapped())) readVfBinding(host, known.mapped(), locked.count(bdf) != 0);
      s.pci.push_back(std::move(known.mapped()));
      continue;
    }
    auto f = readLightFunction(host, bdf);
    if (!f) continue;
    const bool pick = whole(*f);
    if (pick) picked.push_back(bdf);
    if (pick && !f->physfn) {
      if (auto w = readPciFunction(host, bdf, locked.count(bdf) != 0, &*f)) {
        done.insert(bdf);
        f = std::move(w);
      }
      readVfsLight(host, bdf, f->virtfns, vfs, drivers);
    } else if (!f->physfn) {
      readVfsLight(host, bdf, readVirtfns(host, bdf), vfs, drivers);
    }
    s.pci.push_back(std::move(*f));
  }
  sortByBdf(s.pci);

  // 2. Their groups' members and their consumers, whole.
  auto readWhole = [&](const Bdf& bdf) {
    if (!done.insert(bdf).second) return;
    PciFunction* known = s.find(bdf);
    if (!known) return;
    if (auto f = readPciFunction(host, bdf, locked.count(bdf) != 0, known)) *known = std::move(*f);
  };
  for (const auto& b : picked) readWhole(b);
  std::set<int> wanted;
  std::vector<Bdf> reached;
  for (const auto& b : picked) {
    const PciFunction* f = s.find(b);
    if (!f) continue;
    if (f->iommuGroup) wanted.insert(*f->iommuGroup);
    reached.insert(reached.end(), f->consumers.begin(), f->consumers.end());
  }
  if (auto groups = host.listUnordered("sys/kernel/iommu_groups")) {
    for (const auto& g : *groups) {
      auto n = groupNumber(g);
      if (!n) continue;
      auto& members = s.iommuGroups[*n];
      if (!wanted.count(*n)) continue;
      auto devs = host.list(hostPath("sys/kernel/iommu_groups", g, "devices"));
      if (!devs) return readSnapshot(host);
      for (const auto& d : *devs) {
        if (auto b = parseBdf(d)) members.push_back(*b);
      }
      // groupMembers() then matches every function's iommu_group link: all must be read.
      if (members.empty()) return readSnapshot(host);
      reached.insert(reached.end(), members.begin(), members.end());
      wanted.erase(*n);
    }
  }
  if (!wanted.empty()) return readSnapshot(host);  // a group not listed: as above
  for (const auto& b : reached) readWhole(b);
  // A light read keeps the modalias for the whole read after it; a function read light only
  // carries the light attributes.
  for (auto& f : s.pci) {
    if (!done.count(f.bdf)) f.modalias.clear();
  }
  readHostWide(host, s);
  return s;
}

Result<Snapshot> refreshSnapshot(const Host& host, const Snapshot& before,
                                 const std::set<Bdf>& changed, const std::set<Bdf>& rebound) {
  Snapshot s = before;
  const std::set<Bdf> locked = changed.empty() ? std::set<Bdf>{} : lockedByPendingWrites(host);
  for (const auto& bdf : changed) {
    PciFunction* known = s.find(bdf);
    if (!known) return readSnapshot(host);  // new to us: read all
    const bool lockHeld = locked.count(bdf) != 0;
    if (rebound.count(bdf) != 0) {
      if (!readBindingOf(host, *known, lockHeld)) return readSnapshot(host);  // gone
      continue;
    }
    auto f = readPciFunction(host, bdf, lockHeld);
    if (!f) return readSnapshot(host);  // gone: its remove event is on its way
    *known = std::move(*f);
  }
  // A driver registered since `before` (a module loading: its own event comes after the binds
  // its init made), judged by the modules and drivers of now, not of then.
  for (const auto& bdf : changed) {
    const PciFunction* f = s.find(bdf);
    if (f && f->driver && !s.pciDrivers.count(*f->driver)) {
      readModulesAndDrivers(host, s);
      break;
    }
  }
  return s;
}

const PciFunction* Snapshot::find(const Bdf& bdf) const {
  auto it = std::lower_bound(pci.begin(), pci.end(), bdf,
                             [](const PciFunction& f, const Bdf& b) { return f.bdf < b; });
  return it != pci.end() && it->bdf == bdf ? &*it : nullptr;
}

PciFunction* Snapshot::find(const Bdf& bdf) {
  return const_cast<PciFunction*>(std::as_const(*this).find(bdf));
}

bool Snapshot::moduleLoaded(std::string_view module) const {
  return loadedModules.count(normalizeModuleName(module)) != 0;
}

std::vector<const PciFunction*> Snapshot::groupMembers(int group) const {
  std::vector<const PciFunction*> out;
  auto it = iommuGroups.find(group);
  if (it != iommuGroups.end()) {
    for (const auto& b : it->second) {
      if (const auto* f = find(b)) out.push_back(f);
    }
  }
  if (out.empty()) {
    for (const auto& f : pci) {
      if (f.iommuGroup == group) out.push_back(&f);
    }
  }
  return out;
}

}  // namespace hostprep
