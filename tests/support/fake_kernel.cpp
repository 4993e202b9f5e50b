#include "tests/support/fake_kernel.hpp"

#include <algorithm>

#include "drivers/parsers.hpp"
#include "drivers/plan.hpp"
#include "drivers/snapshot.hpp"
#include "drivers/text.hpp"

namespace fs = std::filesystem;

namespace hostprep::test {
namespace {

// Which driver claims what in the fake world, in probe order (nvidia wins over nouveau, as the
// real nvidia package arranges with its blacklist).
constexpr const char* kProbeOrder[] = {"nvidia", "standin", "snd_hda_intel", "xhci_hcd", "ucsi_ccg",
                                       "nvme",   "e1000e",  "pcieport",      "nouveau"};

std::string trimmed(std::string_view s) { return std::string(trim(s)); }

}  // namespace

std::string fakeDriverOfModule(const std::string& module) {
  const std::string m = normalizeModuleName(module);
  if (startsWith(m, "vfio_pci") || m == "nvgrace_gpu_vfio_pci") return vfioDriverName(m);
  if (m == "pci_stub") return "pci-stub";
  if (m == "pci_pf_stub") return "pci-pf-stub";
  return m;
}

FakeKernel::FakeKernel(fs::path root) : fs_(std::move(root)) {}

bool FakeKernel::driverMatches(const std::string& d, const PciFunction& f) const {
  const uint16_t p = classPrefix(f.classCode);
  if (d == "nvidia") return f.id.vendor == kNvidiaVendor && (baseClass(f.classCode) == 0x03 || p == 0x0680);
  if (d == "nouveau") return f.id.vendor == kNvidiaVendor && baseClass(f.classCode) == 0x03;
  if (d == "standin") return f.id == PciId{0x1234, 0x11e8};
  if (d == "snd_hda_intel") return p == 0x0403;
  if (d == "xhci_hcd") return p == 0x0c03;
  if (d == "ucsi_ccg") return p == 0x0c80;
  if (d == "nvme") return p == 0x0108;
  if (d == "e1000e") return p == 0x0200;
  if (d == "pcieport") return p == 0x0604;
  return false;  // vfio-pci and the stubs bind only through driver_override
}

std::optional<std::string> FakeKernel::boundDriver(const Bdf& b) const {
  return readLinkName(fs_, hostPath(pciDevicePath(b), "driver"));
}

void FakeKernel::refreshVfioNode(const PciFunction& f) {
  if (!f.iommuGroup) return;
  const std::string node = "dev/vfio/" + std::to_string(*f.iommuGroup);
  bool any = false;
  if (auto members = fs_.list(hostPath("sys/kernel/iommu_groups", std::to_string(*f.iommuGroup), "devices"))) {
    for (const auto& m : *members) {
      auto mb = parseBdf(m);
      auto d = mb ? boundDriver(*mb) : std::nullopt;
      any = any || (d && isVfioDriver(*d));
    }
  }
  std::error_code ec;
  if (any) {
    fs::create_directories(fs_.resolve("dev/vfio"), ec);
    if (!fs_.exists(node)) (void)fs_.writeFileAtomic(node, "", 0600);
  } else {
    fs::remove(fs_.resolve(node), ec);
  }
}

bool FakeKernel::bind(const Bdf& b, const std::string& driver, int* err) {
  auto f = readPciFunction(fs_, b);
  if (!f) return *err = ENODEV, false;
  if (!fs_.exists(pciDriverPath(driver))) return *err = ENOENT, false;
  if (f->driver) return *err = EBUSY, false;
  if (f->driverOverride) {
    if (*f->driverOverride != driver) return *err = ENODEV, false;
  } else if (!driverMatches(driver, *f)) {
    return *err = ENODEV, false;
  }
  if (refused_.count({b, driver})) return *err = EINVAL, false;
  if (isVfioDriver(driver)) {
    if (isBridge(f->classCode)) return *err = EINVAL, false;  // vfio-pci refuses bridges
    if (f->sriovNumVfs.value_or(0) > 0) return *err = EBUSY, false;
  }
  const std::string devDir = fs_.resolve(pciDevicePath(b)).string();
  const std::string real = fs::canonical(devDir).string();
  const std::string rel = fs::relative(fs_.resolve(pciDriverPath(driver)), fs::path(real)).string();
  fs::create_directory_symlink(rel, fs::path(real) / "driver");
  fs::create_directory_symlink(fs::relative(real, fs_.resolve(pciDriverPath(driver))),
                               fs_.resolve(hostPath(pciDriverPath(driver), b.str())));
  f->driver = driver;
  refreshVfioNode(*f);
  return true;
}

void FakeKernel::unbindNow(const Bdf& b, const std::string& driver) {
  std::error_code ec;
  fs::remove(fs_.resolve(hostPath(pciDevicePath(b), "driver")), ec);
  fs::remove(fs_.resolve(hostPath(pciDriverPath(driver), b.str())), ec);
  if (auto f = readPciFunction(fs_, b)) refreshVfioNode(*f);
}

Status FakeKernel::loadModule(const std::string& module) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  const std::string m = normalizeModuleName(module);
  const std::string release = readTrimmed(fs_, "proc/sys/kernel/osrelease").value_or("");
  auto dep = fs_.read(hostPath("lib/modules", release, "modules.dep"));
  if (!dep || dep->find("/" + m + ".ko:") == std::string::npos) {
    return sysError("cannot load module " + m + ": not found for kernel " + release, ENOENT);
  }
  if (fs_.exists(hostPath("sys/module", m))) return {};
  (void)fs_.makeDirs(hostPath("sys/module", m), 0755);
  auto mods = fs_.read("proc/modules").value_or("");
  (void)fs_.writeFileAtomic("proc/modules", mods + m + " 16384 0 - Live 0x0000000000000000\n", 0444);
  const std::string drv = fakeDriverOfModule(m);
  (void)fs_.makeDirs(pciDriverPath(drv), 0755);
  for (const char* f : {"bind", "unbind", "new_id", "remove_id"}) {
    (void)fs_.writeFileAtomic(hostPath(pciDriverPath(drv), f), "", 0200);
  }
  // driver_register() attaches the new driver to every unbound device it matches.
  if (auto devs = fs_.list("sys/bus/pci/devices")) {
    for (const auto& d : *devs) {
      int err = 0;
      if (auto b = parseBdf(d)) (void)bind(*b, drv, &err);
    }
  }
  return {};
}

