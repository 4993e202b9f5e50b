// Resource kinds: which kind of GPU workload an nvidia.com/ resource name belongs to, by the naming
// rules of the NVIDIA device plugins (k8s-device-plugin for containers, kubevirt-gpu-device-plugin
// for PCI passthrough and vGPU types).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "drivers/model/mode.hpp"

namespace hostprep {

enum class ResourceKind {
  kContainer,    // nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-*
  kPassthrough,  // nvidia.com/GA102GL_A10, or the raw id nvidia.com/2236
  kVgpu,         // nvidia.com/NVIDIA_A10-12Q, nvidia.com/GRID_T4-4Q
  kOther,        // anything else under nvidia.com/, or not nvidia.com/ at all
};
// The name in the JSON report ("vgpu").
std::string_view toString(ResourceKind k);
// The word in a sentence ("vGPU").
std::string_view kindWord(ResourceKind k);
ResourceKind classifyResource(std::string_view name);
ResourceKind kindOfMode(Mode m);
// The vGPU type of a vGPU resource, the vendor prefix stripped: "nvidia.com/NVIDIA_A10-4Q" ->
// "A10-4Q". nullopt for other resources.
std::optional<std::string> vgpuTypeOf(std::string_view resource);
// The raw-id fallback of the sandbox device plugin, "nvidia.com/2236" -> 0x2236 (the plugin uses
// it when pci.ids does not know the device). nullopt for any other name.
std::optional<uint16_t> rawDeviceId(std::string_view resource);
// A Kubernetes quantity of a countable resource: "4", 4, "2k". nullopt when not a whole count.
std::optional<int64_t> parseCount(const nlohmann::json& v);
// What a node of mode m advertises, in one sentence.
std::string_view modeRule(Mode m);

// One nvidia.com/ resource of a node, from its capacity and allocatable.
struct ResourceCount {
  std::string name;
  ResourceKind kind = ResourceKind::kOther;
  std::optional<int64_t> capacity;
  std::optional<int64_t> allocatable;

  // The count to show: capacity, else allocatable.
  int64_t shown() const { return capacity.value_or(allocatable.value_or(0)); }
  // Registered with at least one device.
  bool advertised() const { return capacity.value_or(0) > 0 || allocatable.value_or(0) > 0; }
};

}  // namespace hostprep
