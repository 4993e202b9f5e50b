#include "drivers/model/snapshot.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "drivers/model/selection.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/forwarding_host.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("the snapshot reads a two-A10 host as the kernel lays it out", "[snapshot]") {
  Fixture fx("two-a10");
  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE(s);
  CHECK(s->kernelRelease == "6.1.0-test-amd64");
  CHECK(s->cmdline.value("intel_iommu") == std::optional<std::string>("on"));
  CHECK(s->moduleLoaded("nvidia"));
  CHECK_FALSE(s->moduleLoaded("vfio_pci"));
  CHECK(s->pciDrivers.count("snd_hda_intel"));
  REQUIRE(s->pci.size() == 8);
  const auto* gpu = s->find(*parseBdf("0000:3b:00.0"));
  REQUIRE(gpu);
  CHECK(gpu->id == PciId{0x10de, 0x2236});
  CHECK(gpu->subsystem == PciId{0x10de, 0x1482});
  CHECK(gpu->classCode == 0x030200);
  CHECK(gpu->driver == std::optional<std::string>("nvidia"));
  CHECK_FALSE(gpu->driverOverride);
  CHECK(gpu->iommuGroup == std::optional<int>(30));
  CHECK(gpu->numaNode == std::optional<int>(0));
  CHECK(gpu->bootVga == std::optional<bool>(false));
  CHECK_FALSE(gpu->sriovTotalVfs);  // absent is a state: no SR-IOV
  CHECK(gpu->consumers == std::vector<Bdf>{*parseBdf("0000:3b:00.1")});
  CHECK(gpu->modalias == "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i00");
  CHECK(s->iommuGroups.at(30).size() == 2);
  CHECK(s->rootDiskPci == parseBdf("0000:5e:00.0"));
}

TEST_CASE("absent files are states, not errors", "[snapshot]") {
  Fixture fx("no-iommu");
  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE(s);
  CHECK(s->iommuGroups.empty());
  CHECK_FALSE(s->find(*parseBdf("0000:3b:00.0"))->iommuGroup);
  CHECK_FALSE(s->rootDiskPci);
}

TEST_CASE("a root without sys/bus/pci is an error that names the root", "[snapshot]") {
  Fixture fx;
  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().describe(), Catch::Contains(fx.root().string() + "/sys/bus/pci/devices"));
  CHECK_THAT(s.error().describe(), Catch::Contains("--root must point at one"));
}

TEST_CASE("oversized sysfs files are capped, not trusted", "[snapshot]") {
  Fixture fx;
  fx.write("big", std::string(5000, 'x'));
  RootHost host(fx.root());
  auto r = host.read("big", 4096);
  REQUIRE_FALSE(r);
  CHECK(r.error().err == EFBIG);
  CHECK(host.read("big", 8192)->size() == 5000);
}

