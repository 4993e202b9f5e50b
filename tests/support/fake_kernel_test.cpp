// The fake kernel itself: its writes have the real kernel's errors.
#include "tests/support/fake_kernel.hpp"

#include <catch2/catch.hpp>

#include "drivers/model/snapshot.hpp"
#include "tests/drivers/switch_rig.hpp"

using namespace hostprep;
using namespace hostprep::test::rig;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

TEST_CASE("the fake kernel's sriov_numvfs has the real kernel's errors", "[vgpu][fake]") {
  VRig r("vgpu-two-a10");
  const std::string pf = "sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs";
  CHECK(r.kernel.writeAttr(pf, "4").error().err == ENOENT);  // nvidia: no sriov_configure
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers/nvidia/unbind", "0000:3b:00.0"));
  CHECK(r.kernel.writeAttr(pf, "4").error().err == ENOENT);  // no driver
  REQUIRE(r.kernel.loadModule("pci_pf_stub"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/devices/0000:3b:00.0/driver_override", "pci-pf-stub"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers_probe", "0000:3b:00.0"));
  CHECK(r.kernel.writeAttr(pf, "17").error().err == ERANGE);
  REQUIRE(r.kernel.writeAttr(pf, "4"));
  auto f = readPciFunction(r.kernel, *parseBdf("0000:3b:00.0"));
  REQUIRE(f->virtfns.size() == 4);
  CHECK(f->virtfns[3].str() == "0000:3b:00.7");
  auto vf = readPciFunction(r.kernel, f->virtfns[0]);
  CHECK(vf->physfn == f->bdf);
  CHECK(vf->iommuGroup == 300);
  CHECK(vf->driver == std::optional<std::string>("nvidia"));
  CHECK(r.kernel.exists("sys/class/mdev_bus/0000:3b:00.4"));
  CHECK(r.kernel.writeAttr(pf, "8").error().err == EBUSY);  // non-zero -> other non-zero
  REQUIRE(r.kernel.writeAttr(pf, "0"));
  CHECK(readPciFunction(r.kernel, *parseBdf("0000:3b:00.0"))->virtfns.empty());
  CHECK_FALSE(r.kernel.exists("sys/bus/pci/devices/0000:3b:00.4"));
  CHECK_FALSE(r.kernel.exists("sys/kernel/iommu_groups/300"));
}
