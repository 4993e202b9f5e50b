// Preflight as a whole (checks/preflight.cpp): every check reports on every host, ready hosts
// pass, and the mode defaults as documented.
#include "checks/preflight.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("an Intel host ready for vm-passthrough passes every check", "[preflight]") {
  Fixture fx("preflight-intel");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  INFO(statuses(r));
  CHECK_FALSE(r.failed());
  CHECK(r.summary().warn == 0);
  for (const auto& c : r.checks) {
    INFO(c.id << ": " << c.detail);
    // INFO only for iommufd (a 6.1 kernel has none, and VMs use the VFIO groups) and for the
    // reset methods.
    CHECK((c.status == CheckStatus::kPass || c.status == CheckStatus::kSkip ||
           (c.status == CheckStatus::kInfo && (c.id == "iommu.iommufd" || c.id == "gpu.reset"))));
    CHECK(c.remedy.empty());
  }
  CHECK(check(r, "iommu.iommufd").status == CheckStatus::kInfo);
  CHECK(check(r, "cpu.virtualization").detail == "vmx (Intel VT-x) present, GenuineIntel");
  CHECK(check(r, "iommu.firmware").detail == "ACPI DMAR table present (Intel VT-d)");
  CHECK(check(r, "iommu.kernel").detail == "4 IOMMU groups, units dmar0, dmar1");
  CHECK(check(r, "iommu.interrupt-remapping").detail ==
        "4 of 5 interrupts in /proc/interrupts are remapped (IR-)");
  CHECK(check(r, "iommu.groups").detail == "0000:3b:00.0: group 30 (2 functions)");
  // The BMC's VGA holds efifb, not the A10.
  CHECK(check(r, "gpu.boot-vga").detail == "no selected GPU is the boot VGA device");
  CHECK(check(r, "gpu.reset").detail ==
        "prepare resets each on its way back from a VM: 0000:3b:00.0, 0000:3b:00.1: bus reset "
        "through 0000:3a:00.0");
  CHECK_THAT(check(r, "boot.persistence").detail,
             Catch::StartsWith(
                 "hostprep-prepare.service enabled (etc/systemd/system/multi-user.target.wants/"
                 "hostprep-prepare.service); modprobe.d options vfio-pci ids=10de:2236,10de:1aef"));
  // The checks a mode does not need are skipped with the reason.
  CHECK(check(r, "gpu.sriov").detail == "not needed in vm-passthrough mode");
  // And the same host is fine for containers too, except that its boot config hands the GPUs to
  // vfio-pci: a container node would never see them.
  auto c = preflightOn(fx, Mode::kContainer);
  CHECK_FALSE(c.failed());
  CHECK(check(c, "boot.persistence").status == CheckStatus::kWarn);
  CHECK_THAT(
      check(c, "boot.persistence").detail,
      Catch::StartsWith("the boot configuration hands 10de:2236,10de:1aef to vfio-pci at boot"));
}

TEST_CASE("an AMD host needs no intel_iommu and passes", "[preflight]") {
  Fixture fx("preflight-amd");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  INFO(statuses(r));
  CHECK_FALSE(r.failed());
  CHECK(check(r, "cpu.virtualization").detail == "svm (AMD-V) present, AuthenticAMD");
  CHECK(check(r, "iommu.firmware").detail == "ACPI IVRS table present (AMD-Vi)");
  CHECK(check(r, "iommu.firmware").title == "IOMMU in firmware (VT-d/AMD-Vi)");
  CHECK(check(r, "cmdline.iommu").status == CheckStatus::kPass);
  CHECK(check(r, "cmdline.iommu").detail ==
        "AMD: the kernel enables AMD-Vi by default (no amd_iommu=off)");
  CHECK(check(r, "iommu.interrupt-remapping").status == CheckStatus::kPass);
  CHECK(check(r, "cpu.kvm").detail == "/dev/kvm present (kvm_amd loaded)");
  // ids cover the L4, softdeps make vfio-pci load first.
  CHECK(check(r, "boot.persistence").status == CheckStatus::kPass);
}