TEST_CASE("refreshing the functions a rebind named gives the snapshot a full read gives",
          "[snapshot]") {
  Fixture fx("two-a10");
  hostprep::test::FakeKernel k(fx.root());
  const Bdf gpu = *parseBdf("0000:3b:00.0"), audio = *parseBdf("0000:3b:00.1");
  auto before = readSnapshot(k);
  REQUIRE(before);
  // Each step as another process would make it; the agent hears the device's own events.
  const std::vector<std::pair<std::string, std::string>> steps = {
      {"sys/bus/pci/devices/0000:3b:00.1/driver_override", "vfio-pci"},
      {"sys/bus/pci/drivers/snd_hda_intel/unbind", "0000:3b:00.1"},
      {"sys/module/vfio_pci", ""},  // modprobe vfio-pci: a module and a driver appear
      {"sys/bus/pci/drivers_probe", "0000:3b:00.1"},
  };
  for (const auto& [path, value] : steps) {
    INFO(path);
    if (value.empty()) {
      REQUIRE(k.loadModule("vfio_pci"));
      // The module's own event makes the agent read all; a refresh of a function on a driver
      // it knew keeps the modules it knew.
      auto kept = refreshSnapshot(k, *before, {gpu});
      REQUIRE(kept);
      CHECK_FALSE(kept->moduleLoaded("vfio_pci"));
      CHECK_FALSE(kept->pciDrivers.count("vfio-pci"));
      // vfio-pci's driver_register() took the function its override names, before the module's
      // event: a driver the snapshot did not know, so that refresh reads them again.
      auto refreshed = refreshSnapshot(k, *before, {audio});
      REQUIRE(refreshed);
      CHECK(refreshed->find(audio)->driver == std::optional<std::string>("vfio-pci"));
      CHECK(*refreshed == *readSnapshot(k));
      before = readSnapshot(k);
      REQUIRE(before);
      continue;
    }
    REQUIRE(k.writeAttr(path, value));
    auto full = readSnapshot(k);
    auto refreshed = refreshSnapshot(k, *before, {audio});
    auto rebound = refreshSnapshot(k, *before, {audio}, {audio});  // its binding read again
    REQUIRE(full);
    REQUIRE(refreshed);
    REQUIRE(rebound);
    CHECK(*refreshed == *full);
    CHECK(*rebound == *full);
    before = std::move(full);
  }
  CHECK(before->find(audio)->driver == std::optional<std::string>("vfio-pci"));
  CHECK(before->moduleLoaded("vfio_pci"));

  SECTION("only the named functions are read again") {
    // An override written without an event (sysfs sends none) stays unseen until a read of all.
    REQUIRE(k.writeAttr("sys/bus/pci/devices/0000:3b:00.0/driver_override", "vfio-pci"));
    auto refreshed = refreshSnapshot(k, *before, {audio});
    REQUIRE(refreshed);
    CHECK_FALSE(refreshed->find(gpu)->driverOverride);
    CHECK(readSnapshot(k)->find(gpu)->driverOverride == std::optional<std::string>("vfio-pci"));
  }
  SECTION("a rebound function has its binding read again, not its identity") {
    // vendor, modalias and numa_node as no kernel would change them: only a read of all sees it.
    fx.write("sys/bus/pci/devices/0000:3b:00.1/numa_node", "1\n");
    fx.write("sys/bus/pci/devices/0000:3b:00.1/modalias",
             "pci:v0000ABCDd00001234sv0sd0bc04sc03i00\n");
    REQUIRE(k.writeAttr("sys/bus/pci/devices/0000:3b:00.1/driver_override", "\n"));
    REQUIRE(k.writeAttr("sys/bus/pci/drivers/vfio-pci/unbind", "0000:3b:00.1"));
    auto rebound = refreshSnapshot(k, *before, {audio}, {audio});
    REQUIRE(rebound);
    const PciFunction* f = rebound->find(audio);
    CHECK_FALSE(f->driver);
    CHECK_FALSE(f->driverOverride);
    CHECK_FALSE(f->vfioDevice);
    CHECK(f->numaNode == before->find(audio)->numaNode);
    CHECK(f->modalias == before->find(audio)->modalias);
    auto whole = refreshSnapshot(k, *before, {audio});
    REQUIRE(whole);
    CHECK(whole->find(audio)->numaNode == std::optional<int>(1));
    CHECK(*whole == *readSnapshot(k));
  }
  SECTION("a rebound function that is gone makes it a full read") {
    PciFunction ghost = *before->find(audio);
    ghost.bdf = *parseBdf("0000:3b:00.7");
    CHECK_FALSE(readBindingOf(k, ghost));
    Snapshot withGhost = *before;
    withGhost.pci.push_back(ghost);
    std::sort(withGhost.pci.begin(), withGhost.pci.end(),
              [](const PciFunction& x, const PciFunction& y) { return x.bdf < y.bdf; });
    auto refreshed = refreshSnapshot(k, withGhost, {ghost.bdf}, {ghost.bdf});
    REQUIRE(refreshed);
    CHECK(*refreshed == *readSnapshot(k));
  }
  SECTION("a function the snapshot does not know makes it a full read") {
    Snapshot partial = *before;
    std::erase_if(partial.pci,
                  [&](const PciFunction& f) { return f.bdf == gpu; });  // not there before
    auto refreshed = refreshSnapshot(k, partial, {gpu});
    REQUIRE(refreshed);
    CHECK(*refreshed == *readSnapshot(k));
  }
}

