// boot.persistence (checks/preflight_persistence.cpp): what hands the GPUs to vfio-pci at boot.
#include "checks/preflight_persistence.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("boot persistence for vm-passthrough", "[preflight]") {
  Fixture fx("preflight-intel");
  std::filesystem::remove(
      fx.path("etc/systemd/system/multi-user.target.wants/hostprep-prepare.service"));
  SECTION("ids and softdeps without the unit still pass") {
    CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "boot.persistence").status ==
          CheckStatus::kPass);
  }
  SECTION("ids missing the audio function") {
    fx.write("etc/modprobe.d/hostprep-vfio.conf",
             "options vfio-pci ids=10de:2236\nsoftdep nvidia pre: vfio-pci\n");
    const auto& p = check(preflightOn(fx, Mode::kVmPassthrough), "boot.persistence");
    CHECK(p.status == CheckStatus::kWarn);
    CHECK_THAT(p.detail, Catch::StartsWith("vfio-pci ids at boot miss 10de:1aef"));
    CHECK_THAT(p.remedy, Catch::StartsWith(
                             "add them: the line \"options vfio-pci ids=10de:2236,10de:1aef\""));
  }
  SECTION("ids without a softdep: nvidia may win the race") {
    fx.write("etc/modprobe.d/hostprep-vfio.conf", "options vfio_pci ids=10de:2236,10de:1aef\n");
    const auto& p = check(preflightOn(fx, Mode::kVmPassthrough), "boot.persistence");
    CHECK(p.status == CheckStatus::kWarn);
    CHECK_THAT(p.remedy, Catch::StartsWith(
                             "add the lines \"softdep nvidia pre: vfio-pci\" and \"softdep nouveau "
                             "pre: vfio-pci\""));
  }
  SECTION("vfio-pci built in ignores modprobe.d ids") {
    fx.write("boot/config-6.1.0-test-amd64", "CONFIG_VFIO=y\nCONFIG_VFIO_PCI=y\n");
    const auto& p = check(preflightOn(fx, Mode::kVmPassthrough), "boot.persistence");
    CHECK(p.status == CheckStatus::kWarn);
    CHECK(p.detail == "vfio-pci is built into the kernel, so the modprobe.d ids are ignored");
    CHECK_THAT(p.remedy,
               Catch::StartsWith("add \"vfio-pci.ids=10de:1aef,10de:2236\" to GRUB_CMDLINE_LINUX"));
  }
  SECTION("vfio-pci.ids on the kernel command line counts") {
    std::filesystem::remove(fx.path("etc/modprobe.d/hostprep-vfio.conf"));
    fx.write("etc/default/grub",
             "GRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt vfio_pci.ids=10de:2236,10de:1aef\"\n");
    const auto& p = check(preflightOn(fx, Mode::kVmPassthrough), "boot.persistence");
    CHECK(p.status == CheckStatus::kPass);
    CHECK_THAT(p.detail, Catch::Contains("vfio-pci.ids=10de:2236,10de:1aef"));
  }
  SECTION("nothing at all") {
    std::filesystem::remove(fx.path("etc/modprobe.d/hostprep-vfio.conf"));
    const auto& p = check(preflightOn(fx, Mode::kVmPassthrough), "boot.persistence");
    CHECK(p.status == CheckStatus::kWarn);
    CHECK_THAT(p.detail, Catch::StartsWith("nothing hands the GPUs to vfio-pci at boot"));
  }
}
