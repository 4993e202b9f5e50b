#include "drivers/model/platform.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <memory>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/seam/module_index.hpp"

namespace hostprep {
namespace {

// The EFI global variable GUID (UEFI spec 3.3).
constexpr std::string_view kSecureBootVar =
    "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0a660e7e6e3";

constexpr std::string_view kFramebufferNames[] = {"efifb", "simpledrm", "BOOTFB", "vesafb",
                                                  "simple-framebuffer"};

std::optional<std::string> configValue(const std::optional<KernelConfig>& config,
                                       std::string_view module) {
  if (!config) return std::nullopt;
  auto sym = configSymbolOf(module);
  if (!sym) return std::nullopt;
  auto v = config->get(*sym);
  if (!v || *v == "n") return std::nullopt;
  return std::string(*v);
}

// The module names asked for, normalised; a name that could not be a module (a path, say) is
// dropped, never looked up.
std::set<std::string> moduleNamesAsked(const std::vector<std::string>& modules) {
  std::set<std::string> names;
  for (const auto& name : modules) {
    const std::string m = normalizeModuleName(name);
    if (isValidModuleName(m)) names.insert(m);
  }
  return names;
}

// The facts of each module asked for. The release's text index is read by name first; libkmod is
// asked only about a module that nothing cheaper shows to be there (loaded, in sys/module, listed,
// built in by the config) and that an alias or a modprobe.d line could still resolve
// (module_index.hpp): its dlopen and libcrypto's relocations cost more than the whole rest of
// this read.
std::map<std::string, ModuleFacts> moduleFacts(const Host& host, const std::string& release,
                                               const ModuleLoader* loader,
                                               const std::set<std::string>& names,
                                               const std::set<std::string>* loaded,
                                               const std::optional<KernelConfig>& config) {
  std::map<std::string, ModuleFacts> out;
  const std::set<std::string> listed =
      release.empty() ? std::set<std::string>{} : listedModules(host, release, names);
  std::set<std::string> unknown;
  for (const auto& m : names) {
    ModuleFacts f;
    if (loaded) {
      f.loaded = loaded->count(m) != 0;
      f.sysModule = host.exists(hostPath("sys/module", m));
    }
    f.indexed = listed.count(m) != 0;
    f.config = configValue(config, m);
    if (!f.available()) unknown.insert(m);
    out[m] = f;
  }
  if (loader && !release.empty()) {
    for (const auto& m : resolvableModules(host, release, unknown)) {
      out[m].indexed = loader->available(m);
    }
  }
  return out;
}

// A release's config: boot/config-<release> (Debian 12, RHEL, SUSE install it there), else
// lib/modules/<release>/config, the only copy Debian 13's split kernel packages ship (in
// linux-base-<abi>:
// https://packages.debian.org/trixie-backports/amd64/linux-base-7.3.4+deb13-amd64/filelist). Sets
// `source`, when given, to the path read.
std::optional<KernelConfig> readKernelConfig(const Host& host, const std::string& release,
                                             std::string* source = nullptr) {
  if (release.empty()) return std::nullopt;
  for (const std::string& path :
       {hostPath("boot", "config-" + release), hostPath("lib/modules", release, "config")}) {
    auto t = host.read(path, 16u << 20);
    if (!t) continue;
    if (source) *source = path;
    return parseKernelConfig(std::move(*t));
  }
  return std::nullopt;
}

// The running kernel's config: its release's (above), else proc/config.gz, the kernel's own copy
// where it is built with CONFIG_IKCONFIG_PROC (init/Kconfig). Sets `source` to the path read.
std::optional<KernelConfig> readRunningKernelConfig(const Host& host, const std::string& release,
                                                    std::string& source) {
  if (auto c = readKernelConfig(host, release, &source)) return c;
  auto gz = host.read("proc/config.gz", 4u << 20);
  if (!gz) return std::nullopt;
  auto text = gunzip(*gz, 16u << 20);
  if (!text) return std::nullopt;
  source = "proc/config.gz";
  return parseKernelConfig(std::move(*text));
}

}  // namespace

std::string_view toString(CpuVendor v) {
  constexpr std::array<std::string_view, 4> kNames{"unknown", "Intel", "AMD", "other"};
  return kNames[static_cast<size_t>(v)];
}

std::optional<std::string_view> configSymbolOf(std::string_view module) {
  static const std::pair<std::string_view, std::string_view> kSymbols[] = {
      {"vfio", "CONFIG_VFIO"},
      {"vfio_pci", "CONFIG_VFIO_PCI"},
      {"vfio_pci_core", "CONFIG_VFIO_PCI_CORE"},
      {"vfio_iommu_type1", "CONFIG_VFIO_IOMMU_TYPE1"},
      {"mdev", "CONFIG_VFIO_MDEV"},
      {"kvm", "CONFIG_KVM"},
      {"kvm_intel", "CONFIG_KVM_INTEL"},
      {"kvm_amd", "CONFIG_KVM_AMD"},
      {"nouveau", "CONFIG_DRM_NOUVEAU"},
  };
  const std::string m = normalizeModuleName(module);
  for (const auto& [mod, sym] : kSymbols) {
    if (mod == m) return sym;
  }
  return std::nullopt;
}

CpuFacts parseCpuinfo(std::string_view text) {
  CpuFacts c;
  c.known = true;
  bool haveFlags = false;
  for (auto line : splitLines(text)) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto key = trim(line.substr(0, colon));
    auto value = trim(line.substr(colon + 1));
    if (key == "CPU implementer" && c.vendorId.empty()) {
      // arm64's cpuinfo (arch/arm64/kernel/cpuinfo.c) names the implementer's code instead.
      c.arm64 = true;
      c.vendor = CpuVendor::kOther;
      c.vendorId = "CPU implementer " + std::string(value);
    } else if (key == "vendor_id" && c.vendorId.empty()) {
      c.vendorId = std::string(value);
      c.vendor = value == "GenuineIntel"                              ? CpuVendor::kIntel
                 : value == "AuthenticAMD" || value == "HygonGenuine" ? CpuVendor::kAmd
                                                                      : CpuVendor::kOther;
    } else if ((key == "flags" || key == "Features") && !haveFlags) {
      haveFlags = true;
      for (auto f : splitWords(value)) {
        if (f == "vmx") c.vmx = true;
        if (f == "svm") c.svm = true;
        if (f == "hypervisor") c.hypervisor = true;
      }
    }
  }
  if (c.vendorId.empty() && haveFlags) c.vendor = CpuVendor::kOther;
  return c;
}

