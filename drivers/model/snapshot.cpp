#include "drivers/model/snapshot.hpp"

#include <algorithm>
#include <utility>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/journal.hpp"

namespace hostprep {
namespace {

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
