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
  // Every occurrence counts, in order, as the kernel applies them.
  CHECK(intelIommuOn(c("intel_iommu=on intel_iommu=igfx_off")));
  CHECK(intelIommuOn(c("intel_iommu=off,on")));
  CHECK(iommuOffArg(c("intel_iommu=on intel_iommu=igfx_off")) == std::nullopt);
  CHECK(iommuOffArg(c("intel_iommu=off intel_iommu=sm_on")) ==
        std::optional<std::string>("intel_iommu=off"));
  CHECK(iommuOffArg(c("amd_iommu=pgtbl_v2,off")) ==
        std::optional<std::string>("amd_iommu=pgtbl_v2,off"));
  CHECK(iommuOffArg(c("iommu=pt,off")) == std::optional<std::string>("iommu=pt,off"));
  // Only the host's own IOMMU driver reads its argument; iommu=off stops both.
  CHECK(iommuOffArg(c("intel_iommu=off"), IommuVendor::kAmd) == std::nullopt);
  CHECK(iommuOffArg(c("amd_iommu=off"), IommuVendor::kIntel) == std::nullopt);
  CHECK(iommuOffArg(c("amd_iommu=off"), IommuVendor::kAmd) ==
        std::optional<std::string>("amd_iommu=off"));
  CHECK(iommuOffArg(c("iommu=off"), IommuVendor::kAmd) == std::optional<std::string>("iommu=off"));
  // What follows "--" is init's, not the kernel's.
  CHECK(iommuOffArg(c("intel_iommu=on -- intel_iommu=off")) == std::nullopt);
  CHECK(intelIommuOn(c("intel_iommu=on -- intel_iommu=off")));
  // Interrupt remapping: intremap=off and nointremap turn it off, a later intremap=on back on.
  CHECK(intremapOffArg(c("intremap=off")) == std::optional<std::string>("intremap=off"));
  CHECK(intremapOffArg(c("quiet nointremap")) == std::optional<std::string>("nointremap"));
  CHECK(intremapOffArg(c("nointremap intremap=on")) == std::nullopt);
  CHECK(intremapOffArg(c("intremap=nosid")) == std::nullopt);
  // Booleans as kstrtobool() reads them.
  for (const char* yes : {"1", "y", "Y", "yes", "t", "true", "on", "ON"}) CHECK(paramTruthy(yes));
  for (const char* no : {"0", "n", "N", "no", "f", "false", "off", "", "o", "2"})
    CHECK_FALSE(paramTruthy(no));
  CHECK(iommuPassthrough(c("iommu=pt")));
  CHECK(iommuPassthrough(c("iommu=nopt iommu=pt")));
  CHECK_FALSE(iommuPassthrough(c("iommu=pt iommu=nopt")));
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
