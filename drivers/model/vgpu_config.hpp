// vgpu-device-manager's configuration file, accepted as is (NVIDIA/vgpu-device-manager, its
// README and examples/):
//
//   version: v1
//   vgpu-configs:
//     default:
//       - device-filter: "0x223610DE"        # or a list; "0xDDDDVVVV[:0xSSSSVVVV]"; optional
//         devices: all                        # or [0, 1]: indexes among the selected GPUs
//         vgpu-devices: {"A10-12Q": 2}
//
// The parser is pure; every error names the file, the line and the key.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "drivers/common/error.hpp"
#include "drivers/common/pci.hpp"

namespace hostprep {

// "0x223610DE" -> device 10de:2236; "0x223610DE:0x148210DE" also pins the subsystem.
struct VgpuDeviceFilter {
  PciId device;
  std::optional<PciId> subsystem;
  bool operator==(const VgpuDeviceFilter&) const = default;
};
std::optional<VgpuDeviceFilter> parseVgpuDeviceFilter(std::string_view s);

struct VgpuConfigEntry {
  std::vector<VgpuDeviceFilter> filters;                 // empty: every GPU
  std::optional<std::vector<int>> devices;               // nullopt: all
  std::vector<std::pair<std::string, int>> vgpuDevices;  // type -> count per GPU, file order
  int line = 0;                                          // 1-based, for messages

  // Does this entry apply to the GPU with these ids at this index (among the selected GPUs)?
  bool matches(PciId id, PciId subsystem, int index) const;
};

struct VgpuConfigFile {
  std::vector<std::pair<std::string, std::vector<VgpuConfigEntry>>> configs;  // file order
  const std::vector<VgpuConfigEntry>* find(std::string_view name) const;
  std::vector<std::string> names() const;
};

// `source` names the file in messages ("/etc/hostprep/vgpu.yaml"). Errors exit 2.
Result<VgpuConfigFile> parseVgpuConfig(std::string_view text, std::string_view source);

// Is a config type name a valid vGPU type name? Letters, digits, '-', '_', '.', at most 64
// characters (it travels into messages and the journal, never into a path).
bool isValidVgpuTypeName(std::string_view s);

}  // namespace hostprep
