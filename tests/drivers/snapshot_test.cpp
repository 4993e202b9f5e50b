#include "drivers/snapshot.hpp"

#include <catch2/catch.hpp>

#include "drivers/selection.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

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
    } else {
      REQUIRE(k.writeAttr(path, value));
    }
    auto full = readSnapshot(k);
    auto refreshed = refreshSnapshot(k, *before, {audio});
    REQUIRE(full);
    REQUIRE(refreshed);
    CHECK(*refreshed == *full);
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
  SECTION("a function the snapshot does not know makes it a full read") {
    Snapshot partial = *before;
    std::erase_if(partial.pci,
                  [&](const PciFunction& f) { return f.bdf == gpu; });  // not there before
    auto refreshed = refreshSnapshot(k, partial, {gpu});
    REQUIRE(refreshed);
    CHECK(*refreshed == *readSnapshot(k));
  }
}

TEST_CASE("resource: the memory BARs 0-5 with their size and 64-bit flag", "[snapshot]") {
  // An H100 SXM5 as drivers/pci/pci-sysfs.c prints it: a 64-bit BAR takes two slots, the
  // ROM and the SR-IOV BARs follow the six; an I/O BAR (flags 0x101) is not memory.
  const std::string text =
      "0x000000009c000000 0x000000009cffffff 0x0000000000140204\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000220000000000 0x0000221fffffffff 0x000000000014220c\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000222000000000 0x0000222001ffffff 0x000000000014220c\n"
      "0x000000000000e000 0x000000000000e07f 0x0000000000040101\n"
      "0x00000000c0000000 0x00000000c007ffff 0x0000000000046200\n"
      "0x0000230000000000 0x00002307ffffffff 0x000000000014220c\n";
  auto bars = parsePciResource(text);
  REQUIRE(bars.size() == 3);
  CHECK(bars[0] == PciBar{0, 16u << 20, true, false});
  CHECK(bars[1] == PciBar{2, uint64_t{128} << 30, true, true});
  CHECK(bars[2] == PciBar{4, 32u << 20, true, true});
  CHECK(parsePciResource("").empty());
  CHECK(parsePciResource("garbage\n0x10 0x0f 0x200\n").empty());  // end before start
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
