// Selection (drivers/selection.cpp): the GPUs and their companions, group by group.
#include "drivers/selection.hpp"

#include <catch2/catch.hpp>

#include "drivers/snapshot.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

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
