#include "tests/support/fake_kernel.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "tests/support/fixture.hpp"

namespace fs = std::filesystem;

namespace hostprep::test {
namespace {

// Which driver claims what in the fake world, in probe order (nvidia wins over nouveau, as the
// real nvidia package arranges with its blacklist).
constexpr const char* kProbeOrder[] = {"nvidia",   "nvidia-nvswitch", "standin", "snd_hda_intel",
                                       "xhci_hcd", "ucsi_ccg",        "nvme",    "e1000e",
                                       "pcieport", "nouveau"};

std::string trimmed(std::string_view s) { return std::string(trim(s)); }

// A host path as the fake keys it: without leading slashes.
std::string relative(std::string_view path) {
  while (startsWith(path, "/")) path.remove_prefix(1);
  return std::string(path);
}

// A symbolic link with a relative target, as sysfs has them.
void relLink(const fs::path& link, const fs::path& target) {
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  fs::remove(link, ec);
  fs::create_directory_symlink(fs::relative(target, link.parent_path()), link, ec);
}

std::string fakeDir(std::string_view kind, const Bdf& b) { return hostPath("fake", kind, b.str()); }

std::optional<int> readInt(const Host& h, const std::string& path) {
  auto v = parseSigned(readTrimmed(h, path).value_or(""));
  if (!v || *v < 0 || *v > 1'000'000) return std::nullopt;
  return static_cast<int>(*v);
}

}  // namespace

// Kernel-made files: written in place, no fsync (the fake makes thousands when VFs appear), and
// only when the content changes.
void FakeKernel::putFile(const std::string& path, const std::string& text, mode_t) {
  const fs::path p = fs_.resolve(path);
  if (auto cur = fs_.read(path); cur && *cur == text) return;
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

namespace {}  // namespace

std::vector<std::string> fakeDriversOfModule(const std::string& module) {
  const std::string m = normalizeModuleName(module);
  if (startsWith(m, "vfio_pci") || m == "nvgrace_gpu_vfio_pci") return {vfioDriverName(m)};
  if (m == "pci_stub") return {"pci-stub"};
  if (m == "pci_pf_stub") return {"pci-pf-stub"};
  // nvidia.ko registers two PCI drivers: nvidia (GPUs) and nvidia-nvswitch (NVSwitches;
  // NVSWITCH_DRIVER_NAME in NVIDIA/open-gpu-kernel-modules).
  if (m == "nvidia") return {"nvidia", "nvidia-nvswitch"};
  // Drivers not named as their modules: drivers/usb/host/xhci-pci.c registers "xhci_hcd",
  // drivers/i2c/busses/i2c-nvidia-gpu.c "nvidia-gpu".
  if (m == "xhci_pci") return {"xhci_hcd"};
  if (m == "i2c_nvidia_gpu") return {"nvidia-gpu"};
  return {m};
}

std::string fakeModuleOfDriver(const std::string& driver) {
  if (driver == "nvidia-nvswitch") return "nvidia";
  if (driver == "xhci_hcd") return "xhci_pci";
  if (driver == "nvidia-gpu") return "i2c_nvidia_gpu";
  return normalizeModuleName(driver);  // vfio-pci -> vfio_pci, pci-pf-stub -> pci_pf_stub
}

void addFakeDriver(const fs::path& root, const std::string& driver, const std::string& module) {
  const fs::path dir = root / pciDriverPath(driver);
  fs::create_directories(dir);
  for (const char* f : {"bind", "unbind", "new_id", "remove_id"}) {
    if (!fs::exists(dir / f)) std::ofstream(dir / f).flush();
  }
  std::error_code ec;
  fs::create_directories(root / "sys/module" / module, ec);
  if (!fs::is_symlink(dir / "module", ec))
    fs::create_directory_symlink("../../../../module/" + module, dir / "module", ec);
}

FakeKernel::FakeKernel(fs::path root) : fs_(std::move(root)) {}

bool FakeKernel::driverMatches(const std::string& d, const PciFunction& f) const {
  const uint16_t p = classPrefix(f.classCode);
  if (d == "nvidia") return f.id.vendor == kNvidiaVendor && baseClass(f.classCode) == 0x03;
  if (d == "nvidia-nvswitch") return f.id.vendor == kNvidiaVendor && p == 0x0680;
  if (d == "nouveau") return f.id.vendor == kNvidiaVendor && baseClass(f.classCode) == 0x03;
  if (d == "standin") return f.id == PciId{0x1234, 0x11e8};
  if (d == "vfio-pci") return vfioPciIds().count(f.id) > 0;
  if (d == "snd_hda_intel") return p == 0x0403;
  if (d == "xhci_hcd") return p == 0x0c03;
  if (d == "ucsi_ccg") return p == 0x0c80;
  if (d == "nvme") return p == 0x0108;
  if (d == "e1000e") return p == 0x0200;
  if (d == "pcieport") return p == 0x0604;
  return false;  // the stubs, and vfio-pci beyond its ids, bind only through driver_override
}

// vfio-pci's ID table: its `ids` parameter (vfio-pci.ids= on the command line, as
// drivers/vfio/pci/vfio_pci.c vfio_pci_fill_ids() adds them) and the dynamic IDs written to its
// new_id (kept by the fake in fake/new_id/vfio-pci, "vvvv:dddd" a line).
std::set<PciId> FakeKernel::vfioPciIds() const {
  std::set<PciId> ids;
  auto add = [&](std::string_view list, char sep) {
    for (auto item : split(list, sep)) {
      if (auto id = parsePciId(trim(item))) ids.insert(*id);
    }
  };
  const std::string cmdline = readTrimmed(fs_, "proc/cmdline").value_or("");
  for (auto word : split(cmdline, ' ')) {
    for (std::string_view key : {"vfio-pci.ids=", "vfio_pci.ids="}) {
      if (startsWith(word, key)) add(word.substr(key.size()), ',');
    }
  }
  add(fs_.read("fake/new_id/vfio-pci").value_or(""), '\n');
  return ids;
}

std::optional<std::string> FakeKernel::boundDriver(const Bdf& b) const {
  return readLinkName(fs_, hostPath(pciDevicePath(b), "driver"));
}

void FakeKernel::refreshVfioNode(const PciFunction& f) {
  if (!f.iommuGroup) return;
  const std::string node = "dev/vfio/" + std::to_string(*f.iommuGroup);
  bool any = false;
  if (auto members =
          fs_.list(hostPath("sys/kernel/iommu_groups", std::to_string(*f.iommuGroup), "devices"))) {
    for (const auto& m : *members) {
      auto mb = parseBdf(m);
      auto d = mb ? boundDriver(*mb) : std::nullopt;
      any = any || (d && isVfioDriver(*d));
    }
  }
  std::error_code ec;
  if (any) {
    fs::create_directories(fs_.resolve("dev/vfio"), ec);
    if (!fs_.exists(node)) (void)put(node, "", 0600);
  } else {
    fs::remove(fs_.resolve(node), ec);
  }
  refreshVfioDeviceFile(f.bdf);
}

// A function on a VFIO driver gets vfio-dev/vfioN (Linux 6.1+); where the fixture's kernel has
// VFIO device files (fake/vfio-device-cdev exists: CONFIG_VFIO_DEVICE_CDEV, 6.6+) the entry has a
// `dev` number and /dev/vfio/devices/vfioN appears (not when the file says "no-node"), N the
// lowest free index. Off VFIO, both go.
void FakeKernel::refreshVfioDeviceFile(const Bdf& b) {
  std::error_code ec;
  const std::string vdir = hostPath(pciDevicePath(b), "vfio-dev");
  const auto d = boundDriver(b);
  const bool onVfio = d && isVfioDriver(*d);
  if (!onVfio) {
    for (const auto& n : fs_.list(vdir).value_or(std::vector<std::string>{})) {
      fs::remove(fs_.resolve(hostPath("dev/vfio/devices", n)), ec);
      if (auto i = parseSigned(std::string_view(n).substr(std::min<size_t>(4, n.size())))) {
        takenVfioIndex_.erase(static_cast<int>(*i));
      }
    }
    fs::remove_all(fs_.resolve(vdir), ec);
    return;
  }
  if (fs_.exists(vdir)) return;
  int n = 0;
  while (fs_.exists(hostPath("dev/vfio/devices", "vfio" + std::to_string(n))) ||
         takenVfioIndex_.count(n))
    ++n;
  takenVfioIndex_.insert(n);
  const std::string name = "vfio" + std::to_string(n);
  (void)fs_.makeDirs(hostPath(vdir, name), 0755);
  if (fs_.exists("fake/vfio-device-cdev")) {
    putFile(hostPath(vdir, name, "dev"), "511:" + std::to_string(n) + "\n", 0444);
    // "no-node": the kernel made the device, but nothing created its /dev node (no devtmpfs).
    if (readTrimmed(fs_, "fake/vfio-device-cdev") == "no-node") return;
    (void)fs_.makeDirs("dev/vfio/devices", 0755);
    putFile(hostPath("dev/vfio/devices", name), "", 0600);
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
    // vfio-pci refuses a function whose header is not type 0 (vfio_pci_probe(): bridges to
    // another bus, class 0604, 0607 and 0609); other class 06 functions, such as an NVSwitch
    // (0680), are endpoints it takes.
    const uint16_t p = classPrefix(f->classCode);
    if (p == 0x0604 || p == 0x0607 || p == 0x0609) return *err = EINVAL, false;
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
  if (driver == "nvidia") {
    if (f->physfn) vgpuTypesOn(b, true);
    // The nvidia driver's per-GPU procfs directory, with its unbindLock, while it holds the GPU.
    if (fs_.exists(fakeDir("unbindlock", b))) {
      (void)fs_.makeDirs(hostPath("proc/driver/nvidia/gpus", b.str()), 0755);
      (void)fs_.writeFileAtomic(unbindLockPath(b), "0\n", 0644);
    }
  }
  return true;
}

std::optional<Bdf> FakeKernel::lockedBy(const std::string& path) const {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (pendingUnbind_.empty() && pendingNumVfs_.empty() && pendingProbe_.empty())
    return std::nullopt;
  const auto parts = split(path, '/');
  if (startsWith(path, "sys/bus/pci/devices/") && parts.size() == 6) {
    auto b = parseBdf(parts[4]);
    if (b && lockHeld(*b) && (parts[5] == "driver_override" || parts[5] == "sriov_numvfs")) {
      return b;
    }
  }
  return std::nullopt;
}

Result<std::string> FakeKernel::read(std::string_view path, size_t cap) const {
  const std::string p = relative(path);
  if (auto b = lockedBy(p)) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    blocked_.push_back("read " + p);
    return sysError("read of " + p + " would block forever: " + b->str() +
                        "'s unbind or sriov_numvfs write holds its device lock",
                    EDEADLK);
  }
  return fs_.read(path, cap);
}

Result<std::string> FakeKernel::readAttr(std::string_view path,
                                         std::chrono::milliseconds timeout) const {
  const std::string p = relative(path);
  if (lockedBy(p))
    return sysError(
        "cannot read " + p + ": read did not return in " + std::to_string(timeout.count()) + " ms",
        ETIMEDOUT);
  return fs_.read(path, 4096);
}

void FakeKernel::unbindNow(const Bdf& b, const std::string& driver) {
  std::error_code ec;
  if (driver == "nvidia") {
    vgpuTypesOn(b, false);
    fs::remove_all(fs_.resolve(hostPath("proc/driver/nvidia/gpus", b.str())), ec);
  }
  fs::remove(fs_.resolve(hostPath(pciDevicePath(b), "driver")), ec);
  fs::remove(fs_.resolve(hostPath(pciDriverPath(driver), b.str())), ec);
  if (auto f = readPciFunction(fs_, b)) refreshVfioNode(*f);
}

void FakeKernel::unplug(const Bdf& b) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  auto f = readPciFunction(fs_, b);
  if (!f) return;
  if (f->driver) unbindNow(b, *f->driver);
  std::error_code ec;
  const fs::path link = fs_.resolve(pciDevicePath(b));
  const fs::path real = fs::canonical(link, ec);
  if (f->iommuGroup) {
    fs::remove(fs_.resolve(hostPath("sys/kernel/iommu_groups", std::to_string(*f->iommuGroup),
                                    "devices", b.str())),
               ec);
  }
  fs::remove(link, ec);
  if (!real.empty()) fs::remove_all(real, ec);
  refreshVfioNode(*f);
}

Status FakeKernel::loadModule(const std::string& module) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  const std::string m = normalizeModuleName(module);
  const std::string release = readTrimmed(fs_, "proc/sys/kernel/osrelease").value_or("");
  auto dep = fs_.read(hostPath("lib/modules", release, "modules.dep"));
  if (!dep || dep->find("/" + m + ".ko:") == std::string::npos) {
    return sysError("cannot load module " + m + ": not found for kernel " + release, ENOENT);
  }
  return insmod(m);
}