TEST_CASE(
    "refreshing a function bound to a driver the snapshot does not know reads the modules and "
    "drivers again",
    "[snapshot]") {
  // A module's add event comes after its init (kernel/module/main.c, do_init_module), and its
  // init is where driver_register() binds the devices it matches: the bind events come first,
  // and an agent that hears them alone must not judge the new driver by the modules it knew.
  Fixture fx("operator-passthrough");
  hostprep::test::FakeKernel k(fx.root());
  const Bdf gpu = *parseBdf("0000:3b:00.0");
  REQUIRE(k.writeAttr("sys/bus/pci/devices/0000:3b:00.0/driver_override", "\n"));
  REQUIRE(k.writeAttr("sys/bus/pci/drivers/vfio-pci/unbind", "0000:3b:00.0"));
  auto before = readSnapshot(k);
  REQUIRE(before);
  REQUIRE_FALSE(before->find(gpu)->driver);
  REQUIRE(k.insmod("nvidia"));  // the GPU operator's driver container
  for (const bool rebound : {true, false}) {
    auto refreshed =
        rebound ? refreshSnapshot(k, *before, {gpu}, {gpu}) : refreshSnapshot(k, *before, {gpu});
    REQUIRE(refreshed);
    CHECK(refreshed->find(gpu)->driver == std::optional<std::string>("nvidia"));
    CHECK(refreshed->moduleLoaded("nvidia"));
    CHECK(refreshed->pciDrivers.count("nvidia-nvswitch"));
    CHECK(*refreshed == *readSnapshot(k));
  }
}

TEST_CASE("the snapshot reads the BARs of a function that lists a resource file", "[snapshot]") {
  Fixture fx("hgx-h100");
  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE(s);
  const auto* gpu = s->find(*parseBdf("0000:18:00.0"));
  REQUIRE(gpu);
  REQUIRE(gpu->bars.size() == 3);
  CHECK(gpu->bars[1].size == uint64_t{128} << 30);
  // The fixture writes no resource file for the NVSwitches: nothing read, nothing made up.
  const auto* sw = s->find(*parseBdf("0000:c7:00.0"));
  REQUIRE(sw);
  CHECK(sw->bars.empty());
  CHECK(isNvSwitch(*sw));
  CHECK_FALSE(isNvSwitch(*gpu));
}

namespace {

auto mayBeGpu() {
  return [](const PciFunction& f) { return maySelect(f, SelectionOptions{}); };
}

// Every function the scoped read must read whole: the candidates, their groups' members and
// their consumers (what selectDevices reaches), taken from a full read.
std::set<Bdf> reachedFrom(const Snapshot& full) {
  std::set<Bdf> out;
  for (const auto& f : full.pci) {
    if (!maySelect(f, {})) continue;
    out.insert(f.bdf);
    if (f.iommuGroup) {
      for (const auto* m : full.groupMembers(*f.iommuGroup)) out.insert(m->bdf);
    }
    out.insert(f.consumers.begin(), f.consumers.end());
  }
  return out;
}

// A scoped read against a full one: reached functions whole, the others light, groups listed
// only where reached, everything host-wide alike.
size_t compareScoped(const Snapshot& scoped, const Snapshot& full) {
  const std::set<Bdf> reached = reachedFrom(full);
  std::set<int> groups;
  for (const auto& b : reached) {
    if (auto g = full.find(b)->iommuGroup) groups.insert(*g);
  }
  REQUIRE(scoped.pci.size() == full.pci.size());
  size_t light = 0;
  for (const auto& f : full.pci) {
    INFO(f.bdf.str());
    const auto* s = scoped.find(f.bdf);
    REQUIRE(s);
    if (reached.count(f.bdf)) {
      CHECK(*s == f);
      continue;
    }
    ++light;
    PciFunction expect;  // only the light attributes
    expect.bdf = f.bdf;
    expect.id = f.id;
    expect.classCode = f.classCode;
    expect.driver = f.driver;
    expect.physfn = f.physfn;
    CHECK(*s == expect);
  }
  CHECK(scoped.iommuGroups.size() == full.iommuGroups.size());
  for (const auto& [g, members] : full.iommuGroups) {
    INFO("group " << g);
    REQUIRE(scoped.iommuGroups.count(g));
    CHECK(scoped.iommuGroups.at(g) == (groups.count(g) ? members : std::vector<Bdf>{}));
  }
  CHECK(scoped.rootDiskPci == full.rootDiskPci);
  CHECK(scoped.kernelRelease == full.kernelRelease);
  CHECK(scoped.cmdline == full.cmdline);
  CHECK(scoped.loadedModules == full.loadedModules);
  CHECK(scoped.pciDrivers == full.pciDrivers);
  CHECK(scoped.iommufd == full.iommufd);
  return light;
}

}  // namespace