Status FakeKernel::writeAttr(std::string_view path, std::string_view data,
                             std::optional<std::chrono::milliseconds> timeout) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  std::string p(path);
  while (startsWith(p, "/")) p.erase(0, 1);
  const size_t n = writes_.size();
  writes_.push_back(p + " <- " + trimmed(data));
  if (failAt_ && *failAt_ == n) return sysError("cannot write to " + p + " (injected)", failErr_);
  for (const auto& [needle, err] : failPaths_) {
    if (p.find(needle) != std::string::npos) return sysError("cannot write to " + p + " (injected)", err);
  }
  auto s = apply(p, std::string(data));
  if (!s && s.error().err == ETIMEDOUT && !timeout) {
    return sysError("write to " + p + " would block forever (no timeout given)", EDEADLK);
  }
  return s;
}

Status FakeKernel::apply(const std::string& p, const std::string& data) {
  const std::string value = trimmed(data);
  auto err = [&](int e) { return sysError("cannot write '" + value + "' to " + p, e); };
  if (!fs_.exists(p)) return err(ENOENT);

  if (p == "sys/bus/pci/drivers_probe") {
    auto b = parseBdf(value);
    if (!b) return err(EINVAL);
    auto f = readPciFunction(fs_, *b);
    if (!f) return err(ENODEV);
    if (f->driver) return {};
    int e = 0;
    if (f->driverOverride) {
      (void)bind(*b, *f->driverOverride, &e);  // probe failures are not reported by drivers_probe
      return {};
    }
    for (const char* d : kProbeOrder) {
      if (bind(*b, d, &e)) return {};
    }
    return {};  // nothing matched: success, nothing bound
  }
  if (startsWith(p, "sys/bus/pci/drivers/")) {
    auto parts = split(p, '/');
    if (parts.size() != 6) return err(EINVAL);
    const std::string driver(parts[4]);
    const std::string_view op = parts[5];
    auto b = parseBdf(value);
    if (!b) return err(EINVAL);
    if (op == "unbind") {
      if (boundDriver(*b) != driver) return err(ENODEV);
      if (held_.count(*b)) return err(ETIMEDOUT);  // remove() would never return
      unbindNow(*b, driver);
      return {};
    }
    if (op == "bind") {
      int e = 0;
      if (!bind(*b, driver, &e)) return err(e);
      return {};
    }
    return err(EINVAL);
  }
  if (startsWith(p, "sys/bus/pci/devices/") && endsWith(p, "/driver_override")) {
    if (value.size() > 63) return err(EINVAL);
    return fs_.writeFileAtomic(p, (value.empty() ? "(null)" : value) + "\n", 0644);
  }
  return err(EPERM);  // an attribute the fake does not model: fail loudly
}

bool FakeModules::available(const std::string& module) const {
  const std::string release = readTrimmed(k_, "proc/sys/kernel/osrelease").value_or("");
  auto dep = k_.read(hostPath("lib/modules", release, "modules.dep"), kDefaultReadCap);
  return dep && dep->find("/" + normalizeModuleName(module) + ".ko:") != std::string::npos;
}

}  // namespace hostprep::test