Status FakeKernel::insmod(const std::string& module) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  const std::string m = normalizeModuleName(module);
  if (fs_.exists(hostPath("sys/module", m))) return {};
  (void)fs_.makeDirs(hostPath("sys/module", m), 0755);
  auto mods = fs_.read("proc/modules").value_or("");
  (void)put("proc/modules", mods + m + " 16384 0 - Live 0x0000000000000000\n", 0444);
  const auto drivers = fakeDriversOfModule(m);
  for (const auto& drv : drivers) addFakeDriver(fs_.root(), drv, m);
  // driver_register() attaches the new driver to every unbound device it matches.
  if (auto devs = fs_.list("sys/bus/pci/devices")) {
    for (const auto& d : *devs) {
      for (const auto& drv : drivers) {
        int err = 0;
        if (auto b = parseBdf(d); b && bind(*b, drv, &err)) break;
      }
    }
  }
  return {};
}

void FakeKernel::mutation() {
  if (crashAt_ && *crashAt_ == mutations_) {
    crashAt_.reset();
    throw Crash{mutations_};
  }
  ++mutations_;
}

Status FakeKernel::writeFileAtomic(std::string_view path, std::string_view data, mode_t mode) {
  mutation();
  const size_t n = fileWrites_++;
  if (auto it = failFileAt_.find(n); it != failFileAt_.end()) {
    failedMutation_ = mutations_ - 1;
    return sysError("cannot write " + std::string(path) + " (injected)", it->second);
  }
  return put(path, data, mode);
}

