// PCI addresses, ids and class codes, and the pure parsers for what sysfs says about them.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hostprep {

// A PCI address, "DDDD:BB:DD.F". Parsing validates it, so a Bdf is always safe to put in a path.
struct Bdf {
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t device = 0;
  uint8_t function = 0;

  std::string str() const;  // "0000:3b:00.0"
  // Domain, bus, device, function, in that order (the defaulted comparison's order), as one
  // integer compare: BDFs are sorted and looked up by the thousand on a host with SR-IOV VFs.
  constexpr uint64_t key() const {
    return uint64_t{domain} << 24 | uint64_t{bus} << 16 | uint64_t{device} << 8 | function;
  }
  constexpr std::strong_ordering operator<=>(const Bdf& o) const { return key() <=> o.key(); }
  constexpr bool operator==(const Bdf& o) const { return key() == o.key(); }
};

// Accepts "DDDD:BB:DD.F" and the short "BB:DD.F" (domain 0); rejects anything else.
std::optional<Bdf> parseBdf(std::string_view s);

struct PciId {
  uint16_t vendor = 0;
  uint16_t device = 0;
  auto operator<=>(const PciId&) const = default;
};
// "10de:2236" (also upper-case, with 0x prefixes).
std::optional<PciId> parsePciId(std::string_view s);
std::string toString(PciId id);

// What a PCI function's sysfs `modalias` says: "pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", the
// vendor, device, subsystem and class of the pci_dev that the vendor, device, subsystem_vendor,
// subsystem_device and class files show one each (Linux drivers/pci/pci-sysfs.c modalias_show).
// nullopt for any other text.
struct PciModalias {
  PciId id;
  PciId subsystem;
  uint32_t classCode = 0;
  bool operator==(const PciModalias&) const = default;
};
std::optional<PciModalias> parsePciModalias(std::string_view text);

// Class codes are 24 bits: base class, subclass, programming interface.
namespace pci_class {
inline constexpr uint32_t kVgaController = 0x030000;
inline constexpr uint32_t k3dController = 0x030200;
inline constexpr uint32_t kNvmeController = 0x010802;
inline constexpr uint32_t kAudioDevice = 0x040300;
inline constexpr uint32_t kPciBridge = 0x060400;
inline constexpr uint32_t kOtherBridge = 0x068000;  // NVSwitch
}  // namespace pci_class

inline constexpr uint16_t kNvidiaVendor = 0x10de;

inline uint8_t baseClass(uint32_t cls) { return static_cast<uint8_t>(cls >> 16); }
inline uint16_t classPrefix(uint32_t cls) { return static_cast<uint16_t>(cls >> 8); }
bool isBridge(uint32_t cls);  // any 0x06xxxx
// Functions that ride along with a GPU: audio (0x0403), USB (0x0c03), serial bus (0x0c80, UCSI).
bool isCompanionClass(uint32_t cls);
std::string className(uint32_t cls);  // "VGA controller", "audio device", ...
// "0000:3b:00.0, 0000:3b:00.1" for messages.
std::string joinBdfs(const std::vector<Bdf>& bdfs);
// A vfio driver: vfio-pci or one of its variants (mlx5_vfio_pci, nvgrace_gpu_vfio_pci, ...).
bool isVfioDriver(std::string_view driver);

// A memory BAR, from the function's sysfs `resource` file.
struct PciBar {
  int index = 0;  // 0-5
  uint64_t size = 0;
  bool mem64 = false;  // a 64-bit BAR (may sit above 4 GiB)
  bool prefetchable = false;
  bool operator==(const PciBar&) const = default;
};

