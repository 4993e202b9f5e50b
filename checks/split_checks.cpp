#include "checks/split_checks.hpp"

#include <algorithm>
#include <array>

#include "checks/findings.hpp"
#include "checks/operands.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {

using nlohmann::json;

std::string GpuSplit::describe() const {
  std::vector<std::string> parts;
  for (Mode m : {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu}) {
    if (of(m) > 0) parts.push_back(std::string(toString(m)) + "=" + std::to_string(of(m)));
  }
  return join(parts, ", ");
}

namespace {

// The mode whose device plugin advertises resources of kind k.
constexpr std::array kKindModes{Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu};
Mode modeOfKind(ResourceKind k) { return kKindModes[static_cast<size_t>(k)]; }

}  // namespace

// 1b. The declared split.
void readSplit(NodeResult& n, const NodeFacts& f) {
  if (!f.labels.is(kDesiredModeLabel, kMixedMode)) return;
  GpuSplit split;
  std::vector<std::string> problems;
  if (const json* l = f.labels.raw()) {
    forEachPrefixed(*l, kSplitLabelPrefix, [&](const std::string& key, const json& v) {
      const auto mode = parseMode(std::string_view(key).substr(kSplitLabelPrefix.size()));
      const auto value = scalarText(v);
      const auto count = value ? parseUnsigned(*value) : std::nullopt;
      if (!mode) {
        problems.push_back(key + " names no mode (" + std::string(kModeChoices) + ")");
      } else if (!count || *count > 4096) {
        problems.push_back(key + "='" + value.value_or("") + "' is not a GPU count");
      } else {
        split.gpus[static_cast<size_t>(*mode)] = static_cast<int64_t>(*count);
      }
    });
  }
  const auto modes =
      std::count_if(split.gpus.begin(), split.gpus.end(), [](int64_t g) { return g > 0; });
  if (problems.empty() && modes < 2) {
    problems.push_back(modes == 0 ? "no " + std::string(kSplitLabelPrefix) +
                                        "<mode> label gives a mode any GPU"
                                  : "only " + split.describe() + " has GPUs: that is one mode");
  }
  if (split.of(Mode::kContainer) > 0 && split.of(Mode::kVmVgpu) > 0) {
    problems.push_back(
        "container and vm-vgpu GPUs on one node: the one nvidia module cannot be both the "
        "datacenter driver and the vGPU manager");
  }
  if (!problems.empty()) {
    addFinding(n, "split-invalid", Severity::kError,
               std::string(kDesiredModeLabel) + "=" + std::string(kMixedMode) +
                   " declares a split that cannot be: " + join(problems, "; ") +
                   "; the node is checked as a " + std::string(toString(n.mode)) + " node",
               "fix the devices rules of /etc/hostprep/config.yaml on the node (container + "
               "vm-passthrough or vm-passthrough + vm-vgpu) and let the agent converge; NFD "
               "republishes the labels from its features.d file");
    return;
  }
  n.split = split;
}