Status FakeKernel::put(std::string_view path, std::string_view data, mode_t mode) {
  if (auto why = hostPathProblem(path); !why.empty()) return sysError("unsafe path " + why, EINVAL);
  const fs::path p = fs_.resolve(path);
  const fs::path tmp = p.parent_path() / ("." + p.filename().string() + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << data;
    if (!f) return sysError("cannot write " + tmp.string(), EIO);
  }
  std::error_code ec;
  fs::permissions(tmp, static_cast<fs::perms>(mode), ec);
  fs::rename(tmp, p, ec);
  if (ec) return sysError("cannot rename to " + p.string(), ec.value());
  return {};
}

Status FakeKernel::removeFile(std::string_view path) {
  mutation();
  return fs_.removeFile(path);
}

Status FakeModules::load(const std::string& module) {
  k_.mutation();
  return k_.loadModule(module);
}

Status FakeKernel::writeAttr(std::string_view path, std::string_view data,
                             std::optional<std::chrono::milliseconds> timeout) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  mutation();
  const std::string p = relative(path);
  const size_t n = writes_.size();
  writes_.push_back(p + " <- " + trimmed(data));
  if (auto it = failAt_.find(n); it != failAt_.end()) {
    failedMutation_ = mutations_ - 1;
    return sysError("cannot write to " + p + " (injected)", it->second);
  }
  for (const auto& [needle, err] : failPaths_) {
    if (p.find(needle) != std::string::npos)
      return sysError("cannot write to " + p + " (injected)", err);
  }
  // A write that takes a device lock a pending unbind holds blocks until remove() returns.
  std::optional<Bdf> locked = lockedBy(p);
  if (!locked &&
      (endsWith(p, "/bind") || endsWith(p, "/unbind") || p == "sys/bus/pci/drivers_probe")) {
    if (auto b = parseBdf(trimmed(data)); b && lockHeld(*b)) locked = b;
  }
  if (locked) {
    blocked_.push_back("write " + p);
    if (timeout)
      return sysError("cannot write to " + p + ": blocked on " + locked->str(), ETIMEDOUT);
    return sysError("write to " + p + " would block forever: " + locked->str() +
                        "'s unbind or sriov_numvfs write holds its device lock",
                    EDEADLK);
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
      return stalls(*b) ? err(ETIMEDOUT) : Status{};
    }
    for (const char* d : kProbeOrder) {
      if (bind(*b, d, &e)) return stalls(*b) ? err(ETIMEDOUT) : Status{};
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
      if (held_.count(*b)) {
        // remove() runs on in the kernel until the holder goes; the links are already gone.
        pendingUnbind_[*b] = driver;
        std::error_code ec;
        fs::remove(fs_.resolve(hostPath(pciDevicePath(*b), "driver")), ec);
        fs::remove(fs_.resolve(hostPath(pciDriverPath(driver), b->str())), ec);
        return err(ETIMEDOUT);
      }
      unbindNow(*b, driver);
      return {};
    }
    if (op == "bind") {
      int e = 0;
      if (!bind(*b, driver, &e)) return err(e);
      return stalls(*b) ? err(ETIMEDOUT) : Status{};
    }
    return err(EINVAL);
  }
  const auto parts = split(p, '/');
  if (startsWith(p, "sys/bus/pci/devices/") && endsWith(p, "/sriov_numvfs") && parts.size() == 6) {
    auto b = parseBdf(parts[4]);
    auto n = parseUnsigned(value);
    if (!b || !n || *n > 4096) return err(EINVAL);
    if (auto s = setNumVfs(*b, static_cast<int>(*n)); !s) return err(s.error().err);
    return {};
  }
  if (startsWith(p, "sys/bus/pci/devices/") && parts.size() == 8 &&
      parts[5] == "mdev_supported_types" && parts[7] == "create") {
    auto b = parseBdf(parts[4]);
    if (!b) return err(EINVAL);
    if (auto s = createMdev(*b, std::string(parts[6]), value); !s) return err(s.error().err);
    return {};
  }
  if (startsWith(p, "sys/bus/mdev/devices/") && parts.size() == 6 && parts[5] == "remove") {
    if (value != "1") return err(EINVAL);
    if (auto s = removeMdev(std::string(parts[4])); !s) return err(s.error().err);
    return {};
  }
  if (startsWith(p, "sys/bus/pci/devices/") && parts.size() == 7 && parts[5] == "nvidia" &&
      parts[6] == "current_vgpu_type") {
    auto b = parseBdf(parts[4]);
    if (!b || !parseUnsigned(value)) return err(EINVAL);
    if (auto s = setVgpuType(*b, value); !s) return err(s.error().err);
    return {};
  }
  if (startsWith(p, "proc/driver/nvidia/gpus/") && parts.size() == 6 && parts[5] == "unbindLock") {
    auto b = parseBdf(parts[4]);
    if (!b || (value != "0" && value != "1")) return err(EINVAL);
    const bool refuse = readTrimmed(fs_, fakeDir("unbindlock", *b)) == "refuse";
    return fs_.writeFileAtomic(p, (value == "1" && !refuse) ? "1\n" : "0\n", 0644);
  }
  if (startsWith(p, "sys/bus/pci/devices/") && parts.size() == 6 &&
      (parts[5] == "reset" || parts[5] == "reset_subordinate" || parts[5] == "remove" ||
       parts[5] == "rescan")) {
    auto b = parseBdf(parts[4]);
    if (!b || value != "1") return err(EINVAL);
    if (parts[5] == "reset") {
      if (lockHeld(*b)) return err(ETIMEDOUT);  // pci_reset_function waits for the device lock
      // The kernel tries reset_method's methods in order. Its "bus" method (pci_reset_bus_function:
      // a hotplug slot's reset, else pci_parent_bus_reset) only works for a function alone on its
      // bus, and is checked again at the reset: the kernel lists it for function 0 of a
      // multi-function device, probed before the other functions were on the bus
      // (pci_init_capabilities runs before pci_device_add puts a function on its bus), and the
      // write then fails with ENOTTY (seen on Debian's 6.1 and 6.12, tests/vm/README.md).
      if (auto m = readTrimmed(
              fs_, hostPath(parts[0], parts[1], parts[2], parts[3], parts[4], "reset_method"))) {
        bool works = false;
        for (auto w : splitWords(*m)) {
          if (w != "bus" && w != "cxl_bus") {
            works = true;
            break;
          }
          bool alone = true;
          if (auto devs = fs_.list("sys/bus/pci/devices")) {
            for (const auto& d : *devs) {
              auto x = parseBdf(d);
              if (x && *x != *b && x->domain == b->domain && x->bus == b->bus) alone = false;
            }
          }
          if (alone && b->bus != 0) {
            works = true;
            break;
          }
        }
        if (!works) return err(ENOTTY);
      }
      resetNow(*b, "function");
      return {};
    }
    if (parts[5] == "remove") {
      unplug(*b);  // pci_stop_and_remove_bus_device: the driver lets go, the function goes
      return {};
    }
    auto bus = readInt(
        fs_, hostPath(parts[0], parts[1], parts[2], parts[3], parts[4], "secondary_bus_number"));
    if (!bus) return err(ENOENT);
    std::vector<Bdf> below;
    if (auto devs = fs_.list("sys/bus/pci/devices")) {
      for (const auto& d : *devs) {
        if (auto x = parseBdf(d); x && x->domain == b->domain && x->bus == *bus)
          below.push_back(*x);
      }
    }
    if (parts[5] == "rescan") {
      rescanBus(b->domain, static_cast<uint8_t>(*bus));
      return {};
    }
    // __pci_reset_bus: every device below locked with trylock, or EAGAIN.
    for (const auto& x : below) {
      if (lockHeld(x)) return err(EAGAIN);
    }
    for (const auto& x : below) resetNow(x, "bus");
    return {};
  }
  if (p == "sys/bus/pci/rescan") {
    if (value != "1") return err(EINVAL);
    rescanBus(std::nullopt, std::nullopt);
    return {};
  }
  if (startsWith(p, "sys/bus/pci/devices/") && endsWith(p, "/driver_override")) {
    if (value.size() > 63) return err(EINVAL);
    return put(p, (value.empty() ? "(null)" : value) + "\n", 0644);
  }
  return err(EPERM);  // an attribute the fake does not model: fail loudly
}