TEST_CASE("a function's ids and class come from its modalias, one file instead of five",
          "[snapshot]") {
  // The kernel prints the same pci_dev fields in modalias as in vendor, device, class and
  // subsystem_*: with those five files gone, whole and light reads still know the GPU.
  Fixture fx("two-a10");
  const std::string gpu = "sys/bus/pci/devices/0000:3b:00.0/";
  for (const char* name : {"vendor", "device", "class", "subsystem_vendor", "subsystem_device"})
    std::filesystem::remove(fx.path(gpu + name));
  RootHost host(fx.root());
  auto whole = readSnapshot(host);
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(whole);
  REQUIRE(scoped);
  for (const Snapshot* s : {&*whole, &*scoped}) {
    const auto* g = s->find(*parseBdf("0000:3b:00.0"));
    REQUIRE(g);
    CHECK(g->id == PciId{0x10de, 0x2236});
    CHECK(g->subsystem == PciId{0x10de, 0x1482});
    CHECK(g->classCode == 0x030200);
  }
  // A modalias that does not parse: the five files say it.
  Fixture fy("two-a10");
  fy.write(gpu + "modalias", "pci:v*d*sv*sd*bc*sc*i*\n");
  fy.write(gpu + "device", "0x2237\n");
  fy.write(gpu + "subsystem_device", "0x1483\n");
  RootHost hostY(fy.root());
  for (const auto& s : {readSnapshot(hostY), readSnapshot(hostY, mayBeGpu())}) {
    REQUIRE(s);
    const auto* g = s->find(*parseBdf("0000:3b:00.0"));
    REQUIRE(g);
    CHECK(g->id == PciId{0x10de, 0x2237});
    CHECK(g->subsystem == PciId{0x10de, 0x1483});
    CHECK(g->classCode == 0x030200);
  }
}

namespace {

// A host that counts the reads of each path and passes everything to the real one under it.
class CountingHost final : public test::ForwardingHost {
 public:
  using ForwardingHost::ForwardingHost;
  Result<std::string> read(std::string_view p, size_t cap) const override {
    ++reads[std::string(p)];
    return ForwardingHost::read(p, cap);
  }
  Result<std::string> readAttr(std::string_view p, std::chrono::milliseconds t) const override {
    ++reads[std::string(p)];
    return ForwardingHost::readAttr(p, t);
  }

  mutable std::map<std::string, int> reads;
};

}  // namespace

