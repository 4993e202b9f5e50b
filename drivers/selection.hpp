// Which PCI functions hostprep may touch: the selected GPUs and the companions that share their
// IOMMU groups, and the groups it must refuse (a foreign device, the root filesystem's disk).
#pragma once

#include <string>
#include <vector>

#include "drivers/snapshot.hpp"

namespace hostprep {

struct SelectionOptions {
  std::vector<Bdf> devices;           // --devices: only these (and their companions)
  std::vector<PciId> gpuIds;          // --gpu-ids: replaces the NVIDIA vendor/class rule
  std::string hostDriver = "nvidia";  // --host-driver: the datacenter driver
};

enum class Role { kGpu, kCompanion, kVf, kNvSwitch };
std::string_view toString(Role r);

struct Target {
  Bdf bdf;
  Role role = Role::kGpu;
  std::optional<int> group;
};

// A group hostprep will not take without --force.
struct GroupProblem {
  std::optional<int> group;
  Bdf gpu;
  std::vector<Bdf> foreign;    // devices that are neither the GPU's vendor nor companion class
  bool holdsRootDisk = false;  // the root filesystem's disk is in this group
  std::string describe(const Snapshot& s) const;
};

struct Selection {
  std::vector<Target> targets;  // GPUs first by BDF, then companions; no duplicates
  std::vector<GroupProblem> problems;

  std::vector<Bdf> gpus() const;
  const Target* find(const Bdf& b) const;
};

// Is this function a GPU under the default rule (vendor 0x10de, class 0x0300xx/0x0302xx, not a
// VF) or, with --gpu-ids, one of those ids (NVSwitch 0x0680xx only when its id is named)?
bool isSelectedGpu(const PciFunction& f, const SelectionOptions& opt);

// Fails (exit 2) when --devices names a function that does not exist or is not a selected GPU.
Result<Selection> selectDevices(const Snapshot& s, const SelectionOptions& opt);

// "0000:3b:00.0 (10de:2236 3D controller)" for messages.
std::string describeFunction(const Snapshot& s, const Bdf& b);

}  // namespace hostprep
