#include "checks/vgpu_check.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "checks/findings.hpp"
#include "drivers/resource_names.hpp"
#include "drivers/vgpu_profiles.hpp"

namespace hostprep {
namespace {

// The devices of one vGPU type a config asks for on the node.
struct Expected {
  std::string type;
  std::optional<int64_t> total;  // nullopt: GPU count unknown
  std::string why;               // "6 per GPU × 2 GPUs, built-in profile table"
};

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
        perGpu(d.type, d.count, allGpus, allGpusWord, "the operator's default config");
        any = assumedFilter = true;
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
  // Counts.
  bool countUnknown = false;
  for (const auto& e : want) {
    auto h = have.find(e.type);
    if (h == have.end()) continue;
    if (!e.total) {
      countUnknown = true;
      continue;
    }
    const int64_t got = h->second->shown();
    if (got != *e.total) {
      addFinding(
          n, "vgpu-count-mismatch", Severity::kError,
          "advertises " + std::to_string(got) + " × " + h->second->name + ", but " +
              std::string(kVgpuConfigLabel) + "=" + config + " on " +
              plural(*n.gpus, "GPU", "GPUs") + " must give " + std::to_string(*e.total) + " (" +
              e.why + ")",
          "check " + std::string(kVgpuStateLabel) +
              " and the vgpu-device-manager log; on Ampere "
              "and newer each vGPU needs its own SR-IOV VF (hostprep prepare --mode vm-vgpu "
              "enables "
              "them); the sandbox device plugin counts devices only when it starts, so restart "
              "it "
              "after the devices exist",
          h->second->name);
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