InterruptFacts parseInterrupts(std::string_view text) {
  InterruptFacts f;
  for (auto line : splitLines(text)) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    // Device interrupts have a number before the colon; NMI, LOC, ERR... are per-CPU counters.
    if (!parseUnsigned(trim(line.substr(0, colon)))) continue;
    auto words = splitWords(line.substr(colon + 1));
    bool chip = false;
    bool remapped = false;
    bool its = false;
    for (auto w : words) {
      if (parseUnsigned(w)) continue;  // per-CPU counts
      chip = true;
      remapped = startsWith(w, "IR-");
      its = startsWith(w, "ITS-");
      break;
    }
    if (!chip) continue;
    ++f.lines;
    if (remapped) ++f.remapped;
    if (its) ++f.its;
  }
  return f;
}

std::vector<FirmwareFramebuffer> parseIomemFramebuffers(std::string_view text) {
  std::vector<FirmwareFramebuffer> out;
  std::vector<std::pair<size_t, std::string>> stack;  // (indent, name) of the enclosing ranges
  for (auto line : splitLines(text)) {
    size_t indent = line.find_first_not_of(' ');
    if (indent == std::string_view::npos) continue;
    auto colon = line.find(" : ");
    if (colon == std::string_view::npos) continue;
    std::string name(trim(line.substr(colon + 3)));
    while (!stack.empty() && stack.back().first >= indent) stack.pop_back();
    bool fb = std::any_of(std::begin(kFramebufferNames), std::end(kFramebufferNames),
                          [&](std::string_view n) { return startsWith(name, n); });
    if (fb) {
      FirmwareFramebuffer f{name, std::nullopt};
      for (auto it = stack.rbegin(); it != stack.rend() && !f.device; ++it)
        f.device = parseBdf(it->second);
      out.push_back(std::move(f));
    }
    stack.emplace_back(indent, std::move(name));
  }
  return out;
}

std::optional<std::string> gunzip(std::string_view gz, size_t cap) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return std::nullopt;  // 16: gzip framing only
  std::unique_ptr<z_stream, int (*)(z_stream*)> owner(&zs, inflateEnd);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  // The gzip trailer's ISIZE is the content's size mod 2^32 (RFC 1952, 2.3.1): room for it up
  // front spares the string its regrowth copies. Only a hint: the loop below checks the cap.
  if (gz.size() >= 18) {
    const auto* t = reinterpret_cast<const unsigned char*>(gz.data() + gz.size() - 4);
    const size_t isize =
        size_t{t[0]} | (size_t{t[1]} << 8) | (size_t{t[2]} << 16) | (size_t{t[3]} << 24);
    out.reserve(std::min(isize, cap) + 1);
  }
  char buf[16384];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) return std::nullopt;  // corrupt, or truncated input
    out.append(buf, sizeof buf - zs.avail_out);
    if (out.size() > cap) return std::nullopt;
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) return std::nullopt;  // truncated
  }
  return out;
}