// 3b. A split node's resources against its split.
void checkSplit(NodeResult& n, const NodeFacts& f) {
  const GpuSplit& split = *n.split;
  const std::string declared = "the declared split (" + split.describe() + ")";
  std::array<int64_t, 3> allocatable{};  // per mode, of the resources advertised
  std::array<std::vector<std::string>, 3> names;
  // nvidia.com/gpu counts whole GPUs, times the time-slicing replicas; with MIG it counts
  // instances.
  bool containerCountable = !f.migSingle;
  for (const auto& r : n.resources) {
    if (r.kind == ResourceKind::kOther) continue;
    const Mode m = modeOfKind(r.kind);
    if (split.of(m) == 0) {
      if (!r.advertised()) {
        addFinding(n, "resource-stale", Severity::kInfo,
                   r.name + " is registered with 0 devices: left over from an earlier mode",
                   "harmless; it disappears when the kubelet restarts", r.name);
      } else {
        addFinding(n, "split-undeclared-kind", Severity::kError,
                   "advertises " + r.name + " (" + std::to_string(r.shown()) + "), a " +
                       std::string(kindWord(r.kind)) + " resource, but " + declared + " has no " +
                       std::string(toString(m)) + " GPU",
                   "a device plugin still counts GPUs the split moved away: run 'hostprep agent "
                   "--once' on the node, then restart the device plugin that advertises " +
                       r.name,
                   r.name);
      }
      continue;
    }
    if (r.kind == ResourceKind::kContainer && r.name != kContainerResource)
      containerCountable = false;
    allocatable[static_cast<size_t>(m)] += r.allocatable.value_or(0);
    names[static_cast<size_t>(m)].push_back(r.name + ": " +
                                            std::to_string(r.allocatable.value_or(0)));
    if (r.capacity && r.allocatable && *r.capacity != *r.allocatable) {
      addFinding(n, "capacity-allocatable-mismatch", Severity::kWarning,
                 r.name + ": " + std::to_string(*r.capacity) + " in capacity but " +
                     std::to_string(*r.allocatable) + " allocatable",
                 "check the device plugin's log on the node for unhealthy devices", r.name);
    }
    if (rawDeviceId(r.name)) {
      addFinding(n, "resource-raw-device-id", Severity::kWarning,
                 r.name + " is a raw PCI device id: the host's pci.ids does not know this GPU",
                 "update pci.ids on the host (update-pciids, or the hwdata package) and restart "
                 "the sandbox device plugin",
                 r.name);
    }
  }
  // What each mode's plugin should count (NVIDIA/k8s-device-plugin: one nvidia.com/gpu per GPU on
  // the nvidia driver; NVIDIA/kubevirt-gpu-device-plugin: one PCI-name device per vfio-pci GPU).
  // vGPU counts depend on the vGPU config: only their presence is checked here (see checkVgpu).
  // With the device plugins off, the DRA driver's devices stand for them (see checkResources).
  const DraNodeDevices* dra = f.dra;
  const int64_t container = split.of(Mode::kContainer);
  const bool containerByDra =
      allocatable[static_cast<size_t>(Mode::kContainer)] == 0 && dra && dra->gpus > 0;
  if (container > 0 && containerByDra && dra->gpusKnown && dra->gpus != container) {
    addFinding(n, "split-count-mismatch", Severity::kError,
               "the DRA driver " + std::string(kNvidiaDraDriver) + " publishes " +
                   plural(dra->gpus, "GPU", "GPUs") +
                   " (devices of type gpu or mig, ResourceSlice " + dra->slice + ") but " +
                   declared + " has " + plural(container, "container GPU", "container GPUs"),
               "check the DRA driver's kubelet plugin on the node: it publishes the GPUs on the "
               "nvidia driver, so restart it after 'hostprep agent --once' converged");
  } else if (container > 0 && containerCountable && !containerByDra) {
    const int64_t have = allocatable[static_cast<size_t>(Mode::kContainer)];
    const int64_t want = container * f.replicas.value_or(1);
    if (have != want) {
      addFinding(n, "split-count-mismatch", Severity::kError,
                 std::string(kContainerResource) + " has " + std::to_string(have) +
                     " allocatable but " + declared + " has " +
                     plural(container, "container GPU", "container GPUs") +
                     (want != container ? " × " + std::to_string(*f.replicas) + " replicas" : ""),
                 "check the nvidia-device-plugin pod on the node: it counts the GPUs on the nvidia "
                 "driver when it starts, so restart it after 'hostprep agent --once' converged",
                 std::string(kContainerResource));
    }
  }
  const int64_t passthrough = split.of(Mode::kVmPassthrough);
  const bool passthroughByDra =
      allocatable[static_cast<size_t>(Mode::kVmPassthrough)] == 0 && dra && dra->vfio > 0;
  if (passthrough > 0 && passthroughByDra && dra->vfio != passthrough) {
    addFinding(n, "split-count-mismatch", Severity::kError,
               "the DRA driver " + std::string(kNvidiaDraDriver) + " publishes " +
                   plural(dra->vfio, "device", "devices") + " of type vfio (ResourceSlice " +
                   dra->slice + ") but " + declared + " has " +
                   plural(passthrough, "vm-passthrough GPU", "vm-passthrough GPUs"),
               "check the DRA driver's kubelet plugin on the node: it publishes the GPUs on "
               "vfio-pci, so restart it after 'hostprep agent --once' converged");
  } else if (passthrough > 0 && !passthroughByDra) {
    const auto& have = names[static_cast<size_t>(Mode::kVmPassthrough)];
    const int64_t sum = allocatable[static_cast<size_t>(Mode::kVmPassthrough)];
    if (sum != passthrough) {
      addFinding(n, "split-count-mismatch", Severity::kError,
                 (have.empty() ? std::string("no passthrough resource")
                               : "the passthrough resources (" + join(have, ", ") + ") sum to " +
                                     std::to_string(sum) + " allocatable") +
                     " but " + declared + " has " +
                     plural(passthrough, "vm-passthrough GPU", "vm-passthrough GPUs"),
                 "check the sandbox device plugin pod on the node: it scans vfio-pci devices only "
                 "when it starts, so restart it after 'hostprep agent --once' converged");
    }
  }
  const int64_t vgpu = split.of(Mode::kVmVgpu);
  if (vgpu > 0 && allocatable[static_cast<size_t>(Mode::kVmVgpu)] == 0) {
    addFinding(n, "split-count-mismatch", Severity::kError,
               "no vGPU type resource is allocatable but " + declared + " has " +
                   plural(vgpu, "vm-vgpu GPU", "vm-vgpu GPUs"),
               "check that the vGPU devices were created (nvidia.com/vgpu.config.state) and "
               "restart the sandbox device plugin");
  }
}

}  // namespace hostprep
