// Image preflight on image roots: no sys/, no proc/, only configuration and installed kernels.
#include "checks/image.hpp"

#include <catch2/catch.hpp>

#include "drivers/seam/kmod.hpp"
#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

namespace {

PreflightReport imageOn(const Fixture& fx, Mode mode, SelectionOptions sel = {}) {
  RootHost host(fx.root());
  const BootConfig boot = readBootConfig(host);
  const auto kernels =
      readImageKernels(host, preflightModules(sel.hostDriver),
                       [&](const std::string& r) { return makeKmodLoader(host, r); });
  return preflightImage(ImageFacts{boot, kernels}, PreflightRequest{mode, sel});
}

CheckResult check(const PreflightReport& r, std::string_view id) {
  const auto* c = r.find(id);
  INFO("check " << id);
  REQUIRE(c != nullptr);
  return *c;
}

}  // namespace

TEST_CASE("an image root without the kernel arguments fails with the GRUB line",
          "[preflight][image]") {
  Fixture fx("preflight-image-bare");
  REQUIRE_FALSE(std::filesystem::exists(fx.path("sys")));
  auto r = imageOn(fx, Mode::kVmPassthrough);
  CHECK(r.image);
  CHECK(r.failed());
  const auto& c = check(r, "cmdline.iommu");
  CHECK(c.status == CheckStatus::kFail);
  CHECK(c.detail ==
        "intel_iommu=on is in none of etc/default/grub (GRUB_CMDLINE_LINUX, "
        "GRUB_CMDLINE_LINUX_DEFAULT): "
        "Intel nodes boot with the IOMMU off (harmless on AMD, which enables AMD-Vi itself)");
  CHECK(c.remedy ==
        "add \"intel_iommu=on iommu=pt\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run "
        "update-grub (or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot");
  CHECK(check(r, "cmdline.iommu-pt").status == CheckStatus::kWarn);
  // The kernel is there with vfio (text modules.dep, .ko.xz names).
  CHECK(check(r, "image.kernels").detail == "6.1.0-18-amd64");
  CHECK(check(r, "modules.vfio").status == CheckStatus::kPass);
  CHECK(check(r, "iommu.kernel").status == CheckStatus::kPass);
  // nouveau is installed and not blacklisted.
  CHECK(check(r, "modules.nouveau").status == CheckStatus::kWarn);
  CHECK(check(r, "boot.persistence").status == CheckStatus::kWarn);
  // Hardware checks say why they are skipped.
  for (auto id :
       {"cpu.virtualization", "iommu.firmware", "gpu.present", "iommu.groups", "gpu.boot-vga"}) {
    INFO(id);
    CHECK(check(r, id).status == CheckStatus::kSkip);
    CHECK(check(r, id).detail == "needs the hardware: run 'hostprep preflight' on the node");
  }
}

TEST_CASE("a complete image root passes", "[preflight][image]") {
  Fixture fx("preflight-image-ready");
  for (Mode m : {Mode::kVmPassthrough, Mode::kContainer}) {
    auto r = imageOn(fx, m);
    for (const auto& c : r.checks) {
      INFO(toString(m) << " " << c.id << ": " << c.detail);
      if (m == Mode::kVmPassthrough) CHECK(c.status != CheckStatus::kWarn);
      CHECK(c.status != CheckStatus::kFail);
    }
  }
  auto r = imageOn(fx, Mode::kVmPassthrough);
  CHECK_FALSE(r.failed());
  // The grub.d snippet appends to GRUB_CMDLINE_LINUX.
  CHECK(check(r, "cmdline.iommu").detail ==
        "intel_iommu=on in etc/default/grub + etc/default/grub.d/50-hostprep.cfg "
        "(GRUB_CMDLINE_LINUX, "
        "GRUB_CMDLINE_LINUX_DEFAULT)");
  CHECK(check(r, "modules.nouveau").detail == "blacklisted in modprobe.d");
  CHECK_THAT(check(r, "boot.persistence").detail,
             Catch::StartsWith(
                 "hostprep-prepare.service enabled (etc/systemd/system/sysinit.target.wants/"));
  // With --gpu-ids the ids must cover them.
  SelectionOptions sel;
  sel.gpuIds = {PciId{0x10de, 0x2331}};
  const auto& p = check(imageOn(fx, Mode::kVmPassthrough, sel), "boot.persistence");
  CHECK(p.status == CheckStatus::kWarn);
  CHECK_THAT(p.detail, Catch::StartsWith("vfio-pci ids at boot miss 10de:2331"));
}

