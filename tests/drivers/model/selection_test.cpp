// Selection (drivers/model/selection.cpp): the GPUs and their companions, group by group;
// NVSwitches go with the GPUs only when asked, and --nvswitch auto follows Fabric Manager's
// FABRIC_MODE.
#include "drivers/model/selection.hpp"

#include <catch2/catch.hpp>

#include "drivers/model/snapshot.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

namespace {

std::string roles(const Selection& sel) {
  std::string s;
  for (const auto& t : sel.targets) s += t.bdf.str() + "=" + std::string(toString(t.role)) + " ";
  return s;
}

}  // namespace

TEST_CASE("NVSwitches are left alone unless they go with the GPUs", "[selection]") {
  Fixture fx("hgx-h100");
  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE(s);
  SelectionOptions opt;
  auto plain = selectDevices(*s, opt);
  REQUIRE(plain);
  CHECK(plain->targets.size() == 8);
  CHECK(plain->find(*parseBdf("0000:c7:00.0")) == nullptr);

  opt.withNvSwitches = true;
  auto with = selectDevices(*s, opt);
  REQUIRE(with);
  INFO(roles(*with));
  CHECK(with->targets.size() == 12);
  const auto* sw = with->find(*parseBdf("0000:ca:00.0"));
  REQUIRE(sw);
  CHECK(sw->role == Role::kNvSwitch);
  CHECK(sw->group == std::optional<int>(203));
  CHECK(with->problems.empty());

  // --devices picks GPUs; the fabric still goes whole.
  opt.devices = {*parseBdf("0000:18:00.0")};
  auto one = selectDevices(*s, opt);
  REQUIRE(one);
  CHECK(one->targets.size() == 5);
  // An NVSwitch named by --gpu-ids is taken once.
  opt.devices.clear();
  opt.gpuIds = {PciId{0x10de, 0x22a3}};
  auto ids = selectDevices(*s, opt);
  REQUIRE(ids);
  CHECK(ids->targets.size() == 4);
}

TEST_CASE("the nvswitch policy: parsing, and auto against FABRIC_MODE", "[selection]") {
  CHECK(parseNvSwitchPolicy("auto") == NvSwitchPolicy::kAuto);
  CHECK(parseNvSwitchPolicy("with-gpus") == NvSwitchPolicy::kWithGpus);
  CHECK(parseNvSwitchPolicy("leave") == NvSwitchPolicy::kLeave);
  CHECK_FALSE(parseNvSwitchPolicy("yes"));
  CHECK(nvSwitchesWithGpus(NvSwitchPolicy::kAuto, FabricMode::kFullPassthrough));
  CHECK_FALSE(nvSwitchesWithGpus(NvSwitchPolicy::kAuto, FabricMode::kSharedNvSwitch));
  CHECK_FALSE(nvSwitchesWithGpus(NvSwitchPolicy::kAuto, FabricMode::kVgpu));
  CHECK(nvSwitchesWithGpus(NvSwitchPolicy::kWithGpus, FabricMode::kVgpu));
  CHECK_FALSE(nvSwitchesWithGpus(NvSwitchPolicy::kLeave, FabricMode::kFullPassthrough));
}

