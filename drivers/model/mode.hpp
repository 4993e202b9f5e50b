// The node's workload mode: the value of the nvidia.com/gpu.workload.config label.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace hostprep {

enum class Mode { kContainer, kVmPassthrough, kVmVgpu };

inline constexpr std::string_view kWorkloadLabel = "nvidia.com/gpu.workload.config";
inline constexpr std::string_view kVgpuConfigLabel = "nvidia.com/vgpu.config";

constexpr std::string_view toString(Mode m) {
  constexpr std::array<std::string_view, 3> kNames{"container", "vm-passthrough", "vm-vgpu"};
  return kNames[static_cast<size_t>(m)];
}

constexpr std::optional<Mode> parseMode(std::string_view s) {
  if (s == "container") return Mode::kContainer;
  if (s == "vm-passthrough") return Mode::kVmPassthrough;
  if (s == "vm-vgpu") return Mode::kVmVgpu;
  return std::nullopt;
}

inline constexpr std::string_view kModeChoices = "container, vm-passthrough, vm-vgpu";

}  // namespace hostprep
