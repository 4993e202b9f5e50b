// The GPU checks (checks/preflight_gpus.cpp): present, isolated, SR-IOV, boot VGA.
#include "checks/preflight_gpus.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("no GPU matched says what was found", "[preflight]") {
  Fixture fx("preflight-guest");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  const auto& g = check(r, "gpu.present");
  CHECK(g.status == CheckStatus::kFail);
  CHECK(g.detail ==
        "no NVIDIA GPU (vendor 10de, class 0300/0302) found; display/NVIDIA functions present: "
        "0000:00:01.0 (1234:1111 VGA controller) (3 PCI functions in all)");
  SelectionOptions sel;
  sel.gpuIds = {PciId{0x1234, 0x1111}};
  CHECK(check(preflightOn(fx, Mode::kVmPassthrough, sel), "gpu.present").status ==
        CheckStatus::kPass);
}

TEST_CASE("a group shared with an NVMe and a NIC fails naming them", "[preflight]") {
  Fixture fx("preflight-nvme-group");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  const auto& g = check(r, "iommu.groups");
  CHECK(g.status == CheckStatus::kFail);
  CHECK(g.detail ==
        "IOMMU group 12 of GPU 0000:03:00.0 also holds 0000:04:00.0 (144d:a80a NVMe controller), "
        "0000:05:00.0 (8086:10fb Ethernet controller)");
  CHECK_THAT(g.remedy, Catch::StartsWith("move the GPU to a slot whose root port isolates it"));
  CHECK_THAT(g.remedy, !Catch::Contains("root disk"));
  // Containers do not care about groups.
  CHECK(check(preflightOn(fx, Mode::kContainer), "iommu.groups").status == CheckStatus::kSkip);
}

TEST_CASE("the root disk's group is a FAIL that says the host would lose its disk", "[preflight]") {
  Fixture fx("nvme-shared-group");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  const auto& g = check(r, "iommu.groups");
  CHECK(g.status == CheckStatus::kFail);
  CHECK_THAT(g.detail, Catch::StartsWith(
                           "IOMMU group 12 of GPU 0000:03:00.0 holds the root filesystem's disk "
                           "0000:04:00.0 (144d:a80a NVMe controller)"));
  CHECK_THAT(
      g.remedy,
      Catch::EndsWith("never give the root disk's group to a VM: the host would lose its disk"));
}

TEST_CASE("vm-vgpu: an Ampere GPU without SR-IOV fails, Turing uses mdev and passes",
          "[preflight]") {
  Fixture fx("preflight-vgpu");
  auto r = preflightOn(fx, Mode::kVmVgpu);
  const auto& s = check(r, "gpu.sriov");
  CHECK(s.status == CheckStatus::kFail);
  CHECK(s.detail ==
        "SR-IOV not available on 0000:86:00.0 (10de:2236 3D controller): no sriov_totalvfs");
  CHECK(s.remedy == "enable SR-IOV (and Above 4G Decoding) in the BIOS/UEFI setup, then reboot");
  CHECK(check(r, "modules.vgpu").detail == "nvidia_vgpu_vfio loaded");
  CHECK(check(r, "iommu.groups").status == CheckStatus::kSkip);
  // Nothing restores the VFs and vGPUs at boot.
  CHECK(check(r, "boot.persistence").status == CheckStatus::kWarn);
  CHECK(
      check(r, "boot.persistence").remedy ==
      "run 'systemctl enable hostprep-prepare.service' (it re-creates the VFs and vGPU devices at "
      "every boot)");

  SECTION("VFs whose BARs the firmware left without memory fail, naming ENOMEM") {
    fx.write("sys/devices/pci0000:86/0000:86:00.0/sriov_totalvfs", "18\n");
    std::string resource;
    for (int i = 0; i < 13; ++i)
      resource += i == 0 ? "0x00000000d0000000 0x00000000d0ffffff 0x0000000000040200\n"
                         : "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
    fx.write("sys/devices/pci0000:86/0000:86:00.0/resource", resource);
    const auto c = check(preflightOn(fx, Mode::kVmVgpu), "gpu.sriov");
    CHECK(c.status == CheckStatus::kFail);
    CHECK_THAT(c.detail, Catch::EndsWith(": 18 VFs, but their BARs have no memory (sysfs resource "
                                         "lines 7-12 are empty): writing sriov_numvfs fails with "
                                         "ENOMEM"));
    CHECK_THAT(c.remedy,
               Catch::EndsWith("; if the VFs still get no memory, boot with pci=realloc"));
    // With a VF BAR assigned (line 8: VF BAR 1, 64-bit prefetchable) it passes.
    resource.replace(resource.find("0x0000000000000000", 8 * 57), 56,
                     "0x0000024000000000 0x00000247ffffffff 0x000000000014220c");
    fx.write("sys/devices/pci0000:86/0000:86:00.0/resource", resource);
    const auto ok = check(preflightOn(fx, Mode::kVmVgpu), "gpu.sriov");
    CHECK(ok.status == CheckStatus::kPass);
    CHECK_THAT(ok.detail, Catch::Contains("0000:86:00.0: 18 VFs"));
  }
  SECTION("sriov_totalvfs 0 is the same failure") {
    fx.write("sys/devices/pci0000:86/0000:86:00.0/sriov_totalvfs", "0\n");
    CHECK_THAT(check(preflightOn(fx, Mode::kVmVgpu), "gpu.sriov").detail,
               Catch::EndsWith(": sriov_totalvfs is 0"));
  }
  SECTION("only the SR-IOV A10 and the T4 selected") {
    SelectionOptions sel;
    sel.devices = {*parseBdf("0000:3b:00.0"), *parseBdf("0000:af:00.0")};
    auto ok = preflightOn(fx, Mode::kVmVgpu, sel);
    CHECK(check(ok, "gpu.sriov").status == CheckStatus::kPass);
    CHECK(check(ok, "gpu.sriov").detail ==
          "0000:3b:00.0: 32 VFs; 0000:af:00.0: pre-Ampere, vGPU uses mdev on the PF");
  }
}

