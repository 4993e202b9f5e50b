// Platform facts the PCI snapshot does not carry: CPU virtualization flags, /dev/kvm, the ACPI
// IOMMU tables, the kernel's IOMMU units and interrupt remapping, the kernel build config, module
// availability, firmware framebuffers, lockdown and Secure Boot. Read once into a plain struct so
// that preflight's checks stay pure functions of facts. Every field has an "unknown" state:
// a missing file (a busybox guest, a container, an image) is a state, never an error.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/pci.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/seam/host.hpp"
#include "drivers/seam/kmod.hpp"

namespace hostprep {

enum class CpuVendor { kUnknown, kIntel, kAmd, kOther };
std::string_view toString(CpuVendor v);

struct CpuFacts {
  bool known = false;  // proc/cpuinfo was readable
  CpuVendor vendor = CpuVendor::kUnknown;
  std::string vendorId;  // "GenuineIntel"
  bool vmx = false;
  bool svm = false;
  bool hypervisor = false;  // running as a guest
  // An Arm (arm64) CPU: /proc/cpuinfo has "CPU implementer" lines and no vendor_id; KVM there
  // needs the kernel started at EL2, not a CPU flag.
  bool arm64 = false;
};

// One IOMMU unit under sys/class/iommu (dmar0, ivhd0, virtio-iommu, ...).
struct IommuUnit {
  std::string name;
  // Intel VT-d: extended capability register bit 3 (IR, interrupt remapping support), from
  // sys/class/iommu/dmarN/intel-iommu/ecap; nullopt for other units or when unreadable.
  std::optional<bool> interruptRemapping;
};

// /proc/interrupts, reduced to what preflight asks: are interrupts remapped?
struct InterruptFacts {
  size_t lines = 0;     // interrupt lines with a chip name
  size_t remapped = 0;  // of those, "IR-" chips (IR-IO-APIC, IR-PCI-MSI, ...)
  size_t its = 0;       // of those, MSIs through an Arm GIC ITS (ITS-MSI, ITS-PCI-MSI, ...)
};

// A firmware framebuffer claimed in /proc/iomem (efifb, simpledrm, BOOTFB, vesafb), and the PCI
// function whose BAR it sits in when iomem nests it under one.
struct FirmwareFramebuffer {
  std::string name;
  std::optional<Bdf> device;
};

// What is known about one kernel module for one kernel release.
struct ModuleFacts {
  bool loaded = false;     // proc/modules
  bool sysModule = false;  // sys/module/<m> exists (loaded, or built in with parameters)
  // In the release's module index (modules.dep, modules.builtin, an alias). Only the text index
  // is read when loaded, sysModule or config already show the module to be there.
  bool indexed = false;
  // CONFIG_ symbol value from the release's config ("y", "m"), nullopt when not set or unknown.
  std::optional<std::string> config;

  bool available() const { return loaded || sysModule || indexed || config == "y"; }
};

// A kernel build configuration (boot/config-<release>, lib/modules/<release>/config,
// proc/config.gz): CONFIG_X -> "y" | "m" |
// value; "# CONFIG_X is not set" reads as "n". It keeps the text and a sorted index into it: a
// config names ~10,000 symbols and hostprep asks about a dozen, so no string is made per symbol.
class KernelConfig {
 public:
  explicit KernelConfig(std::string text);
  // The symbol's value (quotes removed), nullopt when the config does not name it.
  std::optional<std::string_view> get(std::string_view symbol) const;
  bool is(std::string_view symbol, std::string_view value) const { return get(symbol) == value; }
  size_t size() const { return index_.size(); }

 private:
  struct Span {
    uint32_t at, len;
  };
  std::string_view view(Span s) const { return std::string_view(text_).substr(s.at, s.len); }
  std::string text_;
  std::vector<std::pair<Span, Span>> index_;  // (symbol, value), sorted by symbol
};

// NVIDIA Fabric Manager as the host tree shows it (HGX/DGX systems with NVSwitches).
struct FabricManagerFacts {
  // usr/share/nvidia/nvswitch/fabricmanager.cfg was read; FABRIC_MODE as written there.
  bool config = false;
  std::optional<std::string> modeValue;
  // The running daemon: the pid in run/nvidia-fabricmanager/nv-fabricmanager.pid (the file
  // NVIDIA's driver container checks; /var/run is /run) names a live nv-fabricmanager process.
  std::optional<int> pid;
  std::string pidFile;  // the pid file read, "" when there is none

