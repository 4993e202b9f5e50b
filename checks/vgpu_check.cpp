#include "checks/vgpu_check.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "checks/findings.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/resource_names.hpp"
#include "drivers/model/vgpu_profiles.hpp"

namespace hostprep {
namespace {

// The devices of one vGPU type a config asks for on the node.
struct Expected {
  std::string type;
  std::optional<int64_t> total;  // nullopt: GPU count unknown
  std::string why;               // "6 per GPU × 2 GPUs, built-in profile table"
  bool inferred = false;         // also asked of GPUs a device-filter picks, their count unknown
};

// The GPUs of one model that one device-filter picks on a node whose GPU models are unknown (no
// --status): how many there are is inferred from the types the node advertises.
struct FilterGroup {
  std::string filter;                     // "0x223610DE", as the config writes it
  std::string model;                      // "A10"
  std::map<std::string, int64_t> perGpu;  // type -> devices per GPU
  std::string from;                       // "config 'x' in --vgpu-config"
  int64_t gpus = 0;                       // the count found, once found
};

// The GPU model a vGPU type belongs to: its name up to the first '-' ("A10-12Q" -> "A10",
// "A100-1-5C" -> "A100"), the GPU part of both type name patterns of NVIDIA/vgpu-device-manager
// (pkg/types/vgpu_type.go). A type is made by that model's GPUs only.
std::string modelOf(std::string_view type) { return std::string(type.substr(0, type.find('-'))); }

// A device-filter as vgpu-device-manager's config writes it: "0x223610DE", "0x25B610DE:0x14D410DE".
std::string filterText(PciId id) {
  std::string hex = hexDigits(id.device, 4) + hexDigits(id.vendor, 4);
  std::transform(hex.begin(), hex.end(), hex.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return "0x" + hex;
}
std::string filterText(const std::vector<VgpuDeviceFilter>& filters) {
  std::vector<std::string> parts;
  for (const auto& f : filters) {
    parts.push_back(filterText(f.device) + (f.subsystem ? ":" + filterText(*f.subsystem) : ""));
  }
  return join(parts, ", ");
}

// Splits `gpus` GPUs among the groups (each group's gpus) so that every type in `need` gets
// exactly its count (what the node advertises, less what entries for every GPU give). A group
// none of whose types is advertised gets no GPU. False when no split fits; true also when the
// search is too large to finish (a guess left unchecked rather than a false error).
bool splitGpus(std::vector<FilterGroup>& groups, int64_t gpus,
               const std::map<std::string, int64_t>& need) {
  std::map<std::string, size_t> last;  // type -> the last group that gives it
  for (size_t i = 0; i < groups.size(); ++i) {
    for (const auto& [type, count] : groups[i].perGpu) {
      if (need.count(type)) last[type] = i;
    }
  }
  std::map<std::string, int64_t> sum;
  int64_t budget = 1'000'000;
  std::function<bool(size_t, int64_t)> place = [&](size_t i, int64_t left) -> bool {
    if (i == groups.size()) return left == 0;
    FilterGroup& g = groups[i];
    const bool advertised = std::any_of(g.perGpu.begin(), g.perGpu.end(),
                                        [&](const auto& t) { return need.count(t.first) != 0; });
    for (int64_t k = 0; k <= (advertised ? left : 0); ++k) {
      if (--budget < 0) return true;
      bool fits = true;
      for (const auto& [type, count] : g.perGpu) {
        auto want = need.find(type);
        if (want == need.end()) continue;
        const int64_t got = sum[type] + k * count;
        if (got > want->second || (last[type] == i && got != want->second)) fits = false;
      }
      if (!fits) continue;
      for (const auto& [type, count] : g.perGpu) sum[type] += k * count;
      g.gpus = k;
      const bool found = place(i + 1, left - k);
      for (const auto& [type, count] : g.perGpu) sum[type] -= k * count;
      if (found) return true;
    }
    return false;
  };
  return place(0, gpus);
}

// What to do about a count the config does not give.
std::string countFix() {
  return "check " + std::string(kVgpuStateLabel) +
         " and the vgpu-device-manager log; on Ampere and newer each vGPU needs its own SR-IOV "
         "VF (hostprep prepare --mode vm-vgpu enables them); the sandbox device plugin counts "
         "devices only when it starts, so restart it after the devices exist";
}

// No split of the node's GPUs among the groups fits (splitGpus): a type whose count no number of
// GPUs gives is named on its own; when each fits alone, one finding names the GPUs each implies.
void countMismatchUnsplit(NodeResult& n, const std::vector<FilterGroup>& groups,
                          const std::map<std::string, int64_t>& need,
                          const std::map<std::string, const ResourceCount*>& have,
                          const std::string& config) {
  const int64_t gpus = *n.gpus;
  const std::string label = std::string(kVgpuConfigLabel) + "=" + config;
  const std::string nodeGpus = plural(gpus, "GPU", "GPUs");
  std::vector<std::string> implied;
  std::set<std::string> seen;
  bool eachFits = true;
  for (const auto& g : groups) {
    for (const auto& entry : g.perGpu) {
      const std::string& type = entry.first;  // not a structured binding: the lambda captures it
      const int64_t count = entry.second;
      auto it = need.find(type);
      if (it == need.end() || !seen.insert(type).second) continue;
      const ResourceCount& r = *have.at(type);
      const std::string shown = std::to_string(r.shown()) + " × " + r.name;
      const int64_t fixed = r.shown() - it->second;  // from entries for every GPU
      const std::string plus =
          fixed ? " on top of " + std::to_string(fixed) + " from entries for every GPU" : "";
      const auto givers = std::count_if(groups.begin(), groups.end(), [&](const FilterGroup& x) {
        return x.perGpu.count(type) != 0;
      });
      if (givers > 1 || count == 0) {
        implied.push_back(shown);
        continue;
      }
      if (it->second >= 0 && it->second % count == 0 && it->second / count <= gpus) {
        implied.push_back(plural(it->second / count, "GPU", "GPUs") + " of " + g.filter + " for " +
                          shown + " at " + std::to_string(count) + " per GPU" + plus);
        continue;
      }
      eachFits = false;
      addFinding(n, "vgpu-count-mismatch", Severity::kError,
                 "advertises " + shown + ", but " + label + " gives " + std::to_string(count) +
                     " per " + g.model + " GPU that device-filter " + g.filter + " matches (" +
                     g.from + ")" + plus + ": no number of the node's " + nodeGpus + " gives " +
                     std::to_string(r.shown()),
                 countFix(), r.name);
    }
  }
  if (!eachFits) return;
  addFinding(n, "vgpu-count-mismatch", Severity::kError,
             "the advertised vGPU types need " + join(implied, ", ") + ", but " + label + " (" +
                 groups.front().from + ") splits the node's " + nodeGpus +
                 " among its device-filters: no split gives every type its count",
             countFix());
}

}  // namespace

void checkVgpu(NodeResult& n, const NodeFacts& f, const std::optional<VgpuConfigFile>& configs) {
  const Labels& labels = f.labels;
  const StatusView* st = f.status;
  auto state = labels.get(kVgpuStateLabel);
  auto label = labels.get(kVgpuConfigLabel);
  const std::string config = label.value_or("default");
  if (state == std::optional<std::string>("failed")) {
    addFinding(
        n, "vgpu-config-failed", Severity::kError,
        std::string(kVgpuStateLabel) + "=failed: the vgpu-device-manager could not apply '" +
            config + "'",
        "read the nvidia-vgpu-device-manager log on the node; on Ampere and newer enable SR-IOV "
        "VFs first (hostprep prepare --mode vm-vgpu)");
  } else if (state == std::optional<std::string>("pending") ||
             state == std::optional<std::string>("rebooting")) {
    addFinding(n, "vgpu-config-pending", Severity::kWarning,
               std::string(kVgpuStateLabel) + "=" + *state + ": '" + config +
                   "' is still being applied; the "
                   "counts below may be in flux",
               "wait, then run check-node again");
  }

  // What the node advertises, by type.
  std::map<std::string, const ResourceCount*> have;
  for (const auto& r : n.resources) {
    if (r.kind == ResourceKind::kVgpu && r.advertised()) have[*vgpuTypeOf(r.name)] = &r;
  }

  // What the config asks for.
  std::vector<Expected> want;
  std::optional<std::string> unknown;  // why the config could not be resolved
  bool assumedFilter = false;
  // `count` devices of `type` on each of `gpus` GPUs (nullopt: unknown), which `gpusWord` names
  // ("2 GPUs", "1 matching GPU"), as `from` says.
  auto perGpu = [&](const std::string& type, int64_t count, std::optional<int64_t> gpus,
                    const std::string& gpusWord, const std::string& from) {
    auto it =
        std::find_if(want.begin(), want.end(), [&](const Expected& e) { return e.type == type; });
    if (it == want.end()) {
      want.push_back({type, gpus ? std::optional<int64_t>(0) : std::nullopt, ""});
      it = want.end() - 1;
    }
    if (it->total && gpus) *it->total += count * *gpus;
    it->why += (it->why.empty() ? "" : " + ") + std::to_string(count) + " per GPU" +
               (gpusWord.empty() ? "" : " × " + gpusWord) + ", " + from;
  };
  const std::optional<int64_t> allGpus = n.gpus ? std::optional<int64_t>(*n.gpus) : std::nullopt;
  const std::string allGpusWord = n.gpus ? plural(*n.gpus, "GPU", "GPUs") : std::string();
  auto matching = [](int64_t k) { return plural(k, "matching GPU", "matching GPUs"); };
  const std::vector<uint16_t> ids = st ? st->gpuDeviceIds : std::vector<uint16_t>{};
  // Without the GPUs' device ids, the GPUs a device-filter picks are counted by model, from what
  // the node advertises: `count` devices of `type` on each GPU of `filter`.
  std::vector<FilterGroup> groups;
  auto perFilteredGpu = [&](const std::string& filter, const std::string& type, int64_t count,
                            const std::string& from) {
    const std::string model = modelOf(type);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const FilterGroup& x) {
      return x.filter == filter && x.model == model;
    });
    if (g == groups.end()) g = groups.insert(groups.end(), FilterGroup{filter, model, {}, from, 0});
    g->perGpu[type] += count;
    auto it =
        std::find_if(want.begin(), want.end(), [&](const Expected& e) { return e.type == type; });
    if (it == want.end()) it = want.insert(want.end(), Expected{type, 0, "", false});
    it->inferred = true;
  };
  if (configs) {
    const auto* entries = configs->find(config);
    if (!entries) {
      addFinding(
          n, "vgpu-config-unknown", Severity::kError,
          std::string(kVgpuConfigLabel) + "=" + config +
              " names no config in --vgpu-config: the "
              "vgpu-device-manager cannot apply it",
          "use one of the names under vgpu-configs, or add '" + config + "' to the ConfigMap");
      return;
    }
    const std::string from = "config '" + config + "' in --vgpu-config";
    for (const auto& e : *entries) {
      // The GPUs the entry applies to: all of them, or those its device-filter matches.
      std::optional<int64_t> gpus = allGpus;
      std::string gpusWord = allGpusWord;
      if (!e.filters.empty()) {
        if (!ids.empty()) {
          // The node's labels give device ids, not subsystems: a filter's subsystem is not
          // judged.
          gpus = std::count_if(ids.begin(), ids.end(), [&](uint16_t id) {
            return std::any_of(
                e.filters.begin(), e.filters.end(), [&](const VgpuDeviceFilter& filter) {
                  return filter.device.device == id && filter.device.vendor == kNvidiaVendor;
                });
          });
          if (*gpus == 0) continue;
          if (*gpus != *allGpus) gpusWord = matching(*gpus);
        } else {
          // The GPU model is unknown: take the entry if the node shows one of its types.
          bool shows = std::any_of(e.vgpuDevices.begin(), e.vgpuDevices.end(),
                                   [&](const auto& t) { return have.count(t.first) != 0; });
          if (!shows) continue;
          if (!e.devices) {
            // How many GPUs it matches is inferred from the counts, model by model.
            for (const auto& [type, count] : e.vgpuDevices)
              perFilteredGpu(filterText(e.filters), type, count, from);
            continue;
          }
          assumedFilter = true;
        }
      }
      if (e.devices) {
        // Explicit GPU indices: the count is per listed GPU, not per node GPU.
        gpus = static_cast<int64_t>(e.devices->size());
        if (n.gpus)
          gpus = std::count_if(e.devices->begin(), e.devices->end(),
                               [&](int i) { return i < *n.gpus; });
        gpusWord = plural(*gpus, "listed GPU", "listed GPUs");
      }
      for (const auto& [type, count] : e.vgpuDevices) perGpu(type, count, gpus, gpusWord, from);
    }
  } else if (config == "default") {
    // Each GPU model gets its own default entries.
    bool any = false;
    if (!ids.empty()) {
      for (uint16_t id : std::set<uint16_t>(ids.begin(), ids.end())) {
        const auto gpus = static_cast<int64_t>(std::count(ids.begin(), ids.end(), id));
        const std::string word = gpus == *allGpus ? allGpusWord : matching(gpus);
        for (const auto& d : vgpuProfiles().defaultsFor({kNvidiaVendor, id})) {
          perGpu(d.type, d.count, gpus, word, "the operator's default config");
          any = true;
        }
      }
    } else {
      for (const auto& d : vgpuProfiles().defaults) {
        if (!have.count(d.type)) continue;
        perFilteredGpu(filterText(d.device), d.type, d.count, "the operator's default config");
        any = true;
      }
    }
    if (!any) unknown = "the 'default' config depends on the GPU model, which is unknown here";
  } else if (auto max = vgpuProfiles().maxInstances(config)) {
    perGpu(config, *max, allGpus, allGpusWord, "built-in profile table");
  } else {
    unknown = "'" + config + "' is neither a vGPU type in the built-in profile table nor 'default'";
  }
  if (unknown) {
    addFinding(n, "vgpu-config-unverified", Severity::kWarning,
               "could not verify " + std::string(kVgpuConfigLabel) + "=" + config + ": " + *unknown,
               "pass the vgpu-device-manager config with --vgpu-config (and the node's status with "
               "--status for its GPU model)");
    return;
  }
  if (assumedFilter) {
    addFinding(
        n, "vgpu-device-filter-assumed", Severity::kInfo,
        "the GPU model is unknown: assumed every GPU matches the config entries whose types the "
        "node advertises",
        "pass the node's hostprep status document with --status to check by device id");
  }