TEST_CASE("a scoped snapshot reads each function's modalias once", "[snapshot]") {
  // The light read of every function opens its modalias; the whole read of a GPU and of its
  // audio companion after it takes the text from there. Whole functions keep it (the VFIO
  // variant driver is looked up by it), light ones carry only the light attributes.
  Fixture fx("two-a10");
  RootHost real(fx.root());
  CountingHost host(real);
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(scoped);
  auto full = readSnapshot(real);
  REQUIRE(full);
  int modaliases = 0;
  for (const auto& [path, n] : host.reads) {
    if (!path.ends_with("/modalias")) continue;
    INFO(path);
    CHECK(n == 1);
    ++modaliases;
  }
  CHECK(modaliases == static_cast<int>(full->pci.size()));
  for (const char* bdf : {"0000:3b:00.0", "0000:3b:00.1", "0000:86:00.0", "0000:86:00.1"}) {
    INFO(bdf);
    const auto* f = scoped->find(*parseBdf(bdf));
    REQUIRE(f);
    CHECK(*f == *full->find(*parseBdf(bdf)));
    CHECK_FALSE(f->modalias.empty());
  }
  size_t light = 0;
  for (const auto& f : scoped->pci) {
    if (f.iommuGroup) continue;  // read whole
    INFO(f.bdf.str());
    CHECK(f.modalias.empty());
    ++light;
  }
  CHECK(light > 0);
}

TEST_CASE("a scoped snapshot reads whole only what a selection can reach", "[snapshot]") {
  // The GPU shares its group with a bridge, its audio function and the root disk's NVMe.
  Fixture fx("nvme-shared-group");
  RootHost host(fx.root());
  auto full = readSnapshot(host);
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(full);
  REQUIRE(scoped);
  compareScoped(*scoped, *full);
  auto a = selectDevices(*full, {}), b = selectDevices(*scoped, {});
  REQUIRE(a);
  REQUIRE(b);
  CHECK(b->targets.size() == a->targets.size());
  REQUIRE(b->problems.size() == 1);
  CHECK(b->problems[0].describe(*scoped) == a->problems[0].describe(*full));
}

TEST_CASE("a scoped snapshot reads SR-IOV VFs light and their GPU whole", "[snapshot]") {
  // An A10 with 4 VFs enabled, each VF in its own group, and a BMC's VGA.
  std::string yaml =
      "kernel: 6.1.0-test-amd64\n"
      "devices:\n"
      "  - {bdf: \"0000:02:00.0\", id: \"1a03:2000\", class: \"030000\", driver: ast, group: 2}\n"
      "  - {bdf: \"0000:80:00.0\", id: \"10de:2236\", class: \"030200\", driver: nvidia, "
      "group: 10, sriov: {total: 4, num: 4, offset: 1, stride: 1}}\n";
  for (int v = 0; v < 4; ++v) {
    yaml += "  - {bdf: \"0000:80:00." + std::to_string(v + 1) +
            "\", id: \"10de:2236\", class: \"030200\", group: " + std::to_string(11 + v) +
            ", physfn: \"0000:80:00.0\", vf_index: " + std::to_string(v) + "}\n";
  }
  Fixture fx(Fixture::HostYaml{yaml});
  RootHost host(fx.root());
  auto full = readSnapshot(host);
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(full);
  REQUIRE(scoped);
  size_t vfs = 0;
  for (const auto& f : full->pci) vfs += f.isVf() ? 1 : 0;
  CHECK(vfs == 4);
  CHECK(compareScoped(*scoped, *full) == 5);  // the 4 VFs and the VGA, light
  CHECK(scoped->find(*parseBdf("0000:80:00.0"))->virtfns.size() == 4);
}