struct PciFunction {
  Bdf bdf;
  PciId id;
  PciId subsystem;
  uint32_t classCode = 0;
  std::optional<std::string> driver;          // the bound driver, nullopt when none
  std::optional<std::string> driverOverride;  // nullopt when unset ("(null)")
  std::optional<int> iommuGroup;
  std::optional<Bdf> physfn;  // set on SR-IOV virtual functions
  std::vector<Bdf> virtfns;
  std::optional<int> sriovTotalVfs;
  std::optional<int> sriovNumVfs;
  std::optional<bool> sriovDriversAutoprobe;
  std::optional<int> sriovOffset;  // First VF Offset and VF Stride: where the VFs will appear
  std::optional<int> sriovStride;
  std::optional<bool> bootVga;
  std::optional<int> numaNode;
  std::string modalias;
  std::vector<Bdf> consumers;          // from "consumer:pci:<BDF>" device links
  std::vector<std::string> mdevTypes;  // mdev_supported_types entries, when an mdev parent
  std::vector<PciBar> bars;            // memory BARs 0-5 with a size (from `resource`)
  // An SR-IOV PF's VF BARs (`resource` lines 7-12): whether any has memory. False when the
  // firmware left them empty (SR-IOV off in its setup, no room in the MMIO window): writing
  // sriov_numvfs then fails with ENOMEM. nullopt when the file has no such lines.
  std::optional<bool> vfBarsAssigned;
  // The VFIO device file's name ("vfio3" for /dev/vfio/devices/vfio3) while the function is on a
  // VFIO driver and the kernel has device files (Linux 6.6+, CONFIG_VFIO_DEVICE_CDEV): its
  // vfio-dev/vfioN entry carries a `dev` number and dev/vfio/devices/vfioN exists. 6.1 already
  // lists vfio-dev/vfioN, without `dev` (Documentation/driver-api/vfio.rst, "VFIO Device cdev").
  std::optional<std::string> vfioDevice;
  // An unbind of this function is still running in the kernel (the driver's remove() is blocked)
  // and holds its device lock: driverOverride and sriovNumVfs were not read (they would block).
  bool unbindPending = false;

  // Resetting it (Documentation/ABI/testing/sysfs-bus-pci). `reset` is there only while the
  // kernel has a reset method for the function (pci_dev_reset_attr_is_visible); `reset_method`
  // (Linux 5.15+) names them in the order the kernel tries them ("flr bus", "pm"). The kernel's
  // own bus method works only for a function alone on its bus (pci_parent_bus_reset), yet it is
  // listed for function 0 of a multi-function device behind a bridge, probed before the other
  // functions were on the bus (its `reset` then fails with ENOTTY; Debian's 6.1 and 6.12 in the
  // VM suite): a GPU with its audio function on one bus needs its bridge's secondary bus reset.
  bool resetFile = false;
  std::optional<std::vector<std::string>> resetMethods;  // nullopt: no reset_method file
  // A bridge: the number of the bus below it (`secondary_bus_number`) and whether the kernel
  // lets that bus be reset from userspace (`reset_subordinate`, Linux 6.13, backported to 6.12.5,
  // 6.1.120 and 5.15.174).
  std::optional<int> secondaryBus;
  bool resetSubordinate = false;
  // Does it still answer? Its config space's vendor id (`config`, the first two bytes) reads
  // 0xffff once the device has fallen off the bus or sits in D3cold without power (PCI Local Bus
  // spec: a read no device claims completes with all ones). nullopt where `config` is unreadable.
  std::optional<bool> responsive;
  std::optional<std::string> powerState;  // `power_state` (Linux 5.11+): "D0", "D3hot", "D3cold"
  std::optional<bool> d3coldAllowed;      // `d3cold_allowed`

  bool isVf() const { return physfn.has_value(); }
  bool operator==(const PciFunction&) const = default;
};

// Does this member of an IOMMU group let vfio take the group? Since Linux 5.19 vfio claims DMA
// ownership of the whole group (iommu_group_claim_dma_owner()), which fails ("group is not
// viable") while any member is bound to a driver that manages DMA itself. No driver, or one that
// sets driver_managed_dma (vfio-pci and its variants, pci-stub, pcieport), lets it; a bridge on
// another driver does not ("vfio: Set DMA ownership for VFIO devices", "PCI: portdrv: Set
// driver_managed_dma", both Linux 5.19).
bool letsVfioTakeGroup(const PciFunction& f);

// Whether a function's config space answers, from the first bytes of its `config` file: false
// when the vendor id reads 0xffff, nullopt when there are fewer than two bytes.
std::optional<bool> configAnswers(std::string_view config);

// driver_override reads "(null)" when unset.
std::optional<std::string> parseDriverOverride(std::string_view raw);

}  // namespace hostprep