KernelConfig::KernelConfig(std::string text) : text_(std::move(text)) {
  const std::string_view all(text_);
  auto span = [&](std::string_view part) {
    return Span{static_cast<uint32_t>(part.data() - all.data()),
                static_cast<uint32_t>(part.size())};
  };
  static constexpr std::string_view kNotSet = " is not set";
  if (all.size() > UINT32_MAX) return;  // read with a 16 MiB cap; never so large
  for (auto raw : splitLines(all)) {
    auto line = trim(raw);
    if (startsWith(line, "# CONFIG_") && endsWith(line, kNotSet)) {
      auto name = trim(line.substr(2, line.size() - 2 - kNotSet.size()));
      index_.push_back({span(name), Span{UINT32_MAX, 0}});  // "n", below
      continue;
    }
    if (!startsWith(line, "CONFIG_")) continue;
    auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    auto v = line.substr(eq + 1);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    index_.push_back({span(line.substr(0, eq)), span(v)});
  }
  // Sorted by symbol; of a symbol set twice the later line wins, as a map built in order had it.
  std::stable_sort(index_.begin(), index_.end(),
                   [&](const auto& a, const auto& b) { return view(a.first) < view(b.first); });
}

std::optional<std::string_view> KernelConfig::get(std::string_view symbol) const {
  auto it = std::upper_bound(index_.begin(), index_.end(), symbol,
                             [&](std::string_view s, const auto& e) { return s < view(e.first); });
  if (it == index_.begin() || view((it - 1)->first) != symbol) return std::nullopt;
  const Span v = (it - 1)->second;
  if (v.at == UINT32_MAX) return std::string_view("n");
  return view(v);
}

KernelConfig parseKernelConfig(std::string text) { return KernelConfig(std::move(text)); }

std::optional<std::string> parseLockdown(std::string_view text) {
  for (auto w : splitWords(text)) {
    if (w.size() > 2 && w.front() == '[' && w.back() == ']')
      return std::string(w.substr(1, w.size() - 2));
  }
  return std::nullopt;
}

std::optional<bool> ecapInterruptRemapping(std::string_view ecap) {
  auto v = parseUnsigned(trim(ecap), 16);
  if (!v) return std::nullopt;
  return (*v & (1u << 3)) != 0;
}

std::optional<bool> parseSecureBootVar(std::string_view bytes) {
  if (bytes.size() < 5) return std::nullopt;
  return bytes[4] == 1;
}

std::optional<FabricMode> FabricManagerFacts::mode() const {
  if (!modeValue) return FabricMode::kFullPassthrough;
  if (*modeValue == "0") return FabricMode::kFullPassthrough;
  if (*modeValue == "1") return FabricMode::kSharedNvSwitch;
  if (*modeValue == "2") return FabricMode::kVgpu;
  return std::nullopt;
}

std::map<std::string, std::string> parseFabricManagerConfig(std::string_view text) {
  std::map<std::string, std::string> out;
  for (auto line : splitLines(text)) {
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    out[std::string(trim(line.substr(0, eq)))] = std::string(trim(line.substr(eq + 1)));
  }
  return out;
}

FabricManagerFacts readFabricManager(const Host& host) {
  FabricManagerFacts fm;
  if (auto t = host.read("usr/share/nvidia/nvswitch/fabricmanager.cfg", 1u << 20)) {
    fm.config = true;
    auto kv = parseFabricManagerConfig(*t);
    if (auto it = kv.find("FABRIC_MODE"); it != kv.end()) fm.modeValue = it->second;
  }
  // /var/run is a link to /run on every systemd host; under --root the link may be absolute.
  for (const char* f : {"run/nvidia-fabricmanager/nv-fabricmanager.pid",
                        "var/run/nvidia-fabricmanager/nv-fabricmanager.pid"}) {
    auto t = readTrimmed(host, f);
    if (!t) continue;
    fm.pidFile = f;
    auto pid = parseSigned(*t);
    if (!pid || *pid <= 0 || *pid > 1 << 22) break;
    const std::string proc = "proc/" + std::to_string(*pid);
    if (!host.exists(proc)) break;
    // comm is the name cut to 15 characters; a reused pid names another process.
    auto comm = readTrimmed(host, proc + "/comm");
    if (comm && !startsWith(*comm, "nv-fabricmanag")) break;
    fm.pid = static_cast<int>(*pid);
    break;
  }
  return fm;
}

namespace {
constexpr std::string_view kCcModeNames[] = {"off", "on", "devtools", "ppcie"};  // enum order
}  // namespace

