// The vGPU profile table: how many instances of each vGPU type one physical GPU holds, and the
// default vgpu-device-manager config per GPU model. Shipped as data (drivers/data/
// vgpu-profiles.txt, from NVIDIA's default vgpu-devices ConfigMap) and embedded at build time.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/pci.hpp"

namespace hostprep {

struct VgpuDefault {
  PciId device;      // the device-filter's GPU (0x223610DE -> 10de:2236)
  std::string type;  // "A10-12Q"
  int count = 0;     // per GPU
};

struct VgpuProfileTable {
  std::vector<std::pair<std::string, int>> maxPerGpu;  // "A10-4Q" -> 6
  std::vector<VgpuDefault> defaults;

  // Max instances of a type per physical GPU, nullopt when the type is unknown.
  std::optional<int> maxInstances(std::string_view type) const;
  // The 'default' config entries for a GPU (may be more than one, e.g. A2 / A16 share an id).
  std::vector<VgpuDefault> defaultsFor(PciId id) const;
};

// Parses the text format of drivers/data/vgpu-profiles.txt.
VgpuProfileTable parseVgpuProfiles(std::string_view text);
// The embedded table (parsed once, on first use).
const VgpuProfileTable& vgpuProfiles();

}  // namespace hostprep