TEST_CASE("a scoped snapshot that picks VFs reads their override and group too", "[snapshot]") {
  // prepare's read picks every VF (readPlanSnapshot): a plan moves VFs and puts them back on their
  // driver and override, and a VM's VF is known by its group. A VF known from its PF's virtfn
  // links gets those read too, not only its driver. One VF was handed to vfio-pci by hand.
  std::string yaml =
      "kernel: 6.1.0-test-amd64\n"
      "devices:\n"
      "  - {bdf: \"0000:80:00.0\", id: \"10de:2236\", class: \"030200\", driver: nvidia, "
      "group: 10, sriov: {total: 2, num: 2, offset: 1, stride: 1}}\n"
      "  - {bdf: \"0000:80:00.1\", id: \"10de:2236\", class: \"030200\", driver: nvidia, "
      "group: 11, physfn: \"0000:80:00.0\", vf_index: 0}\n"
      "  - {bdf: \"0000:80:00.2\", id: \"10de:2236\", class: \"030200\", driver: vfio-pci, "
      "driver_override: vfio-pci, group: 12, physfn: \"0000:80:00.0\", vf_index: 1}\n";
  Fixture fx(Fixture::HostYaml{yaml});
  RootHost host(fx.root());
  auto full = readSnapshot(host);
  auto scoped = readPlanSnapshot(host, {});
  REQUIRE(full);
  REQUIRE(scoped);
  REQUIRE(scoped->pci.size() == full->pci.size());
  CHECK(*scoped->find(*parseBdf("0000:80:00.0")) == *full->find(*parseBdf("0000:80:00.0")));
  for (const char* b : {"0000:80:00.1", "0000:80:00.2"}) {
    INFO(b);
    const PciFunction& f = *full->find(*parseBdf(b));
    PciFunction expect;  // the light attributes, and the binding and group a plan needs
    expect.bdf = f.bdf;
    expect.id = f.id;
    expect.classCode = f.classCode;
    expect.physfn = f.physfn;
    expect.driver = f.driver;
    expect.driverOverride = f.driverOverride;
    expect.iommuGroup = f.iommuGroup;
    CHECK(*scoped->find(f.bdf) == expect);
  }
  CHECK(scoped->find(*parseBdf("0000:80:00.2"))->driverOverride ==
        std::optional<std::string>("vfio-pci"));
  CHECK(scoped->find(*parseBdf("0000:80:00.2"))->iommuGroup == std::optional<int>(12));
}

TEST_CASE("a scoped snapshot takes a PF's VFs from its virtfn links and opens only the first",
          "[snapshot]") {
  // An A10 with 4 VFs; the first VF's class differs from the PF's (the kernel reads the VFs'
  // class from the first VF). The files of VFs 2-4 are removed: only their driver link is read.
  std::string yaml =
      "kernel: 6.1.0-test-amd64\n"
      "devices:\n"
      "  - {bdf: \"0000:80:00.0\", id: \"10de:2236\", class: \"030200\", driver: nvidia, "
      "group: 10, sriov: {total: 4, num: 4, offset: 1, stride: 1}}\n";
  for (int v = 0; v < 4; ++v) {
    yaml += "  - {bdf: \"0000:80:00." + std::to_string(v + 1) +
            "\", id: \"10de:" + (v == 0 ? "2237" : "ffff") + "\", class: \"" +
            (v == 0 ? "030000" : "ff0000") + "\", group: " + std::to_string(11 + v) +
            ", physfn: \"0000:80:00.0\", vf_index: " + std::to_string(v) + "}\n";
  }
  Fixture fx(Fixture::HostYaml{yaml});
  for (int v = 2; v <= 4; ++v) {
    const std::string dir = "sys/bus/pci/devices/0000:80:00." + std::to_string(v) + "/";
    for (const char* name : {"vendor", "device", "class", "physfn"})
      std::filesystem::remove(fx.path(dir + name));
  }
  std::filesystem::create_directory_symlink("../../../bus/pci/drivers/vfio-pci",
                                            fx.path("sys/bus/pci/devices/0000:80:00.3/driver"));
  RootHost host(fx.root());
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(scoped);
  REQUIRE(scoped->pci.size() == 5);
  for (int v = 1; v <= 4; ++v) {
    const Bdf vf = *parseBdf("0000:80:00." + std::to_string(v));
    INFO(vf.str());
    const auto* f = scoped->find(vf);
    REQUIRE(f);
    PciFunction expect;
    expect.bdf = vf;
    expect.id = {0x10de, 0x2237};
    expect.classCode = 0x030000;
    expect.physfn = *parseBdf("0000:80:00.0");
    if (v == 3) expect.driver = "vfio-pci";
    CHECK(*f == expect);
  }
}