std::string_view toString(CcMode m) { return kCcModeNames[static_cast<size_t>(m)]; }

std::optional<CcMode> parseCcMode(std::string_view s) {
  for (size_t i = 0; i < std::size(kCcModeNames); ++i) {
    if (s == kCcModeNames[i]) return static_cast<CcMode>(i);
  }
  return std::nullopt;
}

PlatformFacts readPlatform(const Host& host, const std::string& kernelRelease,
                           const ModuleLoader& loader, const std::vector<std::string>& modules) {
  PlatformFacts p;
  // 1. CPU and KVM.
  if (auto t = host.read("proc/cpuinfo", 16u << 20)) p.cpu = parseCpuinfo(*t);
  p.devKvm = host.exists("dev/kvm");

  // 2. Firmware tables and the kernel's IOMMU units (Documentation/ABI/testing/sysfs-class-iommu*).
  if (auto t = host.list("sys/firmware/acpi/tables"))
    p.acpiTables = std::set<std::string>(t->begin(), t->end());
  if (auto units = host.list("sys/class/iommu")) {
    p.iommuUnits.emplace();
    for (const auto& u : *units) {
      IommuUnit unit{u, std::nullopt};
      if (auto e = host.read(hostPath("sys/class/iommu", u, "intel-iommu/ecap"), 4096)) {
        unit.interruptRemapping = ecapInterruptRemapping(*e);
      }
      p.iommuUnits->push_back(std::move(unit));
    }
  }
  if (auto t = host.read("proc/interrupts", 16u << 20)) p.interrupts = parseInterrupts(*t);
  p.allowUnsafeInterrupts =
      readTrimmed(host, "sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts");

  // 3. Firmware framebuffers, lockdown, Secure Boot.
  if (auto t = host.read("proc/iomem", 16u << 20)) p.framebuffers = parseIomemFramebuffers(*t);
  if (auto t = host.read("sys/kernel/security/lockdown", 4096)) p.lockdown = parseLockdown(*t);
  if (auto t = host.read(kSecureBootVar, 4096)) p.secureBoot = parseSecureBootVar(*t);

  // 4. The running kernel's config and the modules asked for.
  p.kernelRelease = kernelRelease;
  p.kernelConfig = readRunningKernelConfig(host, kernelRelease, p.kernelConfigSource);
  std::set<std::string> loaded;
  if (auto t = host.read("proc/modules")) loaded = parseProcModules(*t);
  const std::set<std::string> names = moduleNamesAsked(modules);
  p.modules = moduleFacts(host, kernelRelease, &loader, names, &loaded, p.kernelConfig);

  // 5. NVSwitch fabric, confidential computing, the vGPU manager's firmware.
  p.fabricManager = readFabricManager(host);
  p.kvmTdx = readTrimmed(host, "sys/module/kvm_intel/parameters/tdx");
  p.kvmSevSnp = readTrimmed(host, "sys/module/kvm_amd/parameters/sev_snp");
  p.vfioPciDisableIdleD3 = readTrimmed(host, "sys/module/vfio_pci/parameters/disable_idle_d3");
  p.nvidiaVersion = readTrimmed(host, "sys/module/nvidia/version");
  if (auto versions = host.list("lib/firmware/nvidia")) {
    for (const auto& v : *versions) {
      auto files = host.list(hostPath("lib/firmware/nvidia", v));
      if (!files) continue;
      auto& gsp = p.gspFirmware[v];
      for (const auto& f : *files) {
        if (startsWith(f, "gsp_") && endsWith(f, ".bin")) gsp.push_back(f);
      }
      std::sort(gsp.begin(), gsp.end());
    }
  }
  return p;
}

std::vector<ImageKernel> readImageKernels(
    const Host& host, const std::vector<std::string>& modules,
    const std::function<std::unique_ptr<ModuleLoader>(const std::string&)>& loaderFor) {
  std::vector<ImageKernel> out;
  const std::set<std::string> names = moduleNamesAsked(modules);
  auto releases = host.list("lib/modules");
  if (!releases) return out;
  for (const auto& r : *releases) {
    // Only real release directories: they hold a module index or at least a kernel/ tree.
    const std::string dir = hostPath("lib/modules", r);
    if (r.empty() || r[0] == '.' || r.find('/') != std::string::npos) continue;
    if (!host.exists(hostPath(dir, "modules.dep")) && !host.exists(hostPath(dir, "kernel")) &&
        !host.exists(hostPath(dir, "modules.builtin"))) {
      continue;
    }
    ImageKernel k;
    k.release = r;
    k.config = readKernelConfig(host, r);
    auto loader = loaderFor(r);
    k.modules = moduleFacts(host, r, loader.get(), names, nullptr, k.config);
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace hostprep
