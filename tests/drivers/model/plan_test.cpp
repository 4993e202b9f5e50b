// The plan (drivers/model/plan.cpp): what a switch would do, and what it refuses before anything
// changes, on fixture hosts behind the fake kernel.
#include "drivers/model/plan.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

#include "drivers/model/snapshot.hpp"
#include "tests/drivers/switch_rig.hpp"

using namespace hostprep;
using namespace hostprep::test::rig;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

TEST_CASE("the dry-run plan for two A10s lists both GPUs and both audio functions", "[switcher]") {
  Rig r("two-a10");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmPassthrough);
  REQUIRE(p.moves.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(p.moves[i].changes);
  CHECK(p.moves[0].bdf.str() == "0000:3b:00.0");
  CHECK(p.moves[1].bdf.str() == "0000:86:00.0");
  CHECK(p.moves[2].bdf.str() == "0000:3b:00.1");
  CHECK(p.moves[3].bdf.str() == "0000:86:00.1");
  std::vector<std::string> steps;
  for (const auto& st : p.steps) steps.push_back(st.describe());
  CHECK(steps.front() == "load module vfio_pci");
  CHECK(steps[1] == "0000:3b:00.0: set driver_override to vfio-pci");
  CHECK(steps[2] == "0000:3b:00.0: unbind from nvidia");
  CHECK(steps[3] == "0000:3b:00.0: probe drivers");
  CHECK(steps[4] == "0000:3b:00.0: verify it is bound to vfio-pci");
  CHECK(steps[10] == "0000:3b:00.1: unbind from snd_hda_intel");
  CHECK(steps[steps.size() - 2] == "verify /dev/vfio/30 exists");
  CHECK(steps.back() == "verify /dev/vfio/60 exists");
  CHECK(steps.size() == 1 + 4 * 4 + 2);
  CHECK(r.kernel.writeCount() == 0);
  CHECK(r.fx.deviceState() == before);  // planning touches nothing
}

TEST_CASE("vm-passthrough without an IOMMU is refused before anything changes", "[switcher]") {
  Rig r("no-iommu");
  auto s = readSnapshot(r.kernel);
  auto sel = selectDevices(*s, {});
  auto p = makePlan(*s, *sel, {Mode::kVmPassthrough, "nvidia", ""});
  REQUIRE_FALSE(p);
  CHECK_THAT(p.error().describe(),
             Catch::Contains("0000:3b:00.0 (10de:2236 3D controller): has no IOMMU group"));
  CHECK_THAT(p.error().describe(), Catch::Contains("intel_iommu=on"));
}

TEST_CASE("container mode refuses a GPU held by nouveau with the blacklist advice", "[switcher]") {
  Rig r("two-a10");
  std::filesystem::remove(r.fx.path("sys/devices/pci0000:3b/0000:3b:00.0/driver"));
  r.fx.symlink("sys/devices/pci0000:3b/0000:3b:00.0/driver", "../../../bus/pci/drivers/nouveau");
  auto s = readSnapshot(r.kernel);
  auto sel = selectDevices(*s, {});
  auto p = makePlan(*s, *sel, {Mode::kContainer, "nvidia", ""});
  REQUIRE_FALSE(p);
  CHECK_THAT(p.error().describe(),
             Catch::Contains(
                 "is bound to nouveau, not a driver of module nvidia (nvidia, nvidia-nvswitch)"));
  CHECK_THAT(p.error().describe(), Catch::Contains("blacklist nouveau"));
}

TEST_CASE("VFs another driver holds are named before a plan would disable SR-IOV under them",
          "[vgpu]") {
  VRig r("vgpu-two-a10");
  r.apply(Mode::kVmVgpu);
  // The VFs carry vGPUs on the host driver: leaving vm-vgpu may take them.
  auto s = readSnapshot(r.kernel);
  REQUIRE(s);
  CHECK(vfsInUse(*s, r.plan(Mode::kVmPassthrough), r.hostDriver).empty());
  // Someone gives the VF 0000:3b:00.5 to vfio-pci (VF passthrough to a VM).
  const std::string vf = "sys/bus/pci/devices/0000:3b:00.5";
  REQUIRE(r.kernel.loadModule("vfio_pci"));
  REQUIRE(r.kernel.writeAttr(vf + "/driver_override", "vfio-pci"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers/nvidia/unbind", "0000:3b:00.5"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers_probe", "0000:3b:00.5"));
  REQUIRE(r.driver("0000:3b:00.5") == std::optional<std::string>("vfio-pci"));
  s = readSnapshot(r.kernel);
  REQUIRE(s);
  for (Mode m : {Mode::kVmPassthrough, Mode::kContainer}) {
    auto used = vfsInUse(*s, r.plan(m), r.hostDriver);
    REQUIRE(used.size() == 1);
    CHECK(used[0] == "0000:3b:00.5 (VF of 0000:3b:00.0) on vfio-pci");
  }
}
