// The IOMMU checks (checks/preflight_iommu.cpp) on fixture hosts: firmware table, kernel groups,
// the kernel argument and interrupt remapping, with the exact remedy a user sees.
#include "checks/preflight_iommu.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

const std::string kIntelRemedy =
    "add \"intel_iommu=on iommu=pt\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run "
    "update-grub "
    "(or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot";

}  // namespace

TEST_CASE("DMAR present but the kernel has no IOMMU: FAIL with the exact GRUB line",
          "[preflight]") {
  Fixture fx("preflight-intel-iommu-off");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  CHECK(r.failed());
  CHECK(check(r, "iommu.firmware").status == CheckStatus::kPass);
  const auto& k = check(r, "iommu.kernel");
  CHECK(k.status == CheckStatus::kFail);
  CHECK(
      k.detail ==
      "/sys/kernel/iommu_groups is empty and /sys/class/iommu has no units; intel_iommu=on is not "
      "on the kernel command line");
  CHECK(k.remedy == kIntelRemedy);
  const auto& c = check(r, "cmdline.iommu");
  CHECK(c.status == CheckStatus::kFail);
  CHECK(c.detail == "Intel host without intel_iommu=on on the kernel command line");
  CHECK(c.remedy == kIntelRemedy);
  CHECK(check(r, "iommu.groups").status == CheckStatus::kSkip);
}

TEST_CASE("a kernel that enables the Intel IOMMU by default needs no argument", "[preflight]") {
  Fixture fx("preflight-intel-iommu-off");
  fx.write("boot/config-6.1.0-test-amd64",
           "CONFIG_INTEL_IOMMU=y\nCONFIG_INTEL_IOMMU_DEFAULT_ON=y\n");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  CHECK(check(r, "cmdline.iommu").status == CheckStatus::kPass);
  CHECK(check(r, "cmdline.iommu").detail ==
        "CONFIG_INTEL_IOMMU_DEFAULT_ON=y in boot/config-6.1.0-test-amd64: on without an argument");
}

TEST_CASE("intel_iommu=off on the command line is a FAIL naming where it is set", "[preflight]") {
  Fixture fx("preflight-intel");
  fx.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz ro intel_iommu=off\n");
  fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"intel_iommu=off\"\n");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  const auto& c = check(r, "cmdline.iommu");
  CHECK(c.status == CheckStatus::kFail);
  CHECK(c.detail == "the kernel command line has intel_iommu=off");
  CHECK(c.remedy ==
        "remove \"intel_iommu=off\" from etc/default/grub (GRUB_CMDLINE_LINUX, "
        "GRUB_CMDLINE_LINUX_DEFAULT), regenerate the boot configuration (update-grub, or "
        "grub2-mkconfig -o /boot/grub2/grub.cfg, or grubby --update-kernel=ALL "
        "--remove-args=\"intel_iommu=off\") and reboot");
}

TEST_CASE("intel_iommu=on only on the running kernel warns that the next boot loses it",
          "[preflight]") {
  Fixture fx("preflight-intel");
  fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  const auto& c = check(r, "cmdline.iommu");
  CHECK(c.status == CheckStatus::kWarn);
  CHECK_THAT(c.detail, Catch::EndsWith("the next boot loses it"));
  CHECK(c.remedy ==
        "add \"intel_iommu=on\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run update-grub "
        "(or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot");
}

TEST_CASE("no DMAR table: the firmware check fails and says to enable VT-d", "[preflight]") {
  Fixture fx("preflight-no-dmar");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  CHECK(r.failed());
  const auto& f = check(r, "iommu.firmware");
  CHECK(f.status == CheckStatus::kFail);
  CHECK(f.detail ==
        "no DMAR or IVRS table under /sys/firmware/acpi/tables: the firmware does not expose an "
        "IOMMU");
  CHECK(f.remedy ==
        "enable VT-d (Intel Virtualization Technology for Directed I/O) in the BIOS/UEFI setup, "
        "then reboot");
  // The kernel argument is there; the kernel check points at the firmware, not at GRUB.
  CHECK(check(r, "cmdline.iommu").status == CheckStatus::kPass);
  CHECK(check(r, "iommu.kernel").remedy ==
        "enable VT-d / AMD-Vi (IOMMU) in the BIOS/UEFI setup, then reboot");
}