TEST_CASE("a boot VGA GPU held by efifb warns with the sysfb remedy", "[preflight]") {
  Fixture fx("preflight-intel");
  fx.write("sys/devices/pci0000:3b/0000:3b:00.0/boot_vga", "1\n");
  fx.write("proc/iomem",
           "90000000-9fffffff : PCI Bus 0000:00\n"
           "  92000000-92ffffff : PCI Bus 0000:3b\n"
           "    92000000-92ffffff : 0000:3b:00.0\n"
           "      92000000-922fffff : BOOTFB\n");
  const auto& b = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.boot-vga");
  CHECK(b.status == CheckStatus::kWarn);
  CHECK(b.detail ==
        "a firmware framebuffer holds the boot VGA GPU 0000:3b:00.0 (BOOTFB): vfio-pci cannot "
        "reserve its BAR (\"BAR 0: can't reserve\")");
  CHECK_THAT(b.remedy,
             Catch::StartsWith("add \"initcall_blacklist=sysfb_init\" to GRUB_CMDLINE_LINUX"));
}

TEST_CASE("gpu.bars: 128 GiB BARs need a 64-bit PCI window larger than the default",
          "[preflight]") {
  Fixture fx("hgx-h100");
  const auto b = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.bars");
  CHECK(b.status == CheckStatus::kWarn);
  CHECK_THAT(b.detail,
             Catch::StartsWith("0000:18:00.0: BAR2 128 GiB, 129 GiB in all; 0000:2a:00.0: BAR2 "
                               "128 GiB, 129 GiB in all;"));
  CHECK_THAT(b.detail, Catch::Contains("(kubevirt/kubevirt issue 11093)"));
  CHECK_THAT(b.remedy, Catch::StartsWith("give the VM a 64-bit PCI window of at least 256 GiB per "
                                         "GPU (2048 GiB for all 8 in one VM): QEMU -global "
                                         "q35-pcihost.pci-hole64-size=256G"));
  CHECK(check(preflightOn(fx, Mode::kVmVgpu), "gpu.bars").status == CheckStatus::kSkip);

  SECTION("a 24 GiB card fits the default window: a fact, not a warning") {
    SelectionOptions one;
    one.devices = {*parseBdf("0000:18:00.0")};
    fx.write("sys/devices/pci0000:18/0000:18:00.0/resource",
             "0x000000009c000000 0x000000009cffffff 0x0000000000040200\n"
             "0x0000220000000000 0x00002205ffffffff 0x000000000014220c\n");
    const auto i = check(preflightOn(fx, Mode::kVmPassthrough, one), "gpu.bars");
    CHECK(i.status == CheckStatus::kInfo);
    CHECK(i.detail ==
          "0000:18:00.0: BAR1 24 GiB, 25 GiB in all: the VM must map them as 64-bit MMIO above 4 "
          "GiB (within the 32 GiB 64-bit PCI window QEMU and OVMF give by default, one GPU per VM; "
          "all 25 GiB in one VM)");
  }
  SECTION("small BARs pass; no resource file is not a guess") {
    Fixture a10("preflight-intel");
    CHECK(check(preflightOn(a10, Mode::kVmPassthrough), "gpu.bars").detail ==
          "the selected GPUs have no readable resource file in sysfs");
    a10.write("sys/devices/pci0000:3b/0000:3b:00.0/resource",
              "0x00000000c4000000 0x00000000c4ffffff 0x0000000000040200\n"
              "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
              "0x000000b000000000 0x000000b00fffffff 0x000000000014220c\n");
    CHECK(check(preflightOn(a10, Mode::kVmPassthrough), "gpu.bars").status == CheckStatus::kPass);
  }
}
