#include "tests/support/fixture.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "drivers/common/parsers.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/common/text.hpp"
#include "tests/support/fake_kernel.hpp"

namespace fs = std::filesystem;

namespace hostprep::test {
namespace {

void writeFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("fixture: cannot write " + p.string());
}

void makeLink(const fs::path& link, const std::string& target) {
  fs::create_directories(link.parent_path());
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_directory_symlink(target, link);
}

std::string hex(unsigned v, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", width, v);
  return buf;
}

std::string modalias(const PciId& id, const PciId& sub, uint32_t cls) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", id.vendor,
                id.device, sub.vendor, sub.device, (cls >> 16) & 0xff, (cls >> 8) & 0xff,
                cls & 0xff);
  return buf;
}

Bdf bdfOf(const YAML::Node& n) {
  auto b = parseBdf(n.as<std::string>());
  if (!b) throw std::runtime_error("fixture: bad bdf " + n.as<std::string>());
  return *b;
}

// A PCI function's directory: devices hang off one fake root complex.
std::string devDir(const Bdf& b) {
  return "sys/devices/pci" + b.str().substr(0, 7) + "/" + b.str();
}

void addDevice(const fs::path& root, const YAML::Node& d) {
  const Bdf b = bdfOf(d["bdf"]);
  auto id = parsePciId(d["id"].as<std::string>());
  if (!id) throw std::runtime_error("fixture: bad id for " + b.str());
  PciId sub = id.value();
  if (d["subsystem"]) sub = parsePciId(d["subsystem"].as<std::string>()).value_or(sub);
  auto cls = static_cast<uint32_t>(std::stoul(d["class"].as<std::string>(), nullptr, 16));
  const fs::path dir = root / devDir(b);
  writeFile(dir / "vendor", hex(id->vendor, 4) + "\n");
  writeFile(dir / "device", hex(id->device, 4) + "\n");
  writeFile(dir / "subsystem_vendor", hex(sub.vendor, 4) + "\n");
  writeFile(dir / "subsystem_device", hex(sub.device, 4) + "\n");
  writeFile(dir / "class", hex(cls, 6) + "\n");
  writeFile(dir / "modalias", modalias(*id, sub, cls) + "\n");
  writeFile(dir / "numa_node", std::to_string(d["numa"].as<int>(-1)) + "\n");
  writeFile(dir / "driver_override",
            d["driver_override"] ? d["driver_override"].as<std::string>() + "\n" : "(null)\n");
  if (baseClass(cls) == 0x03)
    writeFile(dir / "boot_vga", std::to_string(d["boot_vga"].as<int>(0)) + "\n");
  // Config space: the vendor and device ids little-endian, or all ones for a device that no
  // longer answers (responsive: false); what brings it back (recovers_by: function, bus,
  // rescan or never) is the fake kernel's (fake/recover/).
  const bool answers = d["responsive"].as<bool>(true);
  writeFile(dir / "config", answers ? configBytes(*id) : std::string(64, '\xff'));
  if (d["recovers_by"])
    writeFile(root / "fake/recover" / b.str(), d["recovers_by"].as<std::string>() + "\n");
  if (d["power_state"]) writeFile(dir / "power_state", d["power_state"].as<std::string>() + "\n");
  if (d["d3cold_allowed"])
    writeFile(dir / "d3cold_allowed", std::to_string(d["d3cold_allowed"].as<int>()) + "\n");
  // Reset methods (sysfs-bus-pci): `reset` only while there is one, `reset_method` names them.
  if (d["reset_methods"]) {
    const std::string methods = d["reset_methods"].as<std::string>();
    if (!d["no_reset_method_file"]) writeFile(dir / "reset_method", methods + "\n");
    if (!methods.empty()) writeFile(dir / "reset", "");
  }
  // A bridge: its secondary bus, and reset_subordinate (Linux 6.13, 6.12.5, 6.1.120).
  if (d["secondary_bus"])
    writeFile(dir / "secondary_bus_number", std::to_string(d["secondary_bus"].as<int>()) + "\n");
  if (d["reset_subordinate"].as<bool>(false)) writeFile(dir / "reset_subordinate", "");
  if (d["secondary_bus"]) writeFile(dir / "rescan", "");
  writeFile(dir / "remove", "");
  // What a rescan brings back once the function is removed (the fake kernel reads it).
  writeFile(root / "fake/devices" / (b.str() + ".yaml"), YAML::Dump(d) + "\n");
  makeLink(root / "sys/bus/pci/devices" / b.str(),
           "../../../devices/pci" + b.str().substr(0, 7) + "/" + b.str());
  if (d["group"]) {
    const std::string g = std::to_string(d["group"].as<int>());
    makeLink(dir / "iommu_group", "../../../kernel/iommu_groups/" + g);
    makeLink(root / "sys/kernel/iommu_groups" / g / "devices" / b.str(),
             "../../../../devices/pci" + b.str().substr(0, 7) + "/" + b.str());
  }
  if (d["driver"]) {
    const std::string drv = d["driver"].as<std::string>();
    makeLink(dir / "driver", "../../../bus/pci/drivers/" + drv);
    makeLink(root / "sys/bus/pci/drivers" / drv / b.str(),
             "../../../../devices/pci" + b.str().substr(0, 7) + "/" + b.str());
  }
  if (auto s = d["sriov"]) {
    writeFile(dir / "sriov_totalvfs", std::to_string(s["total"].as<int>()) + "\n");
    writeFile(dir / "sriov_numvfs", std::to_string(s["num"].as<int>(0)) + "\n");
    writeFile(dir / "sriov_drivers_autoprobe", std::to_string(s["autoprobe"].as<int>(1)) + "\n");
    writeFile(dir / "sriov_offset", std::to_string(s["offset"].as<int>(4)) + "\n");
    writeFile(dir / "sriov_stride", std::to_string(s["stride"].as<int>(1)) + "\n");
    // What the fake kernel gives the VFs it creates (fake/ is the fake's own state, not sysfs):
    // their device id, the first of their IOMMU groups, and, once nvidia binds a VF, its vGPU
    // types (mdev, or the per-VF nvidia/ files) with the per-GPU maximum of each.
    const fs::path fake = root / "fake/sriov" / b.str();
    writeFile(fake / "vf_id", s["vf_id"].as<std::string>(d["id"].as<std::string>()) + "\n");
    writeFile(fake / "group_base", std::to_string(s["vf_group_base"].as<int>(1000)) + "\n");
    for (const auto& t : s["vf_mdev_types"]) {
      const std::string tid = t["id"].as<std::string>();
      writeFile(fake / "vf/mdev_supported_types" / tid / "name",
                t["name"].as<std::string>() + "\n");
      writeFile(root / "fake/vgpu" / b.str() / "max" / tid,
                std::to_string(t["max"].as<int>(1)) + "\n");
    }
    if (s["vf_vgpu_types"]) {
      std::string lines;
      for (const auto& t : s["vf_vgpu_types"]) {
        const std::string tid = t["id"].as<std::string>();
        lines += tid + " : " + t["name"].as<std::string>() + "\n";
        writeFile(root / "fake/vgpu" / b.str() / "max" / tid,
                  std::to_string(t["max"].as<int>(1)) + "\n");
      }
      writeFile(fake / "vf/nvidia/types", lines);
    }
  }
  if (d["unbind_lock"]) {
    // ok: the driver grants the lock; refuse: a client holds the GPU, the lock reads 0.
    writeFile(root / "fake/unbindlock" / b.str(), d["unbind_lock"].as<std::string>() + "\n");
    if (d["driver"] && d["driver"].as<std::string>() == "nvidia") {
      writeFile(root / "proc/driver/nvidia/gpus" / b.str() / "unbindLock", "0\n");
    }
  }
  if (d["physfn"]) {
    const Bdf pf = bdfOf(d["physfn"]);
    makeLink(dir / "physfn", "../" + pf.str());
    int index = d["vf_index"].as<int>(0);
    makeLink(root / devDir(pf) / ("virtfn" + std::to_string(index)), "../" + b.str());
  }
  for (const auto& c : d["consumers"]) {
    const Bdf cb = bdfOf(c);
    makeLink(dir / ("consumer:pci:" + cb.str()),
             "../../virtual/devlink/pci:" + b.str() + "--pci:" + cb.str());
  }
  for (const auto& t : d["mdev_types"]) {
    const fs::path td = dir / "mdev_supported_types" / t["id"].as<std::string>();
    writeFile(td / "name", t["name"].as<std::string>() + "\n");
    writeFile(td / "available_instances", std::to_string(t["available"].as<int>(1)) + "\n");
    writeFile(td / "device_api", "vfio-pci\n");
    writeFile(td / "create", "");
    fs::create_directories(td / "devices");
    writeFile(root / "fake/vgpu" / b.str() / "max" / t["id"].as<std::string>(),
              std::to_string(t["max"].as<int>(t["available"].as<int>(1))) + "\n");
    makeLink(root / "sys/class/mdev_bus" / b.str(),
             "../../devices/pci" + b.str().substr(0, 7) + "/" + b.str());
  }
}

}  // namespace