TEST_CASE("image roots: BLS entries, kernel-install, intremap=off, no kernel",
          "[preflight][image]") {
  Fixture fx("preflight-image-bare");
  SECTION("a stale BLS entry without the argument warns") {
    fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt\"\n");
    fx.write("boot/loader/entries/abc-6.1.0.conf",
             "title Fedora\nversion 6.1.0\nlinux /vmlinuz-6.1.0\noptions root=UUID=1 ro\n");
    const auto& c = check(imageOn(fx, Mode::kVmPassthrough), "cmdline.iommu");
    CHECK(c.status == CheckStatus::kWarn);
    CHECK_THAT(c.detail, Catch::EndsWith("but not in boot/loader/entries/abc-6.1.0.conf"));
    CHECK_THAT(c.remedy, Catch::Contains("grubby --update-kernel=ALL --args=\"intel_iommu=on\""));
  }
  SECTION("kernel-install's etc/kernel/cmdline") {
    std::filesystem::remove(fx.path("etc/default/grub"));
    fx.write("etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n");
    CHECK(check(imageOn(fx, Mode::kVmPassthrough), "cmdline.iommu").status == CheckStatus::kPass);
  }
  SECTION("no command line configured at all") {
    std::filesystem::remove(fx.path("etc/default/grub"));
    const auto& c = check(imageOn(fx, Mode::kVmPassthrough), "cmdline.iommu");
    CHECK(c.status == CheckStatus::kFail);
    CHECK_THAT(c.detail, Catch::StartsWith("no kernel command line configured"));
  }
  SECTION("intremap=off fails the interrupt remapping check") {
    fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"intel_iommu=on intremap=off\"\n");
    const auto& c = check(imageOn(fx, Mode::kVmPassthrough), "iommu.interrupt-remapping");
    CHECK(c.status == CheckStatus::kFail);
    CHECK_THAT(c.remedy, Catch::StartsWith("remove \"intremap=off\" from etc/default/grub"));
    // nointremap does the same (drivers/iommu/irq_remapping.c, setup_nointremap()).
    fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"intel_iommu=on nointremap\"\n");
    const auto& n = check(imageOn(fx, Mode::kVmPassthrough), "iommu.interrupt-remapping");
    CHECK(n.status == CheckStatus::kFail);
    CHECK_THAT(n.remedy, Catch::StartsWith("remove \"nointremap\" from etc/default/grub"));
  }
  SECTION("an AMD-only kernel needs no intel_iommu=on") {
    fx.write("boot/config-6.1.0-18-amd64",
             "CONFIG_IOMMU_SUPPORT=y\n# CONFIG_INTEL_IOMMU is not set\nCONFIG_AMD_IOMMU=y\n"
             "CONFIG_KVM=m\nCONFIG_KVM_AMD=m\nCONFIG_VFIO=m\nCONFIG_VFIO_PCI=m\n");
    auto r = imageOn(fx, Mode::kVmPassthrough);
    const auto& c = check(r, "cmdline.iommu");
    CHECK(c.status == CheckStatus::kPass);
    CHECK(c.detail ==
          "no installed kernel drives Intel VT-d (CONFIG_INTEL_IOMMU not set in 6.1.0-18-amd64): "
          "AMD-Vi and the Arm SMMU are enabled without a kernel argument");
    // An off switch still fails it.
    fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"amd_iommu=off\"\n");
    CHECK(check(imageOn(fx, Mode::kVmPassthrough), "cmdline.iommu").status == CheckStatus::kFail);
  }
  SECTION("an arm64 kernel: KVM built in, the Arm SMMU, iommu.passthrough=1") {
    std::filesystem::remove_all(fx.path("lib/modules/6.1.0-18-amd64"));
    std::filesystem::remove(fx.path("boot/config-6.1.0-18-amd64"));
    fx.write("boot/config-6.1.0-18-arm64",
             "CONFIG_ARM64=y\nCONFIG_IOMMU_SUPPORT=y\nCONFIG_ARM_SMMU_V3=y\nCONFIG_KVM=y\n"
             "CONFIG_VFIO=m\nCONFIG_VFIO_IOMMU_TYPE1=m\nCONFIG_VFIO_PCI=m\n");
    fx.write("lib/modules/6.1.0-18-arm64/modules.dep",
             "kernel/drivers/vfio/vfio.ko.xz:\n"
             "kernel/drivers/vfio/vfio_iommu_type1.ko.xz: kernel/drivers/vfio/vfio.ko.xz\n"
             "kernel/drivers/vfio/pci/vfio-pci-core.ko.xz: kernel/drivers/vfio/vfio.ko.xz\n"
             "kernel/drivers/vfio/pci/vfio-pci.ko.xz: kernel/drivers/vfio/pci/vfio-pci-core.ko.xz "
             "kernel/drivers/vfio/vfio.ko.xz\n");
    fx.write("lib/modules/6.1.0-18-arm64/modules.builtin", "kernel/arch/arm64/kvm/kvm.ko\n");
    auto r = imageOn(fx, Mode::kVmPassthrough);
    INFO(hostprep::test::statuses(r));
    CHECK(check(r, "cpu.kvm").status == CheckStatus::kPass);
    CHECK(check(r, "iommu.kernel").status == CheckStatus::kPass);
    CHECK(check(r, "cmdline.iommu").status == CheckStatus::kPass);
    const auto& pt = check(r, "cmdline.iommu-pt");
    CHECK(pt.status == CheckStatus::kWarn);
    CHECK(pt.detail ==
          "iommu.passthrough=1 is not in etc/default/grub (GRUB_CMDLINE_LINUX, "
          "GRUB_CMDLINE_LINUX_DEFAULT)");
    // iommu=pt is x86's: an arm64 kernel ignores it.
    fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"iommu=pt\"\n");
    CHECK(check(imageOn(fx, Mode::kVmPassthrough), "cmdline.iommu-pt").status ==
          CheckStatus::kWarn);
    fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"iommu.passthrough=1\"\n");
    CHECK(check(imageOn(fx, Mode::kVmPassthrough), "cmdline.iommu-pt").status ==
          CheckStatus::kPass);
  }
  SECTION("no kernel installed") {
    std::filesystem::remove_all(fx.path("lib/modules"));
    auto r = imageOn(fx, Mode::kVmPassthrough);
    CHECK(check(r, "image.kernels").status == CheckStatus::kFail);
    CHECK(check(r, "modules.vfio").status == CheckStatus::kFail);
    CHECK(check(r, "modules.vgpu").status == CheckStatus::kSkip);
  }
  SECTION("vfio missing from the installed kernel") {
    fx.write("lib/modules/6.1.0-18-amd64/modules.dep", "kernel/arch/x86/kvm/kvm.ko:\n");
    fx.write("boot/config-6.1.0-18-amd64", "CONFIG_INTEL_IOMMU=y\n# CONFIG_VFIO is not set\n");
    const auto& c = check(imageOn(fx, Mode::kVmPassthrough), "modules.vfio");
    CHECK(c.status == CheckStatus::kFail);
    CHECK(
        c.detail ==
        "vfio, vfio_pci, vfio_iommu_type1 not available for kernel 6.1.0-18-amd64 (not loaded, not "
        "built in, not in modules.dep)");
  }
  SECTION("an empty directory is an image with nothing in it, not a crash") {
    Fixture empty;
    auto r = imageOn(empty, Mode::kVmVgpu);
    CHECK(r.failed());
    CHECK(r.checks.size() == 26);
    // The devices rules need PCI devices: an image reports the mix check as not checkable.
    const auto* mix = r.find("gpu.mode-mix");
    REQUIRE(mix);
    CHECK(mix->status == CheckStatus::kSkip);
    CHECK(mix->detail ==
          "an image has no PCI devices to resolve the config's devices rules against");
  }
}