  // The mode in effect: FABRIC_MODE, 0 when unset or without a config (the Fabric Manager
  // default); nullopt when the value is not 0, 1 or 2.
  std::optional<FabricMode> mode() const;
};
FabricManagerFacts readFabricManager(const Host& host);
// KEY=VALUE lines; '#' starts a comment line.
std::map<std::string, std::string> parseFabricManagerConfig(std::string_view text);

// Confidential computing as the node asks for it: the values of NVIDIA's nvidia.com/cc.mode
// label (k8s-cc-manager), here the config key cc-mode. ppcie: protected PCIe, the whole HGX
// board (GPUs and NVSwitches) in one confidential VM.
enum class CcMode { kOff, kOn, kDevtools, kPpcie };
std::string_view toString(CcMode m);
std::optional<CcMode> parseCcMode(std::string_view s);
inline constexpr std::string_view kCcModeChoices = "off, on, devtools, ppcie";

struct PlatformFacts {
  CpuFacts cpu;
  bool devKvm = false;
  // Tables under sys/firmware/acpi/tables; nullopt when that directory is absent (no ACPI, or
  // no sysfs at all).
  std::optional<std::set<std::string>> acpiTables;
  std::optional<std::vector<IommuUnit>> iommuUnits;  // nullopt: no sys/class/iommu
  std::optional<InterruptFacts> interrupts;          // nullopt: no proc/interrupts
  // vfio_iommu_type1's live allow_unsafe_interrupts parameter ("Y"/"N"), when loaded.
  std::optional<std::string> allowUnsafeInterrupts;
  std::optional<std::vector<FirmwareFramebuffer>> framebuffers;  // nullopt: no proc/iomem
  std::optional<std::string> lockdown;  // the selected mode: none | integrity | confidentiality
  std::optional<bool> secureBoot;       // from the EFI SecureBoot variable
  std::string kernelRelease;
  std::optional<KernelConfig> kernelConfig;    // boot/config-<release>, lib/modules/<release>/
                                               // config, else proc/config.gz
  std::string kernelConfigSource;              // the one read ("" when neither)
  std::map<std::string, ModuleFacts> modules;  // the modules asked for
  FabricManagerFacts fabricManager;
  // Confidential VMs: kvm_intel's tdx and kvm_amd's sev_snp parameters ("Y"/"N"), when loaded
  // (Documentation/virt/kvm/x86/intel-tdx.rst,
  // Documentation/virt/kvm/x86/amd-memory-encryption.rst).
  std::optional<std::string> kvmTdx;
  std::optional<std::string> kvmSevSnp;
  // vfio-pci's disable_idle_d3 parameter ("Y"/"N"), when loaded: N (its default) lets vfio-pci
  // put an idle, unused device in a D3 low power state (drivers/vfio/pci/vfio_pci.c).
  std::optional<std::string> vfioPciDisableIdleD3;
  // The loaded nvidia module's version (sys/module/nvidia/version), and the GSP firmware files
  // (gsp_*.bin) under lib/firmware/nvidia/<version>/ for every version directory there.
  std::optional<std::string> nvidiaVersion;
  std::map<std::string, std::vector<std::string>> gspFirmware;
};

// Reads the platform facts of a live host (or a fixture laid out like one). `modules` names the
// modules whose availability to record, looked up through `loader` (libkmod in production).
PlatformFacts readPlatform(const Host& host, const std::string& kernelRelease,
                           const ModuleLoader& loader, const std::vector<std::string>& modules);

// An installed kernel of an image root: lib/modules/<release> with its config and modules.
struct ImageKernel {
  std::string release;
  std::optional<KernelConfig> config;  // boot/config-<release>, lib/modules/<release>/config
  std::map<std::string, ModuleFacts> modules;  // indexed / config only: nothing runs
};

// The kernels installed in an image root (lib/modules/*, newest last by name), each with the
// modules asked for. `loaderFor` makes a module loader for one release.
std::vector<ImageKernel> readImageKernels(
    const Host& host, const std::vector<std::string>& modules,
    const std::function<std::unique_ptr<ModuleLoader>(const std::string&)>& loaderFor);

// The CONFIG_ symbol that builds a module, for the fallback when no module index is readable.
std::optional<std::string_view> configSymbolOf(std::string_view module);

// Pure parsers, tested table-driven.
CpuFacts parseCpuinfo(std::string_view text);
InterruptFacts parseInterrupts(std::string_view text);
std::vector<FirmwareFramebuffer> parseIomemFramebuffers(std::string_view text);
KernelConfig parseKernelConfig(std::string text);
// A gzip stream's content (proc/config.gz), at most `cap` bytes; nullopt when it is not gzip,
// truncated, or larger.
std::optional<std::string> gunzip(std::string_view gz, size_t cap);
std::optional<std::string> parseLockdown(std::string_view text);  // "[none] integrity" -> none
// ecap is a hex register; bit 3 is IR (Intel VT-d spec, "Extended Capability Register").
std::optional<bool> ecapInterruptRemapping(std::string_view ecap);
// efivars: 4 bytes of attributes, then the value byte.
std::optional<bool> parseSecureBootVar(std::string_view bytes);

}  // namespace hostprep
