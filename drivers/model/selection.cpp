#include "drivers/model/selection.hpp"

#include <algorithm>
#include <array>

#include "drivers/common/text.hpp"

namespace hostprep {

std::string_view toString(Role r) {
  constexpr std::array<std::string_view, 4> kNames{"gpu", "companion", "vf", "nvswitch"};
  return kNames[static_cast<size_t>(r)];
}

bool isNvSwitch(const PciFunction& f) {
  return !f.isVf() && f.id.vendor == kNvidiaVendor && classPrefix(f.classCode) == 0x0680;
}

namespace {
// Names in the enum's order.
constexpr std::string_view kNvSwitchPolicyNames[] = {"auto", "with-gpus", "leave"};
}  // namespace

std::string_view toString(NvSwitchPolicy p) { return kNvSwitchPolicyNames[static_cast<size_t>(p)]; }

std::optional<NvSwitchPolicy> parseNvSwitchPolicy(std::string_view s) {
  for (size_t i = 0; i < std::size(kNvSwitchPolicyNames); ++i) {
    if (s == kNvSwitchPolicyNames[i]) return static_cast<NvSwitchPolicy>(i);
  }
  return std::nullopt;
}

constexpr std::string_view kDriverProviderNames[] = {"host", "operator", "auto"};

std::string_view toString(DriverProvider p) { return kDriverProviderNames[static_cast<size_t>(p)]; }

std::optional<DriverProvider> parseDriverProvider(std::string_view s) {
  for (size_t i = 0; i < std::size(kDriverProviderNames); ++i) {
    if (s == kDriverProviderNames[i]) return static_cast<DriverProvider>(i);
  }
  return std::nullopt;
}

bool nvSwitchesWithGpus(NvSwitchPolicy p, FabricMode m) {
  if (p == NvSwitchPolicy::kAuto) return m == FabricMode::kFullPassthrough;
  return p == NvSwitchPolicy::kWithGpus;
}

std::string describeFunction(const Snapshot& s, const Bdf& b) {
  const auto* f = s.find(b);
  if (!f) return b.str();
  return b.str() + " (" + toString(f->id) + " " + className(f->classCode) + ")";
}

std::string GroupProblem::describe(const Snapshot& s) const {
  std::string g = group ? "IOMMU group " + std::to_string(*group) : "the IOMMU group";
  std::string msg = g + " of GPU " + gpu.str();
  if (holdsRootDisk) {
    msg += " holds the root filesystem's disk";
    if (s.rootDiskPci) msg += " " + describeFunction(s, *s.rootDiskPci);
  }
  std::vector<std::string> names;
  for (const auto& b : foreign) {
    if (!(holdsRootDisk && s.rootDiskPci == b)) names.push_back(describeFunction(s, b));
  }
  if (!names.empty())
    msg += std::string(holdsRootDisk ? " and" : "") + " also holds " + join(names, ", ");
  return msg;
}

std::string UnselectedGpu::describe(const Snapshot& s) const {
  return "GPU " + describeFunction(s, gpu) + " is not selected but shares " +
         (group ? "IOMMU group " + std::to_string(*group) : std::string("the IOMMU group")) +
         " with " + selected.str();
}

bool isSelectedGpu(const PciFunction& f, const SelectionOptions& opt) {
  if (f.isVf()) return false;
  if (!opt.gpuIds.empty()) {
    return std::find(opt.gpuIds.begin(), opt.gpuIds.end(), f.id) != opt.gpuIds.end();
  }
  uint16_t p = classPrefix(f.classCode);
  return f.id.vendor == kNvidiaVendor && (p == 0x0300 || p == 0x0302);
}

bool maySelect(const PciFunction& f, const SelectionOptions& opt) {
  return isSelectedGpu(f, opt) || isNvSwitch(f);
}

Result<Snapshot> readPlanSnapshot(const Host& host, const SelectionOptions& selection) {
  return readSnapshot(
      host, [&](const PciFunction& f) { return maySelect(f, selection) || f.physfn.has_value(); });
}

VgpuHost readPlanVgpuHost(const Host& host, const Snapshot& s, const Selection& sel) {
  std::vector<Bdf> candidates;
  for (const auto& gpu : sel.gpus()) {
    candidates.push_back(gpu);
    if (const auto* f = s.find(gpu))
      candidates.insert(candidates.end(), f->virtfns.begin(), f->virtfns.end());
  }
  return readVgpuHost(host, s, candidates);
}

std::vector<Bdf> Selection::gpus() const {
  std::vector<Bdf> out;
  for (const auto& t : targets) {
    if (t.role == Role::kGpu || t.role == Role::kNvSwitch) out.push_back(t.bdf);
  }
  return out;
}

const Target* Selection::find(const Bdf& b) const {
  for (const auto& t : targets) {
    if (t.bdf == b) return &t;
  }
  return nullptr;
}

Result<Selection> selectDevices(const Snapshot& s, const SelectionOptions& opt) {
  std::vector<const PciFunction*> gpus;
  for (const auto& f : s.pci) {
    if (isSelectedGpu(f, opt)) gpus.push_back(&f);
  }
  if (!opt.devices.empty()) {
    std::vector<const PciFunction*> picked;
    for (const auto& b : opt.devices) {
      const auto* f = s.find(b);
      if (!f) {
        return usageError("--devices: " + b.str() + ": no such PCI function",
                          "list them with: ls /sys/bus/pci/devices");
      }
      if (std::find(gpus.begin(), gpus.end(), f) == gpus.end()) {
        return usageError("--devices: " + describeFunction(s, b) + " is not a selected GPU",
                          "name a GPU, or widen the rule with --gpu-ids VVVV:DDDD");
      }
      picked.push_back(f);
    }
    gpus = picked;
  }
  if (opt.withNvSwitches) {
    for (const auto& f : s.pci) {
      if (isNvSwitch(f) && std::find(gpus.begin(), gpus.end(), &f) == gpus.end())
        gpus.push_back(&f);
    }
  }

  Selection sel;
  auto add = [&](const PciFunction& f, Role role) {
    if (sel.find(f.bdf)) return;
    sel.targets.push_back({f.bdf, role, f.iommuGroup});
  };
  for (const auto* g : gpus) {
    add(*g, classPrefix(g->classCode) == 0x0680 ? Role::kNvSwitch : Role::kGpu);
  }
  for (const auto* g : gpus) {
    GroupProblem problem{g->iommuGroup, g->bdf, {}, false};
    std::vector<const PciFunction*> members;
    if (g->iommuGroup) members = s.groupMembers(*g->iommuGroup);
    for (const auto& c : g->consumers) {
      if (const auto* f = s.find(c)) members.push_back(f);
    }
    for (const auto* m : members) {
      if (s.rootDiskPci && m->bdf == *s.rootDiskPci) problem.holdsRootDisk = true;
      // A bridge stays put when it lets vfio take the group (pcieport, or no driver); one on
      // another driver (a host or ISA bridge on an EDAC or LPC driver) is judged like any other
      // member below. NVSwitches follow their own policy (nvSwitchesWithGpus).
      if (m->bdf == g->bdf || (isBridge(m->classCode) && (letsVfioTakeGroup(*m) || isNvSwitch(*m))))
        continue;
      // A companion is the GPU's own: its vendor's, a consumer the kernel linked to it, or an
      // audio / USB / serial-bus function in its slot. Another vendor's controller elsewhere in
      // the group (a chipset's xHCI or HD audio behind the same root port) is foreign: moving it
      // to vfio-pci would take it from the host, and an ids= list would take every one like it.
      const bool sameSlot = m->bdf.domain == g->bdf.domain && m->bdf.bus == g->bdf.bus &&
                            m->bdf.device == g->bdf.device;
      const bool linked =
          std::find(g->consumers.begin(), g->consumers.end(), m->bdf) != g->consumers.end();
      if (m->id.vendor == g->id.vendor || linked || (sameSlot && isCompanionClass(m->classCode))) {
        if (isSelectedGpu(*m, opt) && std::find(gpus.begin(), gpus.end(), m) == gpus.end() &&
            !sel.find(m->bdf)) {
          sel.unselectedGpus.push_back({m->bdf, g->bdf, g->iommuGroup});
        }
        add(*m, Role::kCompanion);
      } else {
        problem.foreign.push_back(m->bdf);
      }
    }
    if (problem.holdsRootDisk || !problem.foreign.empty()) sel.problems.push_back(problem);
  }
  return sel;
}

}  // namespace hostprep