TEST_CASE("the IOMMU kernel argument follows the firmware's table, not the CPU vendor",
          "[preflight]") {
  // QEMU's emulated VT-d under an AMD CPU model: the DMAR table makes the IOMMU Intel's, and
  // intel-iommu stays off without intel_iommu=on whatever the CPU says.
  Fixture fx("preflight-amd");
  std::filesystem::remove(fx.path("sys/firmware/acpi/tables/IVRS"));
  fx.write("sys/firmware/acpi/tables/DMAR", "DMAR");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  CHECK(check(r, "iommu.firmware").detail == "ACPI DMAR table present (Intel VT-d)");
  // The kernel has IOMMU groups: on by default, but judged as Intel's.
  CHECK(check(r, "cmdline.iommu").detail ==
        "no intel_iommu=on, but the kernel enabled the IOMMU by default");
  // Without groups it is the missing intel_iommu=on, not "AMD-Vi is on by default".
  std::filesystem::remove_all(fx.path("sys/kernel/iommu_groups"));
  std::filesystem::create_directories(fx.path("sys/kernel/iommu_groups"));
  auto off = preflightOn(fx, Mode::kVmPassthrough);
  const auto arg = check(off, "cmdline.iommu");
  CHECK(arg.status == CheckStatus::kFail);
  CHECK(arg.detail == "Intel host without intel_iommu=on on the kernel command line");
  CHECK_THAT(arg.remedy, Catch::Contains("intel_iommu=on"));
}

TEST_CASE("only the host's own IOMMU driver reads its off switch, iommu=off stops any",
          "[preflight]") {
  // An AMD host (IVRS) whose command line still carries intel_iommu=off from an Intel image:
  // amd-iommu never reads it, the IOMMU is on, nothing to fix.
  Fixture fx("preflight-amd");
  fx.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro iommu=pt intel_iommu=off\n");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  CHECK(check(r, "cmdline.iommu").status == CheckStatus::kPass);
  fx.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro amd_iommu=pgtbl_v2,off\n");
  auto amdOff = preflightOn(fx, Mode::kVmPassthrough);
  CHECK(check(amdOff, "cmdline.iommu").status == CheckStatus::kFail);
  CHECK(check(amdOff, "cmdline.iommu").detail ==
        "the kernel command line has amd_iommu=pgtbl_v2,off");
  fx.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro iommu=off\n");
  CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "cmdline.iommu").status == CheckStatus::kFail);
}

TEST_CASE("no interrupt remapping fails for VM modes, warns with allow_unsafe_interrupts",
          "[preflight]") {
  Fixture fx("preflight-no-ir");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  const auto& ir = check(r, "iommu.interrupt-remapping");
  CHECK(ir.status == CheckStatus::kFail);
  CHECK(ir.detail ==
        "0 of 4 interrupts in /proc/interrupts are remapped (IR-); the IOMMU does not support it "
        "(ecap IR bit clear): vfio refuses to attach devices (EPERM)");
  CHECK(ir.remedy ==
        "enable Interrupt Remapping (and x2APIC) in the BIOS/UEFI setup, usually beside VT-d, then "
        "reboot; only if the hardware cannot: add the line \"options vfio_iommu_type1 "
        "allow_unsafe_interrupts=1\" to /etc/modprobe.d/vfio.conf (insecure: a guest can forge "
        "MSIs)");
  CHECK(check(preflightOn(fx, Mode::kContainer), "iommu.interrupt-remapping").status ==
        CheckStatus::kSkip);

  SECTION("the operator accepted unsafe interrupts") {
    fx.write("etc/modprobe.d/vfio.conf", "options vfio_iommu_type1 allow_unsafe_interrupts=1\n");
    auto u = preflightOn(fx, Mode::kVmPassthrough);
    CHECK(check(u, "iommu.interrupt-remapping").status == CheckStatus::kWarn);
    CHECK_THAT(check(u, "iommu.interrupt-remapping").detail,
               Catch::Contains("a guest can forge interrupts"));
  }
  SECTION("without /proc/interrupts the DMAR units' ecap decides") {
    std::filesystem::remove(fx.path("proc/interrupts"));
    auto u = preflightOn(fx, Mode::kVmPassthrough);
    CHECK(check(u, "iommu.interrupt-remapping").status == CheckStatus::kFail);
    CHECK_THAT(check(u, "iommu.interrupt-remapping").detail,
               Catch::StartsWith("no DMAR unit supports interrupt remapping (ecap IR bit clear)"));
    fx.write("sys/class/iommu/dmar0/intel-iommu/ecap", "19e2ff0505e\n");
    CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "iommu.interrupt-remapping").status ==
          CheckStatus::kPass);
  }
}
