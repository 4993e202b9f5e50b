// Preflight on fixture hosts: one scenario per failure the issue lists, asserting the status,
// the detail and the exact remedy a user sees.
#include "checks/preflight.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

namespace {

// Reads the fixture the way cmdPreflight reads a host, with the fake module index.
PreflightReport preflightOn(const Fixture& fx, Mode mode, SelectionOptions sel = {}) {
  FakeKernel k(fx.root());
  FakeModules mods(k);
  auto snap = readSnapshot(k);
  const std::string release = snap ? snap->kernelRelease : "";
  const PlatformFacts platform = readPlatform(k, release, mods, preflightModules(sel.hostDriver));
  const BootConfig boot = readBootConfig(k);
  HostFacts facts{snap ? &*snap : nullptr, snap ? "" : snap.error().describe(), platform, boot,
                  readTrimmed(k, "proc/cmdline").value_or("")};
  auto r = preflightHost(facts, PreflightRequest{mode, sel});
  REQUIRE(r);
  return *r;
}

// A copy, so that check(preflightOn(...), id) outlives the report.
CheckResult check(const PreflightReport& r, std::string_view id) {
  const auto* c = r.find(id);
  INFO("check " << id);
  REQUIRE(c != nullptr);
  return *c;
}

std::string statuses(const PreflightReport& r) {
  std::string s;
  for (const auto& c : r.checks) s += c.id + "=" + std::string(toString(c.status)) + " ";
  return s;
}

const std::string kIntelRemedy =
    "add \"intel_iommu=on iommu=pt\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run "
    "update-grub "
    "(or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot";

}  // namespace

TEST_CASE("an Intel host ready for vm-passthrough passes every check", "[preflight]") {
  Fixture fx("preflight-intel");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  INFO(statuses(r));
  CHECK_FALSE(r.failed());
  CHECK(r.summary().warn == 0);
  for (const auto& c : r.checks) {
    INFO(c.id << ": " << c.detail);
    CHECK((c.status == CheckStatus::kPass || c.status == CheckStatus::kSkip));
    CHECK(c.remedy.empty());
  }
  CHECK(check(r, "cpu.virtualization").detail == "vmx (Intel VT-x) present, GenuineIntel");
  CHECK(check(r, "iommu.firmware").detail == "ACPI DMAR table present (Intel VT-d)");
  CHECK(check(r, "iommu.kernel").detail == "4 IOMMU groups, units dmar0, dmar1");
  CHECK(check(r, "iommu.interrupt-remapping").detail ==
        "4 of 5 interrupts in /proc/interrupts are remapped (IR-)");
  CHECK(check(r, "iommu.groups").detail == "0000:3b:00.0: group 30 (2 functions)");
  // The BMC's VGA holds efifb, not the A10.
  CHECK(check(r, "gpu.boot-vga").detail == "no selected GPU is the boot VGA device");
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

TEST_CASE("an AMD host needs no intel_iommu and passes", "[preflight]") {
  Fixture fx("preflight-amd");
  auto r = preflightOn(fx, Mode::kVmPassthrough);
  INFO(statuses(r));
  CHECK_FALSE(r.failed());
  CHECK(check(r, "cpu.virtualization").detail == "svm (AMD-V) present, AuthenticAMD");
  CHECK(check(r, "iommu.firmware").detail == "ACPI IVRS table present (AMD-Vi)");
  CHECK(check(r, "cmdline.iommu").status == CheckStatus::kPass);
  CHECK(check(r, "cmdline.iommu").detail ==
        "AMD: the kernel enables AMD-Vi by default (no amd_iommu=off)");
  CHECK(check(r, "iommu.interrupt-remapping").status == CheckStatus::kPass);
  CHECK(check(r, "cpu.kvm").detail == "/dev/kvm present (kvm_amd loaded)");
  // ids cover the L4, softdeps make vfio-pci load first.
  CHECK(check(r, "boot.persistence").status == CheckStatus::kPass);
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

TEST_CASE("nouveau loaded is a FAIL with the blacklist remedy, in every mode", "[preflight]") {
  Fixture fx("preflight-nouveau");
  for (Mode m : {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu}) {
    auto r = preflightOn(fx, m);
    const auto& n = check(r, "modules.nouveau");
    CHECK(n.status == CheckStatus::kFail);
    CHECK(n.detail == "nouveau is loaded: it claims NVIDIA GPUs before nvidia or vfio-pci");
    CHECK(n.remedy ==
          "add the lines \"blacklist nouveau\" and \"options nouveau modeset=0\" to "
          "/etc/modprobe.d/blacklist-nouveau.conf, run update-initramfs -u (or dracut -f), and "
          "reboot");
    CHECK(r.failed());
  }
}

TEST_CASE("a built-in nouveau is found through the devices it drives", "[preflight]") {
  Fixture fx("preflight-nouveau");
  fx.write("proc/modules", "kvm 16384 0 - Live 0x0\n");  // built in: not a loaded module
  const auto n = check(preflightOn(fx, Mode::kVmPassthrough), "modules.nouveau");
  CHECK(n.status == CheckStatus::kFail);
  CHECK(n.detail == "nouveau (built in) drives 0000:3b:00.0");
  CHECK_THAT(n.remedy,
             Catch::StartsWith(
                 "add \"modprobe.blacklist=nouveau nouveau.modeset=0\" to GRUB_CMDLINE_LINUX"));
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

TEST_CASE("lockdown warns for vm-vgpu when the vGPU manager is not loaded", "[preflight]") {
  Fixture fx("preflight-intel");
  fx.write("sys/kernel/security/lockdown", "none [integrity] confidentiality\n");
  auto r = preflightOn(fx, Mode::kVmVgpu);
  const auto& l = check(r, "kernel.lockdown");
  CHECK(l.status == CheckStatus::kWarn);
  CHECK(l.detail ==
        "kernel lockdown is integrity: an unsigned nvidia_vgpu_vfio module will be refused");
  CHECK_THAT(l.remedy, Catch::Contains("mokutil --import"));
  CHECK(check(r, "modules.vgpu").status == CheckStatus::kWarn);
  // vfio-pci is in-tree and signed: passthrough does not care.
  CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "kernel.lockdown").status ==
        CheckStatus::kSkip);
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
      CHECK(r.checks.size() == 17);
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