void FakeKernel::stopAnswering(const Bdf& b) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  const std::string dev = pciDevicePath(b);
  (void)put(hostPath(dev, "config"), std::string(64, '\xff'), 0644);
  if (fs_.exists(hostPath(dev, "power_state")))
    (void)put(hostPath(dev, "power_state"), "D3cold\n", 0644);
}

void FakeKernel::resetNow(const Bdf& b, std::string_view how) {
  const std::string counter = fakeDir("reset", b);
  (void)fs_.makeDirs("fake/reset", 0755);
  const int n = readInt(fs_, counter).value_or(0);
  (void)put(counter, std::to_string(n + 1) + "\n", 0644);
  recoverIf(b, how);
}

// A function that stopped answering comes back by what fake/recover/<BDF> names: a function
// reset brings back what it names and more (function < bus < rescan), "never" stays dead.
void FakeKernel::recoverIf(const Bdf& b, std::string_view how) {
  const std::string by = readTrimmed(fs_, fakeDir("recover", b)).value_or("never");
  auto rank = [](std::string_view w) {
    return w == "function" ? 1 : w == "bus" ? 2 : w == "rescan" ? 3 : 9;
  };
  if (rank(by) > rank(how)) return;
  auto f = readPciFunction(fs_, b);
  if (!f) return;
  (void)put(hostPath(pciDevicePath(b), "config"), configBytes(f->id), 0644);
  if (fs_.exists(hostPath(pciDevicePath(b), "power_state")))
    (void)put(hostPath(pciDevicePath(b), "power_state"), "D0\n", 0644);
}

