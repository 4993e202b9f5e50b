// Kernel arguments (checks/preflight_cmdline.cpp): parsing them and the remedies that add them.
#include "checks/preflight_cmdline.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

TEST_CASE("kernel argument helpers", "[preflight]") {
  auto c = [](const char* s) { return parseCmdline(s); };
  CHECK(intelIommuOn(c("intel_iommu=on")));
  CHECK(intelIommuOn(c("intel_iommu=on,sm_on")));
  CHECK_FALSE(intelIommuOn(c("intel_iommu=on intel_iommu=off")));
  CHECK_FALSE(intelIommuOn(c("intel_iommu")));
  CHECK(iommuOffArg(c("intel_iommu=igfx_off")) == std::nullopt);
  CHECK(iommuOffArg(c("intel_iommu=on,off")) == std::optional<std::string>("intel_iommu=on,off"));
  CHECK(iommuOffArg(c("amd_iommu=off")) == std::optional<std::string>("amd_iommu=off"));
  CHECK(iommuOffArg(c("iommu=off")) == std::optional<std::string>("iommu=off"));
  CHECK(iommuPassthrough(c("iommu=pt")));
  CHECK(iommuPassthrough(c("iommu.passthrough=1")));
  CHECK_FALSE(iommuPassthrough(c("iommu=nopt")));

  BootConfig bls;
  bls.cmdlines.push_back({"boot/loader/entries/a.conf", "", {}});
  CHECK(addKernelArgsRemedy("intel_iommu=on", bls) ==
        "run grubby --update-kernel=ALL --args=\"intel_iommu=on\" and reboot");
  BootConfig ki;
  ki.cmdlines.push_back({"etc/kernel/cmdline", "", {}});
  CHECK_THAT(addKernelArgsRemedy("intel_iommu=on", ki),
             Catch::StartsWith("add \"intel_iommu=on\" to /etc/kernel/cmdline"));
  CHECK(addKernelArgsRemedy("iommu=pt", BootConfig{}) ==
        "add \"iommu=pt\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run update-grub (or "
        "grub2-mkconfig -o "
        "/boot/grub2/grub.cfg) and reboot");
}