  // Types: exactly the configured ones, no others.
  std::vector<std::string> extra, absent;
  for (const auto& [haveType, r] : have) {
    const std::string& type = haveType;
    if (std::none_of(want.begin(), want.end(), [&](const Expected& e) { return e.type == type; })) {
      extra.push_back(r->name + " (" + std::to_string(r->shown()) + ")");
    }
  }
  for (const auto& e : want) {
    if (!have.count(e.type)) absent.push_back(e.type);
  }
  if (!have.empty() && (!extra.empty() || !absent.empty())) {
    std::vector<std::string> wanted;
    for (const auto& e : want) wanted.push_back(e.type);
    addFinding(
        n, "vgpu-type-mismatch", Severity::kError,
        std::string(kVgpuConfigLabel) + "=" + config + " asks for " + join(wanted, ", ") +
            (extra.empty() ? std::string() : ", but the node advertises " + join(extra, ", ")) +
            (absent.empty()
                 ? std::string()
                 : (extra.empty() ? ", but " : "; ") + join(absent, ", ") + " not advertised"),
        "the devices were created for another config, or the sandbox device plugin still shows "
        "the old ones: check " +
            std::string(kVgpuStateLabel) +
            " and restart the sandbox device "
            "plugin on the node");
  }
  // Counts: first the types of GPUs a device-filter picks, their number unknown. Their counts
  // must come from one split of the node's GPUs among the filters' models.
  bool countUnknown = false;
  if (!groups.empty() && !n.gpus) countUnknown = true;
  if (!groups.empty() && n.gpus) {
    std::map<std::string, int64_t> need;  // advertised, less what entries for every GPU give
    for (const auto& e : want) {
      auto h = have.find(e.type);
      if (e.inferred && h != have.end() && e.total) need[e.type] = h->second->shown() - *e.total;
    }
    if (splitGpus(groups, *n.gpus, need)) {
      std::vector<std::string> split;
      for (const auto& g : groups) {
        if (g.gpus == 0) continue;
        std::vector<std::string> types;
        for (const auto& t : g.perGpu) types.push_back(t.first);
        split.push_back(plural(g.gpus, "GPU", "GPUs") + " of " + g.filter + " (" +
                        join(types, ", ") + ")");
      }
      addFinding(n, "vgpu-device-filter-assumed", Severity::kInfo,
                 "the GPU models are unknown: the GPUs each device-filter matches were inferred "
                 "from the vGPU types the node advertises: " +
                     join(split, ", ") + " of its " + plural(*n.gpus, "GPU", "GPUs"),
                 "pass the node's hostprep status document with --status to check by device id");
    } else {
      countMismatchUnsplit(n, groups, need, have, config);
    }
  }
  for (const auto& e : want) {
    auto h = have.find(e.type);
    if (h == have.end() || e.inferred) continue;
    if (!e.total) {
      countUnknown = true;
      continue;
    }
    const int64_t got = h->second->shown();
    if (got != *e.total) {
      addFinding(n, "vgpu-count-mismatch", Severity::kError,
                 "advertises " + std::to_string(got) + " × " + h->second->name + ", but " +
                     std::string(kVgpuConfigLabel) + "=" + config + " on " +
                     plural(*n.gpus, "GPU", "GPUs") + " must give " + std::to_string(*e.total) +
                     " (" + e.why + ")",
                 countFix(), h->second->name);
    }
  }
  if (countUnknown) {
    addFinding(n, "gpu-count-unknown", Severity::kInfo,
               "the vGPU count was not checked: the node has no " + std::string(kGpuCountLabel) +
                   " label and no --status document",
               "pass the node's hostprep status document with --status");
  }
}

}  // namespace hostprep