TEST_CASE("selection takes every companion in the group and refuses foreign devices",
          "[selection]") {
  SECTION("Turing: audio, USB and UCSI ride along") {
    Fixture fx("turing-usb-ucsi");
    RootHost host(fx.root());
    auto s = readSnapshot(host);
    auto sel = selectDevices(*s, {});
    REQUIRE(sel);
    REQUIRE(sel->targets.size() == 4);
    CHECK(sel->targets[0].role == Role::kGpu);
    for (size_t i = 1; i < 4; ++i) CHECK(sel->targets[i].role == Role::kCompanion);
    CHECK(sel->problems.empty());
  }
  SECTION("another vendor's USB or audio controller in the group is foreign, not a companion") {
    // An A10 behind a root port whose group also holds the chipset's xHCI and HD audio (other
    // slots, vendor 8086), and a function of another vendor in the GPU's slot that the kernel
    // linked to it as a consumer (rides along), or that is audio in its slot (rides along).
    Fixture fx(Fixture::HostYaml{R"(kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [nvidia, snd_hda_intel, xhci_hcd]
devices:
  - {bdf: "0000:00:1c.0", id: "8086:a338", class: "060400", group: 30, driver: pcieport}
  - {bdf: "0000:00:14.0", id: "8086:a36d", class: "0c0330", group: 30, driver: xhci_hcd}
  - {bdf: "0000:00:1f.3", id: "8086:a348", class: "040300", group: 30, driver: snd_hda_intel}
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", group: 30, driver: nvidia, consumers: ["0000:3b:00.2"]}
  - {bdf: "0000:3b:00.1", id: "1af4:1003", class: "040300", group: 30}
  - {bdf: "0000:3b:00.2", id: "1af4:1044", class: "0c0330", group: 30}
)"});
    RootHost host(fx.root());
    auto s = readSnapshot(host);
    REQUIRE(s);
    auto sel = selectDevices(*s, {});
    REQUIRE(sel);
    INFO(roles(*sel));
    CHECK(roles(*sel) == "0000:3b:00.0=gpu 0000:3b:00.1=companion 0000:3b:00.2=companion ");
    REQUIRE(sel->problems.size() == 1);
    CHECK(sel->problems[0].foreign ==
          std::vector<Bdf>{*parseBdf("0000:00:14.0"), *parseBdf("0000:00:1f.3")});
  }
  SECTION("a bridge on a driver other than pcieport is foreign: vfio could not take the group") {
    // A root port on pcieport and an unbound host bridge stay put; an ISA bridge on lpc_ich in
    // the GPU's group makes it unusable (the fixture says why).
    Fixture fx("bridge-on-driver");
    RootHost host(fx.root());
    auto s = readSnapshot(host);
    REQUIRE(s);
    auto sel = selectDevices(*s, {});
    REQUIRE(sel);
    CHECK(roles(*sel) == "0000:01:00.0=gpu ");
    REQUIRE(sel->problems.size() == 1);
    CHECK(sel->problems[0].foreign == std::vector<Bdf>{*parseBdf("0000:00:1f.0")});
  }
  SECTION("a group shared with the root NVMe is a problem naming it") {
    Fixture fx("nvme-shared-group");
    RootHost host(fx.root());
    auto s = readSnapshot(host);
    auto sel = selectDevices(*s, {});
    REQUIRE(sel);
    REQUIRE(sel->problems.size() == 1);
    CHECK(sel->problems[0].holdsRootDisk);
    CHECK(sel->problems[0].describe(*s) ==
          "IOMMU group 12 of GPU 0000:03:00.0 holds the root filesystem's disk 0000:04:00.0 "
          "(144d:a80a NVMe controller)");
    CHECK_FALSE(sel->find(*parseBdf("0000:04:00.0")));  // never a target
    CHECK_FALSE(sel->find(*parseBdf("0000:02:00.0")));  // bridges stay put
  }
  SECTION("--devices narrows the selection and rejects strangers") {
    Fixture fx("two-a10");
    RootHost host(fx.root());
    auto s = readSnapshot(host);
    SelectionOptions o;
    o.devices = {*parseBdf("0000:86:00.0")};
    auto sel = selectDevices(*s, o);
    REQUIRE(sel);
    CHECK(sel->targets.size() == 2);
    o.devices = {*parseBdf("0000:5e:00.0")};
    auto bad = selectDevices(*s, o);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().exit == Exit::kUsage);
    CHECK_THAT(bad.error().message,
               Catch::Contains("0000:5e:00.0 (144d:a80a NVMe controller) is not a selected GPU"));
  }
  SECTION("--gpu-ids replaces the NVIDIA rule") {
    Fixture fx("two-a10");
    RootHost host(fx.root());
    auto s = readSnapshot(host);
    SelectionOptions o;
    o.gpuIds = {{0x8086, 0x1521}};
    auto sel = selectDevices(*s, o);
    REQUIRE(sel);
    REQUIRE(sel->targets.size() == 1);
    CHECK(sel->targets[0].bdf == *parseBdf("0000:af:00.0"));
  }
}