TEST_CASE("a scoped snapshot falls back to a full read when a reached group is not listed",
          "[snapshot]") {
  Fixture fx("two-a10");
  RootHost host(fx.root());
  SECTION("the group is not there") {
    std::filesystem::remove_all(fx.path("sys/kernel/iommu_groups/30"));
  }
  SECTION("the group lists no device") {
    std::filesystem::remove_all(fx.path("sys/kernel/iommu_groups/30/devices"));
    std::filesystem::create_directories(fx.path("sys/kernel/iommu_groups/30/devices"));
  }
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(scoped);
  CHECK(*scoped == *readSnapshot(host));
}

namespace {

// A PF at 80:00.0 with 20 VFs at First VF Offset 4, VF Stride 2 (VF n at routing ID
// 0x8000 + 4 + 2n): 80:00.4, 80:00.6, 80:01.0, ... 80:05.2. VFs 7 and 15 are on vfio-pci. The PF
// is an A10 (a candidate: read whole), or with `nic` an Intel NIC (read light, as its VFs).
std::vector<Bdf> twentyVfs(std::string& yaml, bool nic = false) {
  const std::string id = nic ? "8086:1572" : "10de:2236";
  const std::string vfId = nic ? "8086:154c" : "10de:2237";
  const std::string cls = nic ? "020000" : "030200";
  yaml =
      "kernel: 6.1.0-test-amd64\n"
      "devices:\n"
      "  - {bdf: \"0000:80:00.0\", id: \"" +
      id + "\", class: \"" + cls + "\", driver: " + (nic ? "i40e" : "nvidia") +
      ", group: 10, sriov: {total: 32, num: 20, offset: 4, stride: 2}}\n";
  std::vector<Bdf> vfs;
  for (int n = 0; n < 20; ++n) {
    const int rid = 0x8000 + 4 + 2 * n;
    Bdf b{0, static_cast<uint8_t>(rid >> 8), static_cast<uint8_t>((rid >> 3) & 0x1f),
          static_cast<uint8_t>(rid & 7)};
    vfs.push_back(b);
    yaml += "  - {bdf: \"" + b.str() + "\", id: \"" + vfId + "\", class: \"" + cls +
            "\", group: " + std::to_string(11 + n) +
            ", physfn: \"0000:80:00.0\", vf_index: " + std::to_string(n) +
            (n == 7 || n == 15 ? ", driver: vfio-pci" : "") + "}\n";
  }
  return vfs;
}

}  // namespace

TEST_CASE("a PF's VFs come from its SR-IOV offset and stride, checked against its links",
          "[snapshot]") {
  std::string yaml;
  const bool nic = GENERATE(false, true);
  INFO((nic ? "a NIC's VFs" : "a GPU's VFs"));
  const std::vector<Bdf> vfs = twentyVfs(yaml, nic);
  CHECK(vfs.front().str() == "0000:80:00.4");
  CHECK(vfs.back().str() == "0000:80:05.2");
  Fixture fx(Fixture::HostYaml{yaml});
  const std::string pf = "sys/bus/pci/devices/0000:80:00.0/";
  std::vector<Bdf> expect = vfs;
  SECTION("offset, stride and links agree") {}
  SECTION("sriov_stride disagrees with the links: every link is read") {
    std::ofstream(fx.path(pf + "sriov_stride")) << "1\n";
  }
  SECTION("sriov_offset is missing: every link is read") {
    std::filesystem::remove(fx.path(pf + "sriov_offset"));
  }
  SECTION("a link in the middle is gone (VFs going away): the others are read") {
    std::filesystem::remove(fx.path(pf + "virtfn5"));
    expect.erase(expect.begin() + 5);
  }
  RootHost host(fx.root());
  auto full = readSnapshot(host);
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(full);
  REQUIRE(scoped);
  std::sort(expect.begin(), expect.end());
  CHECK(full->find(vfs[0])->physfn);
  CHECK(full->find(*parseBdf("0000:80:00.0"))->virtfns == expect);
  // A candidate PF is read whole and lists its VFs; a NIC is read light, and its VFs (read light
  // from the list) name it as their PF.
  if (!nic) CHECK(scoped->find(*parseBdf("0000:80:00.0"))->virtfns == expect);
  for (const auto& vf : expect) {
    INFO(vf.str());
    REQUIRE(scoped->find(vf));
    CHECK(scoped->find(vf)->physfn == parseBdf("0000:80:00.0"));
  }
  CHECK(scoped->pci.size() == full->pci.size());
}

