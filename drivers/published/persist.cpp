#include "drivers/published/persist.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "drivers/common/text.hpp"
#include "drivers/published/bootconfig.hpp"

namespace hostprep {
namespace {

constexpr const char* kVfioModules[] = {"vfio", "vfio_iommu_type1", "vfio_pci"};

// Drivers that would claim a selected function before vfio-pci does, by its class.
void softdepsFor(const PciFunction& f, std::set<std::string>& out) {
  const uint16_t p = classPrefix(f.classCode);
  if (baseClass(f.classCode) == 0x03 || p == 0x0680) {
    out.insert({"nvidia", "nouveau", "nvidiafb"});
  } else if (p == 0x0403) {
    out.insert("snd_hda_intel");
  } else if (p == 0x0c03) {
    out.insert("xhci_pci");
  } else if (p == 0x0c80) {
    out.insert("ucsi_ccg");
  }
}

}  // namespace

bool PersistPlan::noop() const {
  return std::none_of(files.begin(), files.end(), [](const PersistFile& f) { return f.changes; });
}

std::string withInitramfsBlock(std::string_view current, const std::vector<std::string>& modules) {
  std::string out;
  bool inBlock = false;
  for (auto line : splitLines(current)) {
    if (line == kInitramfsBegin) {
      inBlock = true;
      continue;
    }
    if (inBlock) {
      if (line == kInitramfsEnd) inBlock = false;
      continue;
    }
    out += std::string(line) + "\n";
  }
  if (!modules.empty()) {
    out += std::string(kInitramfsBegin) + "\n";
    for (const auto& m : modules) out += m + "\n";
    out += std::string(kInitramfsEnd) + "\n";
  }
  return out;
}

VfioIds vfioIdsFor(const Snapshot& s, const Selection& sel, const DeviceModes& modes) {
  std::set<PciId> passthrough, others;
  for (const auto& t : sel.targets) {
    const auto* f = s.find(t.bdf);
    if (!f) continue;
    if (modeOf(modes, t.bdf, Mode::kContainer) == Mode::kVmPassthrough) {
      passthrough.insert(f->id);
    } else {
      others.insert(f->id);
    }
  }
  VfioIds v;
  for (const auto& id : passthrough) (others.count(id) ? v.shared : v.claim).insert(id);
  return v;
}

PersistPlan makePersistPlan(
    const Snapshot& s, const Selection& sel, Mode mode,
    const std::function<std::optional<std::string>(std::string_view)>& current) {
  return makePersistPlan(s, sel, uniformModes(sel, mode), current);
}

PersistPlan makePersistPlan(
    const Snapshot& s, const Selection& sel, const DeviceModes& modes,
    const std::function<std::optional<std::string>(std::string_view)>& current) {
  PersistPlan p;
  std::vector<const Target*> pt;
  std::set<Mode> others;
  for (const auto& t : sel.targets) {
    const Mode m = modeOf(modes, t.bdf, Mode::kContainer);
    if (m == Mode::kVmPassthrough) {
      pt.push_back(&t);
    } else if (t.role == Role::kGpu) {
      others.insert(m);
    }
  }
  const bool passthrough = !pt.empty();
  const bool split = passthrough && !others.empty();
  std::optional<std::string> modprobe, modulesLoad;
  std::vector<std::string> initramfs;
  if (passthrough) {
    const VfioIds ids = vfioIdsFor(s, sel, modes);
    std::set<std::string> softdeps;
    for (const auto* t : pt) {
      if (const auto* f = s.find(t->bdf)) softdepsFor(*f, softdeps);
    }
    // vfio-pci.ids takes every function with the id, selected or not.
    for (const auto& f : s.pci) {
      if (ids.claim.count(f.id) && !sel.find(f.bdf) && !f.isVf()) {
        p.warnings.push_back(f.bdf.str() + " (" + toString(f.id) +
                             ") is not selected but shares an id " +
                             "with a selected device: vfio-pci will claim it at boot too");
      }
    }
    std::vector<std::string> claim, shared, otherModes;
    for (const auto& id : ids.claim) claim.push_back(toString(id));
    for (const auto& id : ids.shared) shared.push_back(toString(id));
    for (const auto m : others) otherModes.push_back(std::string(toString(m)));
    std::string m =
        split
            ? "# Written by 'hostprep persist' for the vm-passthrough GPUs of a split node;\n"
              "# removed when no GPU is in vm-passthrough mode.\n"
            : "# Written by 'hostprep persist --mode vm-passthrough'; removed by any other mode.\n";
    m += "# vfio-pci claims the selected GPUs and their companions at boot, before their\n"
         "# host drivers load.\n";
    if (!shared.empty()) {
      m += "# Not in ids= (GPUs in " + join(otherModes, ", ") +
           " mode share them): " + join(shared, ",") +
           ";\n# hostprep-prepare.service binds those at boot.\n";
      p.notes.push_back(
          "vfio-pci ids=: " + join(shared, ",") + " left out: GPUs in vm-passthrough and " +
          join(otherModes, ", ") +
          " mode share them, and vfio-pci would claim every device with these ids at boot; "
          "hostprep-prepare.service hands the vm-passthrough ones to vfio-pci at boot "
          "(driver_override) instead: keep it enabled ('systemctl enable " +
          std::string(kPrepareUnit) + "')");
    }
    if (!claim.empty()) m += "options vfio-pci ids=" + join(claim, ",") + "\n";
    for (const auto& d : softdeps) m += "softdep " + d + " pre: vfio-pci\n";
    modprobe = m;
    std::string l = split ? "# Written by 'hostprep persist'.\n"
                          : "# Written by 'hostprep persist --mode vm-passthrough'.\n";
    for (const char* mod : kVfioModules) l += std::string(mod) + "\n";
    modulesLoad = l;
    initramfs.assign(std::begin(kVfioModules), std::end(kVfioModules));
  }
  auto plan = [&](std::string_view path, std::optional<std::string> content) {
    auto now = current(path);
    p.files.push_back({std::string(path), content, now != content});
  };
  plan(kPersistModprobe, modprobe);
  plan(kPersistModulesLoad, modulesLoad);
  // The initramfs list is edited, never created or removed as a whole.
  auto now = current(kInitramfsModules);
  if (now || passthrough) {
    std::string next = withInitramfsBlock(now.value_or(""), initramfs);
    bool changes = next != now.value_or("");
    p.files.push_back({std::string(kInitramfsModules), next, changes});
    p.initramfsChanges = changes;
  }
  // modprobe.d options are copied into the initramfs too.
  if (p.files[0].changes) p.initramfsChanges = true;
  return p;
}

Status applyPersistPlan(Host& host, const PersistPlan& p) {
  for (const auto& f : p.files) {
    if (!f.changes) continue;
    if (!f.content) {
      if (auto s = host.removeFile(f.path); !s) return s;
      continue;
    }
    auto slash = f.path.rfind('/');
    if (slash != std::string::npos && !host.exists(f.path.substr(0, slash))) {
      if (auto s = host.makeDirs(f.path.substr(0, slash), 0755); !s) return s;
    }
    if (auto s = host.writeFileAtomic(f.path, *f.content, 0644); !s) return s;
  }
  return {};
}

}  // namespace hostprep