// pci_rescan_bus: every removed function (fake/devices/, left by the fixture) on the bus comes
// back as a new device: no driver, no override, its config answering where a rescan fixes it;
// then the driver core probes it (bus_probe_device), as drivers_probe would.
void FakeKernel::rescanBus(std::optional<uint32_t> domain, std::optional<uint8_t> bus) {
  auto saved = fs_.list("fake/devices");
  if (!saved) return;
  for (const auto& name : *saved) {
    auto b = parseBdf(std::string_view(name).substr(0, name.find(".yaml")));
    if (!b || fs_.exists(pciDevicePath(*b))) continue;
    if ((domain && b->domain != *domain) || (bus && b->bus != *bus)) continue;
    auto yaml = fs_.read(hostPath("fake/devices", name));
    if (!yaml) continue;
    YAML::Node d = YAML::Load(*yaml);
    d.remove("driver");
    d.remove("driver_override");
    const std::string by = readTrimmed(fs_, fakeDir("recover", *b)).value_or("never");
    if (by != "never") d["responsive"] = true;
    addFixtureDevice(fs_.root(), YAML::Dump(d));
    (void)put(fakeDir("recover", *b), by + "\n", 0644);
    if (auto f = readPciFunction(fs_, *b)) refreshVfioNode(*f);
    int e = 0;
    for (const char* drv : kProbeOrder) {
      if (bind(*b, drv, &e)) break;
    }
  }
}

void FakeKernel::releaseDevice(const Bdf& b) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  held_.erase(b);
  pendingProbe_.erase(b);
  for (auto pf = pendingNumVfs_.begin(); pf != pendingNumVfs_.end(); ++pf) {
    if (pf->second.vf != b || !pf->second.enable) continue;
    const auto [next, n] = *pf->second.enable;
    const Bdf parent = pf->first;
    pendingNumVfs_.erase(pf);
    if (auto f = readPciFunction(fs_, parent)) (void)addVfs(*f, next, n);  // the enable goes on
    return;
  }
  auto it = pendingUnbind_.find(b);
  if (it == pendingUnbind_.end()) return;
  unbindNow(b, it->second);
  pendingUnbind_.erase(it);
  for (auto pf = pendingNumVfs_.begin(); pf != pendingNumVfs_.end(); ++pf) {
    if (pf->second.vf != b) continue;
    const Bdf parent = pf->first;
    pendingNumVfs_.erase(pf);
    (void)setNumVfs(parent, 0);  // the disable goes on with the VFs after it
    break;
  }
}