std::string configBytes(const PciId& id) {
  std::string c(64, '\0');
  c[0] = static_cast<char>(id.vendor & 0xff);
  c[1] = static_cast<char>(id.vendor >> 8);
  c[2] = static_cast<char>(id.device & 0xff);
  c[3] = static_cast<char>(id.device >> 8);
  return c;
}

void addFixtureDevice(const fs::path& root, const std::string& yaml) {
  addDevice(root, YAML::Load(yaml));
}

void expandHostYaml(const fs::path& root, const std::string& yaml) {
  YAML::Node h = YAML::Load(yaml);
  const std::string release = h["kernel"].as<std::string>("6.1.0-test-amd64");
  writeFile(root / "proc/sys/kernel/osrelease", release + "\n");
  if (h["cmdline"]) writeFile(root / "proc/cmdline", h["cmdline"].as<std::string>() + "\n");
  fs::create_directories(root / "sys/bus/pci/devices");
  fs::create_directories(root / "sys/bus/pci/drivers");
  fs::create_directories(root / "sys/kernel/iommu_groups");
  fs::create_directories(root / "dev");
  writeFile(root / "sys/bus/pci/drivers_probe", "");
  writeFile(root / "sys/bus/pci/rescan", "");

  // Modules: loaded ones appear in proc/modules and sys/module; every driver a device is bound
  // to must be loaded, so its directory exists.
  std::string procModules;
  std::set<std::string> loaded;
  for (const auto& m : h["modules"]) loaded.insert(normalizeModuleName(m.as<std::string>()));
  for (const auto& d : h["devices"]) {
    if (d["driver"]) loaded.insert(fakeModuleOfDriver(d["driver"].as<std::string>()));
  }
  std::string dep;
  std::set<std::string> available(loaded);
  for (const auto& m : h["available_modules"])
    available.insert(normalizeModuleName(m.as<std::string>()));
  for (const auto& m : available) dep += "kernel/drivers/" + m + ".ko:\n";
  writeFile(root / "lib/modules" / release / "modules.dep", dep);
  writeFile(root / "lib/modules" / release / "modules.builtin", "");
  if (h["modules_alias"]) {
    writeFile(root / "lib/modules" / release / "modules.alias",
              h["modules_alias"].as<std::string>());
  }
  for (const auto& m : loaded) {
    procModules += m + " 16384 0 - Live 0x0000000000000000\n";
    fs::create_directories(root / "sys/module" / m);
    for (const auto& drv : fakeDriversOfModule(m)) addFakeDriver(root, drv, m);
  }
  writeFile(root / "proc/modules", procModules);

  // IDs given to vfio-pci's new_id (what the fake kernel's vfio-pci then matches, as the real
  // one does its dynamic IDs).
  std::string newIds;
  for (const auto& id : h["vfio_new_ids"]) newIds += id.as<std::string>() + "\n";
  if (!newIds.empty()) writeFile(root / "fake/new_id/vfio-pci", newIds);
  for (const auto& d : h["devices"]) addDevice(root, d);
  // A vfio-bound group has its /dev node, as on a real host.
  for (const auto& d : h["devices"]) {
    if (d["driver"] && d["driver"].as<std::string>() == "vfio-pci" && d["group"]) {
      writeFile(root / "dev/vfio" / std::to_string(d["group"].as<int>()), "");
    }
  }
  for (const auto& p : h["holders"]) {
    const std::string pid = std::to_string(p["pid"].as<int>());
    writeFile(root / "proc" / pid / "comm", p["comm"].as<std::string>() + "\n");
    fs::create_directories(root / "proc" / pid / "fd");
    fs::create_symlink(p["node"].as<std::string>(),
                       root / "proc" / pid / "fd" / std::to_string(p["fd"].as<int>(3)));
  }
  if (h["root_disk"]) {
    const Bdf b = bdfOf(h["root_disk"]);
    writeFile(root / "proc/self/mountinfo",
              "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n");
    makeLink(root / "sys/dev/block/259:2", "../../devices/pci" + b.str().substr(0, 7) + "/" +
                                               b.str() + "/nvme/nvme0/nvme0n1/nvme0n1p2");
  }
}

