// Fixture host trees. A scenario lives in tests/fixtures/<scenario>/: plain files copied as they
// are (proc/cpuinfo, etc/default/grub, usr/share/misc/pci.ids, ...) plus host.yaml, which
// describes the PCI topology, drivers, IOMMU groups, modules and holders compactly and is
// expanded into the sysfs layout the real kernel uses (devices under sys/devices, links from
// sys/bus/pci/devices, driver and iommu_group links, ...). Every test gets a fresh copy in a
// temporary directory, removed afterwards.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>

#include "drivers/common/pci.hpp"

namespace hostprep::test {

class Fixture {
 public:
  // Copies tests/fixtures/<scenario> into a new temporary root and expands its host.yaml.
  explicit Fixture(const std::string& scenario);
  // An empty root (host.yaml-less), for tests that build their own tree.
  Fixture();
  // A root expanded from host.yaml text (generated topologies: the sweeps).
  struct HostYaml {
    std::string text;
  };
  explicit Fixture(const HostYaml& yaml);
  ~Fixture();
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path path(const std::string& rel) const { return root_ / rel; }
  void write(const std::string& rel, const std::string& text) const;
  void symlink(const std::string& rel, const std::string& target) const;
  // The inode of a file under the root (an atomic rewrite gives a new one); throws when absent.
  ino_t inode(const std::string& rel) const;

  // What a switch may change, for "the host is exactly as it was": every PCI function's driver
  // link and driver_override, sriov_numvfs, every driver's device links, and /dev/vfio.
  std::map<std::string, std::string> deviceState() const;

 private:
  std::filesystem::path root_;
};

// Expands a host.yaml text into sysfs/procfs files under root (exposed for tests of the
// fixture builder itself).
void expandHostYaml(const std::filesystem::path& root, const std::string& yaml);
// The first bytes of a function's config space as the fixture writes them: vendor and device
// ids, little-endian (the rest of the header is not modelled).
std::string configBytes(const PciId& id);
// Adds one device as host.yaml describes it (the fake kernel's rescan brings a removed function
// back this way, from the fake/devices/<BDF>.yaml the fixture left).
void addFixtureDevice(const std::filesystem::path& root, const std::string& yaml);

}  // namespace hostprep::test