Bdf FakeKernel::gpuOf(const Bdf& parent) const {
  if (auto pf = readLinkName(fs_, hostPath(pciDevicePath(parent), "physfn"))) {
    if (auto b = parseBdf(*pf)) return *b;
  }
  return parent;
}

Status FakeKernel::setNumVfs(const Bdf& pf, int n) {
  auto f = readPciFunction(fs_, pf);
  if (!f) return sysError("no device", ENODEV);
  if (n > f->sriovTotalVfs.value_or(0)) return sysError("above sriov_totalvfs", ERANGE);
  // sriov_numvfs_store(): no driver, or a driver without sriov_configure (nvidia) -> ENOENT.
  if (!f->driver || *f->driver == "nvidia") return sysError("no sriov_configure", ENOENT);
  const int cur = f->sriovNumVfs.value_or(0);
  if (n == cur) return {};
  if (cur != 0 && n != 0) return sysError("VFs already enabled", EBUSY);
  const std::string attr = hostPath(pciDevicePath(pf), "sriov_numvfs");
  if (n == 0) {
    for (const auto& vf : f->virtfns) {
      if (readTrimmed(fs_, perVfPath(vf, "current_vgpu_type")).value_or("0") != "0")
        return sysError("vGPU", EBUSY);
      for (const auto& d : readVgpuDevices(fs_, {vf})) {
        if (d.iface == VgpuInterface::kMdev) return sysError("mdev on VF", EBUSY);
      }
    }
    for (int i = 0; i < cur; ++i) {
      auto vf = vfAddress(pf, f->sriovOffset.value_or(1), f->sriovStride.value_or(1), i);
      if (!vf) continue;
      if (auto d = boundDriver(*vf); d && held_.count(*vf)) {
        // Its remove() waits for the holder: the write never returns (see holdDevice). As in
        // pci_iov_remove_virtfn(), the virtfn and physfn links went before the device's removal.
        pendingUnbind_[*vf] = *d;
        pendingNumVfs_[pf] = {*vf, std::nullopt};
        std::error_code ec;
        fs::remove(fs_.resolve(hostPath(pciDevicePath(pf), "virtfn" + std::to_string(i))), ec);
        fs::remove(fs_.resolve(hostPath(pciDevicePath(*vf), "physfn")), ec);
        fs::remove(fs_.resolve(hostPath(pciDevicePath(*vf), "driver")), ec);
        fs::remove(fs_.resolve(hostPath(pciDriverPath(*d), vf->str())), ec);
        return sysError("a VF's remove() is blocked", ETIMEDOUT);
      }
      removeVf(pf, *vf, i);
    }
    putFile(attr, "0\n", 0644);
    return {};
  }
  return addVfs(*f, 0, n);
}

// sriov_add_vfs(): each VF is added and, with sriov_drivers_autoprobe, probed before the next
// (pci_iov_add_virtfn() -> pci_bus_add_device()); sriov_numvfs reads the new count once all are.
// A probe that stallProbe() named blocks the write there, the PF's device lock taken, until
// releaseDevice() of that VF lets it go on with the VFs after it.
Status FakeKernel::addVfs(const PciFunction& pf, int from, int n) {
  const bool autoprobe = pf.sriovDriversAutoprobe.value_or(true);
  batching_ = true;
  for (int i = from; i < n; ++i) {
    addVf(pf, i);
    auto vf = vfAddress(pf.bdf, pf.sriovOffset.value_or(1), pf.sriovStride.value_or(1), i);
    if (!vf || !autoprobe) continue;
    int e = 0;
    for (const char* d : kProbeOrder) {
      if (bind(*vf, d, &e)) break;
    }
    if (stalls(*vf)) {
      batching_ = false;
      pendingNumVfs_[pf.bdf] = {*vf, std::pair{i + 1, n}};
      return sysError("a VF's probe() is blocked", ETIMEDOUT);
    }
  }
  batching_ = false;
  putFile(hostPath(pciDevicePath(pf.bdf), "sriov_numvfs"), std::to_string(n) + "\n", 0644);
  if (autoprobe) recomputeVgpu(pf.bdf);
  return {};
}