TEST_CASE("an arm64 (Grace) host: KVM at EL2, the SMMU, MSIs isolated by the ITS", "[preflight]") {
  Fixture fx("preflight-grace");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  INFO(statuses(r));
  CHECK(check(r, "cpu.virtualization").status == CheckStatus::kPass);
  CHECK(check(r, "cpu.virtualization").detail ==
        "arm64 (CPU implementer 0x41): KVM is running, so the kernel started at EL2");
  CHECK(check(r, "cpu.kvm").detail == "/dev/kvm present (KVM built in)");
  CHECK(check(r, "iommu.firmware").detail == "ACPI IORT table present (Arm SMMU)");
  CHECK(check(r, "cmdline.iommu").status == CheckStatus::kPass);
  CHECK(check(r, "cmdline.iommu-pt").detail == "iommu.passthrough=1");
  CHECK(check(r, "iommu.interrupt-remapping").status == CheckStatus::kPass);
  CHECK(check(r, "iommu.interrupt-remapping").detail ==
        "2 of 4 interrupts in /proc/interrupts are MSIs through the GIC ITS (ITS-), which "
        "isolates them (arm64 has no interrupt remapping)");
  // Titles in Arm's terms, not x86's (VT-x/AMD-V, VT-d/AMD-Vi, iommu=pt); the ids stay.
  CHECK(check(r, "cpu.virtualization").title == "CPU virtualization (EL2)");
  CHECK(check(r, "iommu.firmware").title == "IOMMU in firmware (SMMU)");
  CHECK(check(r, "cmdline.iommu-pt").title == "IOMMU passthrough (iommu.passthrough=1)");
  for (const auto& c : r.checks) {
    INFO(c.id);
    CHECK_THAT(c.title, !Catch::Contains("VT-") && !Catch::Contains("iommu=pt"));
  }

  SECTION("no /dev/kvm: the kernel did not start at EL2") {
    std::filesystem::remove(fx.path("dev/kvm"));
    auto n = preflightOn(fx, Mode::kVmPassthrough);
    CHECK(check(n, "cpu.virtualization").status == CheckStatus::kFail);
    CHECK_THAT(check(n, "cpu.virtualization").remedy, Catch::StartsWith("boot the kernel at EL2"));
    CHECK(check(n, "cpu.kvm").status == CheckStatus::kFail);
    // Never a module to load: KVM is built into arm64 kernels.
    CHECK_THAT(check(n, "cpu.kvm").remedy, !Catch::Contains("modprobe"));
  }
  SECTION("MSIs through a GICv2m frame only: not isolated") {
    fx.write("proc/interrupts",
             "           CPU0\n 11:  1  GICv3  27 Level  arch_timer\n"
             " 40:  0  GICv2m-PCI-MSI 524288 Edge  nvme0q0\n");
    auto n = preflightOn(fx, Mode::kVmPassthrough);
    CHECK(check(n, "iommu.interrupt-remapping").status == CheckStatus::kFail);
    CHECK_THAT(check(n, "iommu.interrupt-remapping").remedy,
               Catch::StartsWith("enable the GICv3 ITS in the firmware"));
    CHECK_THAT(check(n, "iommu.interrupt-remapping").remedy,
               !Catch::Contains("BIOS/UEFI setup, usually beside VT-d"));
  }
  SECTION("without iommu.passthrough=1 the advice is arm64's argument, not iommu=pt") {
    // iommu=pt is x86's: an arm64 kernel ignores it.
    fx.write("proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro iommu=pt\n");
    auto n = preflightOn(fx, Mode::kVmPassthrough);
    CHECK(check(n, "cmdline.iommu-pt").detail ==
          "iommu.passthrough=1 is not set: host devices go through IOMMU translation (slower "
          "host I/O)");
  }
}

TEST_CASE("a busybox guest and an empty root are states, not crashes", "[preflight]") {
  SECTION("minimal guest: no lib/modules, no etc, no firmware tables") {
    Fixture fx("preflight-guest");
    auto r = preflightOn(fx, Mode::kVmPassthrough);
    CHECK(r.failed());
    CHECK(check(r, "cpu.virtualization").status == CheckStatus::kFail);
    CHECK_THAT(check(r, "cpu.virtualization").remedy,
               Catch::StartsWith("enable nested virtualization"));
    CHECK(check(r, "iommu.firmware").status == CheckStatus::kWarn);
    CHECK(check(r, "modules.vfio").status == CheckStatus::kFail);
    // A QEMU guest without vIOMMU: no IR- chips.
    CHECK(check(r, "iommu.interrupt-remapping").status == CheckStatus::kFail);
  }
  SECTION("an empty root: every check still reports") {
    Fixture fx;
    for (Mode m : {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu}) {
      auto r = preflightOn(fx, m);
      CHECK(r.checks.size() == 25);
      CHECK(check(r, "gpu.present").status == CheckStatus::kFail);
      CHECK_THAT(check(r, "gpu.present").detail,
                 Catch::StartsWith("cannot read PCI devices: cannot list"));
      for (const auto& c : r.checks) {
        if (c.status == CheckStatus::kWarn || c.status == CheckStatus::kFail) {
          INFO(c.id);
          CHECK_FALSE(c.remedy.empty());
        }
      }
    }
  }
}

TEST_CASE("the default mode: flag, then configured, then vm-passthrough", "[preflight]") {
  CHECK(preflightMode(std::nullopt, std::nullopt) == Mode::kVmPassthrough);
  CHECK(preflightMode(std::nullopt, Mode::kContainer) == Mode::kContainer);
  CHECK(preflightMode(Mode::kVmVgpu, Mode::kContainer) == Mode::kVmVgpu);
}

TEST_CASE("preflight on its scoped snapshot reports what it reports on a full one", "[preflight]") {
  // Every scenario with a live host, every mode, the default rule and --gpu-ids.
  std::vector<std::string> scenarios;
  for (const auto& e : std::filesystem::directory_iterator(HOSTPREP_FIXTURES_DIR)) {
    if (std::filesystem::exists(e.path() / "host.yaml"))
      scenarios.push_back(e.path().filename().string());
  }
  REQUIRE(scenarios.size() > 20);
  SelectionOptions ids;
  ids.gpuIds = {PciId{0x10de, 0x2236}, PciId{0x8086, 0x1234}};
  for (const auto& name : scenarios) {
    Fixture fx(name);
    for (Mode mode : {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu}) {
      for (const auto& sel : {SelectionOptions{}, ids}) {
        INFO(name << " " << toString(mode) << " gpu-ids " << sel.gpuIds.size());
        auto scoped = preflightOn(fx, mode, sel);
        auto full = preflightOnFullSnapshot(fx, mode, sel);
        REQUIRE(scoped.checks.size() == full.checks.size());
        for (size_t i = 0; i < full.checks.size(); ++i) {
          INFO(full.checks[i].id);
          CHECK(scoped.checks[i].status == full.checks[i].status);
          CHECK(scoped.checks[i].detail == full.checks[i].detail);
          CHECK(scoped.checks[i].remedy == full.checks[i].remedy);
        }
      }
    }
  }
}
