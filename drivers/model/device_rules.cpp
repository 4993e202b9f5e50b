#include "drivers/model/device_rules.hpp"

#include <algorithm>

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

bool isGpuTarget(const Target& t) { return t.role == Role::kGpu; }

bool matches(const DeviceMatch& m, const PciFunction& f, int index) {
  if (m.bdf && *m.bdf != f.bdf) return false;
  if (m.model && *m.model != f.id) return false;
  if (m.index && *m.index != index) return false;
  if (m.numa && f.numaNode != m.numa) return false;
  return true;
}

// The GPU a companion rides with: one in its IOMMU group, else one that names it as a consumer.
const Target* gpuOf(const Snapshot& s, const Selection& sel, const Target& c) {
  for (const auto& t : sel.targets) {
    if (!isGpuTarget(t)) continue;
    if (c.group && t.group == c.group) return &t;
    const PciFunction* g = s.find(t.bdf);
    if (g && std::find(g->consumers.begin(), g->consumers.end(), c.bdf) != g->consumers.end())
      return &t;
  }
  return nullptr;
}

}  // namespace

std::string DeviceMatch::describe() const {
  std::vector<std::string> parts;
  if (bdf) parts.push_back("bdf: " + bdf->str());
  if (model) parts.push_back("model: " + toString(*model));
  if (index) parts.push_back("index: " + std::to_string(*index));
  if (numa) parts.push_back("numa: " + std::to_string(*numa));
  return "{" + join(parts, ", ") + "}";
}

ResolvedModes resolveModes(const Snapshot& s, const Selection& sel, Mode defaultMode,
                           const std::vector<DeviceRule>& rules) {
  ResolvedModes r;
  std::vector<bool> used(rules.size(), false);
  int index = 0;
  for (const auto& t : sel.targets) {  // GPUs come first, in BDF order
    if (!isGpuTarget(t)) continue;
    Mode m = defaultMode;
    if (const PciFunction* f = s.find(t.bdf)) {
      for (size_t i = 0; i < rules.size(); ++i) {
        if (matches(rules[i].match, *f, index)) {
          m = rules[i].mode;
          used[i] = true;
          break;
        }
      }
    }
    r.modes[t.bdf] = m;
    ++index;
  }
  for (const auto& t : sel.targets) {
    if (isGpuTarget(t)) continue;
    const Target* g = t.role == Role::kCompanion ? gpuOf(s, sel, t) : nullptr;
    r.modes[t.bdf] = g ? r.modes[g->bdf] : defaultMode;
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    if (used[i]) continue;
    // A rule shadowed by an earlier one matches nothing either: both are worth a look.
    r.warnings.push_back("devices[" + std::to_string(i) + "] " + rules[i].match.describe() +
                         " matches no selected GPU (or only GPUs an earlier rule took)");
  }
  return r;
}

DeviceModes uniformModes(const Selection& sel, Mode m) {
  DeviceModes out;
  for (const auto& t : sel.targets) out[t.bdf] = m;
  return out;
}

std::map<Mode, int> modeSplit(const Selection& sel, const DeviceModes& modes) {
  std::map<Mode, int> out;
  for (const auto& t : sel.targets) {
    if (!isGpuTarget(t)) continue;
    if (auto it = modes.find(t.bdf); it != modes.end()) ++out[it->second];
  }
  return out;
}

std::optional<Mode> singleMode(const std::map<Mode, int>& split) {
  if (split.size() != 1) return std::nullopt;
  return split.begin()->first;
}

Status checkModeMix(const std::map<Mode, int>& split) {
  if (split.count(Mode::kContainer) && split.count(Mode::kVmVgpu)) {
    return usageError(
        "devices: container and vm-vgpu cannot share a node: one nvidia module cannot be both "
        "the datacenter driver and the vGPU manager (" +
            std::to_string(split.at(Mode::kContainer)) + " GPU(s) container, " +
            std::to_string(split.at(Mode::kVmVgpu)) + " GPU(s) vm-vgpu)",
        "mix container with vm-passthrough, or vm-passthrough with vm-vgpu");
  }
  return {};
}

Status checkGroupModes(const Snapshot& s, const Selection& sel, const DeviceModes& modes) {
  std::vector<std::string> clashes;
  std::vector<const Target*> gpus;
  for (const auto& t : sel.targets) {
    if (isGpuTarget(t) && t.group) gpus.push_back(&t);
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      if (gpus[i]->group != gpus[j]->group) continue;
      const Mode a = modeOf(modes, gpus[i]->bdf, Mode::kContainer);
      const Mode b = modeOf(modes, gpus[j]->bdf, Mode::kContainer);
      if (a == b) continue;
      clashes.push_back("GPU " + describeFunction(s, gpus[i]->bdf) + " (" +
                        std::string(toString(a)) + ") and GPU " +
                        describeFunction(s, gpus[j]->bdf) + " (" + std::string(toString(b)) +
                        ") share IOMMU group " + std::to_string(*gpus[i]->group));
    }
  }
  if (clashes.empty()) return {};
  return refusal("refusing to split an IOMMU group between modes: " + join(clashes, "; "),
                 "vfio hands a VM the whole group: give both GPUs one mode in the config's "
                 "devices rules, or move one to a slot with its own group (ACS)");
}

Mode modeOf(const DeviceModes& modes, const Bdf& b, Mode fallback) {
  auto it = modes.find(b);
  return it == modes.end() ? fallback : it->second;
}

Selection selectionInMode(const Selection& sel, const DeviceModes& modes, Mode m) {
  Selection out;
  auto in = [&](const Bdf& b) { return modes.count(b) && modes.at(b) == m; };
  for (const auto& t : sel.targets) {
    if (in(t.bdf)) out.targets.push_back(t);
  }
  for (const auto& p : sel.problems) {
    if (in(p.gpu)) out.problems.push_back(p);
  }
  for (const auto& u : sel.unselectedGpus) {
    if (in(u.selected)) out.unselectedGpus.push_back(u);
  }
  return out;
}

std::string splitText(const std::map<Mode, int>& split) {
  std::vector<std::string> parts;
  for (const auto& [m, n] : split)
    parts.push_back(std::string(toString(m)) + ": " + std::to_string(n));
  return join(parts, ", ");
}

}  // namespace hostprep