void FakeKernel::addVf(const PciFunction& pf, int index) {
  auto vf = vfAddress(pf.bdf, pf.sriovOffset.value_or(1), pf.sriovStride.value_or(1), index);
  if (!vf) return;
  const fs::path pfDir = fs::canonical(fs_.resolve(pciDevicePath(pf.bdf)));
  const fs::path dir = pfDir.parent_path() / vf->str();
  const PciId id =
      parsePciId(readTrimmed(fs_, hostPath(fakeDir("sriov", pf.bdf), "vf_id")).value_or(""))
          .value_or(pf.id);
  auto hex = [](unsigned v, int w) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%0*x", w, v);
    return std::string(buf) + "\n";
  };
  auto put = [&](const char* name, const std::string& text) {
    putFile(fs::relative(dir / name, root()).string(), text, 0644);
  };
  fs::create_directories(dir);
  put("vendor", hex(id.vendor, 4));
  put("device", hex(id.device, 4));
  put("subsystem_vendor", hex(pf.subsystem.vendor, 4));
  put("subsystem_device", hex(pf.subsystem.device, 4));
  put("class", hex(pf.classCode, 6));
  char alias[96];
  std::snprintf(alias, sizeof alias, "pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X\n", id.vendor,
                id.device, pf.subsystem.vendor, pf.subsystem.device, (pf.classCode >> 16) & 0xff,
                (pf.classCode >> 8) & 0xff, pf.classCode & 0xff);
  put("modalias", alias);
  put("numa_node", std::to_string(pf.numaNode.value_or(-1)) + "\n");
  put("driver_override", "(null)\n");
  relLink(dir / "physfn", pfDir);
  relLink(pfDir / ("virtfn" + std::to_string(index)), dir);
  relLink(fs_.resolve(pciDevicePath(*vf)), dir);
  auto base = parseUnsigned(
      readTrimmed(fs_, hostPath(fakeDir("sriov", pf.bdf), "group_base")).value_or(""));
  const std::string g = std::to_string(base.value_or(1000) + static_cast<uint64_t>(index));
  const fs::path groupDir = fs_.resolve(hostPath("sys/kernel/iommu_groups", g));
  fs::create_directories(groupDir / "devices");
  relLink(groupDir / "devices" / vf->str(), dir);
  relLink(dir / "iommu_group", groupDir);
}

void FakeKernel::removeVf(const Bdf& pf, const Bdf& vf, int index) {
  std::error_code ec;
  if (auto d = boundDriver(vf)) unbindNow(vf, *d);
  const fs::path dir = fs_.resolve(pciDevicePath(vf));
  if (auto g = readLinkName(fs_, hostPath(pciDevicePath(vf), "iommu_group"))) {
    fs::remove_all(fs_.resolve(hostPath("sys/kernel/iommu_groups", *g)), ec);
    fs::remove(fs_.resolve(hostPath("dev/vfio", *g)), ec);
  }
  const fs::path real = fs::canonical(dir, ec);
  fs::remove(fs_.resolve(hostPath("sys/class/mdev_bus", vf.str())), ec);
  fs::remove(dir, ec);
  if (!real.empty()) fs::remove_all(real, ec);
  fs::remove(fs_.resolve(hostPath(pciDevicePath(pf), "virtfn" + std::to_string(index))), ec);
}

void FakeKernel::vgpuTypesOn(const Bdf& vf, bool present) {
  std::error_code ec;
  const Bdf pf = gpuOf(vf);
  if (pf == vf) return;
  const std::string tmpl = hostPath(fakeDir("sriov", pf), "vf");
  const fs::path dir = fs_.resolve(pciDevicePath(vf));
  if (!present) {
    fs::remove_all(dir / "mdev_supported_types", ec);
    fs::remove_all(dir / "nvidia", ec);
    fs::remove(fs_.resolve(hostPath("sys/class/mdev_bus", vf.str())), ec);
    return;
  }
  if (auto types = fs_.list(hostPath(tmpl, "mdev_supported_types"))) {
    for (const auto& t : *types) {
      const std::string from = hostPath(tmpl, "mdev_supported_types", t);
      const std::string to = mdevTypePath(vf, t);
      (void)fs_.makeDirs(hostPath(to, "devices"), 0755);
      putFile(hostPath(to, "name"), fs_.read(hostPath(from, "name")).value_or(t + "\n"), 0444);
      putFile(hostPath(to, "device_api"), "vfio-pci\n", 0444);
      putFile(hostPath(to, "available_instances"), "0\n", 0444);
      putFile(hostPath(to, "create"), "", 0200);
    }
    relLink(fs_.resolve(hostPath("sys/class/mdev_bus", vf.str())), fs::canonical(dir));
  }
  if (fs_.exists(hostPath(tmpl, "nvidia/types"))) {
    (void)fs_.makeDirs(hostPath(pciDevicePath(vf), "nvidia"), 0755);
    putFile(perVfPath(vf, "creatable_vgpu_types"), "", 0444);
    putFile(perVfPath(vf, "current_vgpu_type"), "0\n", 0644);
  }
  recomputeVgpu(pf);
}

Status FakeKernel::createMdev(const Bdf& parent, const std::string& type, const std::string& uuid) {
  if (!isValidUuid(uuid)) return sysError("bad uuid", EINVAL);
  if (fs_.exists(hostPath(kMdevDevices, uuid))) return sysError("exists", EEXIST);
  const std::string typeDir = mdevTypePath(parent, type);
  auto avail =
      parseUnsigned(readTrimmed(fs_, hostPath(typeDir, "available_instances")).value_or("0"));
  if (!avail || *avail == 0) return sysError("no instance available", EUSERS);
  const fs::path parentDir = fs::canonical(fs_.resolve(pciDevicePath(parent)));
  const fs::path dev = parentDir / uuid;
  fs::create_directories(dev);
  relLink(dev / "mdev_type", parentDir / "mdev_supported_types" / type);
  putFile(fs::relative(dev / "remove", root()).string(), "", 0200);
  int g = 10000;
  while (fs_.exists(hostPath("sys/kernel/iommu_groups", std::to_string(g)))) ++g;
  const fs::path groupDir = fs_.resolve(hostPath("sys/kernel/iommu_groups", std::to_string(g)));
  fs::create_directories(groupDir / "devices");
  relLink(groupDir / "devices" / uuid, dev);
  relLink(dev / "iommu_group", groupDir);
  relLink(fs_.resolve(hostPath(kMdevDevices, uuid)), dev);
  relLink(fs_.resolve(hostPath(typeDir, "devices", uuid)), dev);
  (void)fs_.makeDirs("dev/vfio", 0755);
  putFile(hostPath("dev/vfio", std::to_string(g)), "", 0600);
  recomputeVgpu(gpuOf(parent));
  return {};
}

