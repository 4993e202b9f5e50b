// A small reader for the vgpu-device-manager config (DOMAIN.md §3): only what check-node needs
// to say how many vGPUs of which type a node must advertise.
//   version: v1
//   vgpu-configs:
//     NAME:
//       - device-filter: ["0x223610DE"]   # optional; device id << 16 | vendor, or "10de:2236"
//         devices: all                    # or a list of GPU indices
//         vgpu-devices: {"A10-4Q": 6}     # per GPU
// The ConfigMap form (kind: ConfigMap, the config under data."config.yaml") is accepted too.
// The node side (drivers/vgpu_config) parses the same format from a file for prepare; this reader
// works on already-loaded cluster documents (YAML, JSON or a ConfigMap) and keeps only counts.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checks/documents.hpp"
#include "drivers/error.hpp"
#include "drivers/pci.hpp"

namespace hostprep {

struct ClusterVgpuEntry {
  std::vector<PciId> deviceFilter;  // empty: every GPU
  bool allDevices = true;
  std::vector<int> devices;         // GPU indices when !allDevices
  std::vector<std::pair<std::string, int>> vgpuDevices;  // type -> count per GPU
};

struct VgpuConfigs {
  std::map<std::string, std::vector<ClusterVgpuEntry>, std::less<>> configs;
};

// Reads the config from a parsed document; a wrong shape is a usage error naming the document
// and the field.
Result<VgpuConfigs> readVgpuConfigs(const Document& doc);

}  // namespace hostprep