TEST_CASE("a PF with many VFs reads their drivers from the drivers' directories", "[snapshot]") {
  std::string yaml;
  const bool nic = GENERATE(false, true);
  INFO((nic ? "a NIC's VFs" : "a GPU's VFs"));
  const std::vector<Bdf> vfs = twentyVfs(yaml, nic);
  Fixture fx(Fixture::HostYaml{yaml});
  RootHost host(fx.root());
  auto full = readSnapshot(host);
  auto scoped = readSnapshot(host, mayBeGpu());
  REQUIRE(full);
  REQUIRE(scoped);
  CHECK(compareScoped(*scoped, *full) == (nic ? 21 : 20));  // the VFs light, with their drivers
  for (size_t n = 0; n < vfs.size(); ++n) {
    INFO("VF " << n);
    const auto* f = scoped->find(vfs[n]);
    REQUIRE(f);
    CHECK(f->driver == (n == 7 || n == 15 ? std::optional<std::string>("vfio-pci") : std::nullopt));
  }
}

namespace {

// A host whose unordered listings come back sorted, or sorted backwards (a PF's VFs before it,
// the highest group first): what a kernel's getdents order may be, at its least convenient.
class OrderedListings : public hostprep::test::ForwardingHost {
 public:
  OrderedListings(Host& inner, bool backwards) : ForwardingHost(inner), backwards_(backwards) {}
  Result<std::vector<std::string>> listUnordered(std::string_view d) const override {
    auto names = list(d);
    if (names && backwards_) std::reverse(names->begin(), names->end());
    return names;
  }

 private:
  bool backwards_;
};

}  // namespace

TEST_CASE("the snapshot is the same whatever order the kernel lists a directory in", "[snapshot]") {
  std::string yaml;
  const bool nic = GENERATE(false, true);
  INFO((nic ? "a NIC's VFs" : "a GPU's VFs"));
  const std::vector<Bdf> vfs = twentyVfs(yaml, nic);
  // Device links from the PF to three of its VFs: consumer:pci:<bdf> entries of its directory.
  const std::string pf = "group: 10, ";
  REQUIRE(yaml.find(pf) != std::string::npos);
  yaml.insert(yaml.find(pf) + pf.size(), "consumers: [\"" + vfs[3].str() + "\", \"" + vfs[0].str() +
                                             "\", \"" + vfs[9].str() + "\"], ");
  Fixture fx(Fixture::HostYaml{yaml});
  RootHost root(fx.root());
  OrderedListings sorted(root, false), backwards(root, true);
  for (const bool scoped : {false, true}) {
    INFO((scoped ? "scoped" : "full"));
    auto read = [&](const Host& h) {
      return scoped ? readSnapshot(h, mayBeGpu()) : readSnapshot(h);
    };
    auto a = read(sorted), b = read(backwards), c = read(root);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(c);
    CHECK(a->pci.size() == 21);  // the PF and its 20 VFs, each in a group of its own
    if (!nic || !scoped) {       // a NIC is read light in a scoped snapshot: no consumers
      CHECK(a->find(*parseBdf("0000:80:00.0"))->consumers ==
            std::vector<Bdf>{vfs[0], vfs[3], vfs[9]});
    }
    CHECK(*b == *a);
    CHECK(*c == *a);
  }
}