Status FakeKernel::removeMdev(const std::string& uuid) {
  std::error_code ec;
  const std::string link = hostPath(kMdevDevices, uuid);
  if (!isValidUuid(uuid) || !fs_.exists(link)) return sysError("no such mdev", ENODEV);
  const fs::path dev = fs::canonical(fs_.resolve(link));
  auto parent = parseBdf(dev.parent_path().filename().string());
  if (!parent) return sysError("bad parent", EINVAL);
  if (auto t = readLinkName(fs_, hostPath(link, "mdev_type"))) {
    fs::remove(fs_.resolve(hostPath(mdevTypePath(*parent, *t), "devices", uuid)), ec);
  }
  if (auto g = readLinkName(fs_, hostPath(link, "iommu_group"))) {
    fs::remove_all(fs_.resolve(hostPath("sys/kernel/iommu_groups", *g)), ec);
    fs::remove(fs_.resolve(hostPath("dev/vfio", *g)), ec);
  }
  fs::remove(fs_.resolve(link), ec);
  fs::remove_all(dev, ec);
  recomputeVgpu(gpuOf(*parent));
  return {};
}

Status FakeKernel::setVgpuType(const Bdf& vf, const std::string& id) {
  const std::string cur = readTrimmed(fs_, perVfPath(vf, "current_vgpu_type")).value_or("0");
  if (id != "0") {
    if (cur != "0") return sysError("a vGPU type is set", EBUSY);
    bool ok = false;
    for (const auto& t :
         parseCreatableVgpuTypes(fs_.read(perVfPath(vf, "creatable_vgpu_types")).value_or(""))) {
      ok = ok || t.id == id;
    }
    if (!ok) return sysError("not creatable", EINVAL);
  }
  putFile(perVfPath(vf, "current_vgpu_type"), id + "\n", 0644);
  recomputeVgpu(gpuOf(vf));
  return {};
}

// One vGPU type per GPU at a time, at most max/<type> of it; a VF holds one vGPU.
void FakeKernel::recomputeVgpu(const Bdf& gpu) {
  if (batching_) return;
  std::vector<Bdf> parents{gpu};
  if (auto f = readPciFunction(fs_, gpu))
    parents.insert(parents.end(), f->virtfns.begin(), f->virtfns.end());
  std::map<std::string, int> count;
  std::optional<std::string> active;
  std::set<Bdf> busy;
  for (const auto& d : readVgpuDevices(fs_, parents)) {
    ++count[d.typeId];
    active = d.typeId;
    busy.insert(d.parent);
  }
  auto maxOf = [&](const std::string& key) {
    return static_cast<int>(
        parseUnsigned(readTrimmed(fs_, hostPath(fakeDir("vgpu", gpu), "max", key)).value_or("1"))
            .value_or(1));
  };
  auto allowed = [&](const std::string& key) {
    return (!active || *active == key) && count[key] < maxOf(key);
  };
  const auto full = parseCreatableVgpuTypes(
      fs_.read(hostPath(fakeDir("sriov", gpu), "vf/nvidia/types")).value_or(""));
  for (const auto& p : parents) {
    for (const auto& t : fs_.list(hostPath(pciDevicePath(p), "mdev_supported_types"))
                             .value_or(std::vector<std::string>{})) {
      int avail = 0;
      if (p == gpu) {
        avail = (!active || *active == t) ? std::max(0, maxOf(t) - count[t]) : 0;
      } else {
        avail = (!busy.count(p) && allowed(t)) ? 1 : 0;
      }
      putFile(hostPath(mdevTypePath(p, t), "available_instances"), std::to_string(avail) + "\n",
              0444);
    }
    if (fs_.exists(perVfPath(p, "creatable_vgpu_types"))) {
      const std::string cur = readTrimmed(fs_, perVfPath(p, "current_vgpu_type")).value_or("0");
      std::string text = "ID    : vGPU Name\n";
      for (const auto& t : full) {
        if (cur != "0" ? t.id == cur : allowed(t.id)) text += t.id + "  : " + t.name + "\n";
      }
      putFile(perVfPath(p, "creatable_vgpu_types"), text, 0444);
    }
  }
}

bool FakeModules::available(const std::string& module) const {
  const std::string release = readTrimmed(k_, "proc/sys/kernel/osrelease").value_or("");
  auto dep = k_.read(hostPath("lib/modules", release, "modules.dep"), kDefaultReadCap);
  return dep && dep->find("/" + normalizeModuleName(module) + ".ko:") != std::string::npos;
}

}  // namespace hostprep::test