// Fixture roots live in memory when they can: the sweeps build thousands of them, and on a disk
// each costs ten times as much. HOSTPREP_FIXTURE_DIR overrides; TMPDIR is the fallback.
namespace {
fs::path fixtureParent() {
  for (const char* var : {"HOSTPREP_FIXTURE_DIR", "HOSTPREP_TEST_TMPDIR"}) {
    if (const char* d = std::getenv(var); d && *d) return d;
  }
  if (::access("/dev/shm", W_OK | X_OK) == 0 && std::getenv("TMPDIR") == nullptr) return "/dev/shm";
  return fs::temp_directory_path();
}

}  // namespace

Fixture::Fixture() {
  // On tmpfs when there is one: every run fsyncs its journal and status files, and the fault
  // and crash sweeps make thousands of runs (seconds on tmpfs, minutes on a VM's disk).
  std::string tmpl = (fixtureParent() / "hostprep-fixture-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("fixture: mkdtemp failed");
  root_ = tmpl;
}

Fixture::Fixture(const std::string& scenario) : Fixture() {
  const fs::path src = fs::path(HOSTPREP_FIXTURES_DIR) / scenario;
  if (!fs::is_directory(src)) throw std::runtime_error("fixture: no scenario " + src.string());
  fs::copy(src, root_, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const fs::path yaml = root_ / "host.yaml";
  if (fs::exists(yaml)) {
    std::ifstream f(yaml);
    std::stringstream ss;
    ss << f.rdbuf();
    fs::remove(yaml);
    expandHostYaml(root_, ss.str());
  }
}

Fixture::Fixture(const HostYaml& yaml) : Fixture() { expandHostYaml(root_, yaml.text); }

Fixture::~Fixture() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

void Fixture::write(const std::string& rel, const std::string& text) const {
  writeFile(root_ / rel, text);
}
void Fixture::symlink(const std::string& rel, const std::string& target) const {
  makeLink(root_ / rel, target);
}
ino_t Fixture::inode(const std::string& rel) const {
  struct stat st {};
  if (::stat((root_ / rel).c_str(), &st) != 0) throw std::runtime_error("fixture: no " + rel);
  return st.st_ino;
}

std::map<std::string, std::string> Fixture::deviceState() const {
  std::map<std::string, std::string> out;
  auto readAll = [](const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  for (const auto& e : fs::directory_iterator(root_ / "sys/bus/pci/devices")) {
    const fs::path d = e.path();
    const std::string b = d.filename().string();
    std::error_code ec;
    auto link = fs::read_symlink(d / "driver", ec);
    out[b + "/driver"] = ec ? "-" : link.filename().string();
    out[b + "/driver_override"] = readAll(d / "driver_override");
    if (fs::exists(d / "sriov_numvfs")) out[b + "/sriov_numvfs"] = readAll(d / "sriov_numvfs");
  }
  for (const auto& drv : fs::directory_iterator(root_ / "sys/bus/pci/drivers")) {
    for (const auto& e : fs::directory_iterator(drv.path())) {
      // Its devices' links (not its module link, which a module load adds with the driver).
      if (fs::is_symlink(e.symlink_status()) && e.path().filename() != "module") {
        out["drivers/" + drv.path().filename().string() + "/" + e.path().filename().string()] =
            "link";
      }
    }
  }
  if (fs::exists(root_ / "dev/vfio")) {
    for (const auto& e : fs::directory_iterator(root_ / "dev/vfio")) {
      out["dev/vfio/" + e.path().filename().string()] = "node";
    }
  }
  // SR-IOV and vGPU: VFs show up above as functions; here their vGPU types' state, every mdev
  // device with its type and parent, the mdev parents, the IOMMU groups and the unbindLocks.
  for (const auto& e : fs::directory_iterator(root_ / "sys/bus/pci/devices")) {
    const fs::path d = e.path();
    const std::string b = d.filename().string();
    if (fs::exists(d / "mdev_supported_types")) {
      for (const auto& t : fs::directory_iterator(d / "mdev_supported_types")) {
        out[b + "/mdev/" + t.path().filename().string()] =
            readAll(t.path() / "available_instances");
      }
    }
    for (const char* f : {"creatable_vgpu_types", "current_vgpu_type"}) {
      if (fs::exists(d / "nvidia" / f)) out[b + "/nvidia/" + f] = readAll(d / "nvidia" / f);
    }
    for (const auto& v : fs::directory_iterator(d)) {
      const std::string name = v.path().filename().string();
      if (name.rfind("virtfn", 0) == 0)
        out[b + "/" + name] = fs::read_symlink(v.path()).filename().string();
    }
  }
  if (fs::exists(root_ / "sys/bus/mdev/devices")) {
    for (const auto& e : fs::directory_iterator(root_ / "sys/bus/mdev/devices")) {
      std::error_code ec;
      const fs::path real = fs::canonical(e.path(), ec);
      out["mdev/" + e.path().filename().string()] =
          real.parent_path().filename().string() + " " +
          fs::read_symlink(e.path() / "mdev_type", ec).filename().string();
    }
  }
  for (const char* dir :
       {"sys/class/mdev_bus", "sys/kernel/iommu_groups", "proc/driver/nvidia/gpus"}) {
    if (!fs::exists(root_ / dir)) continue;
    for (const auto& e : fs::directory_iterator(root_ / dir)) {
      const std::string name = e.path().filename().string();
      out[std::string(dir) + "/" + name] =
          fs::exists(e.path() / "unbindLock") ? readAll(e.path() / "unbindLock") : "present";
    }
  }
  return out;
}

}  // namespace hostprep::test
