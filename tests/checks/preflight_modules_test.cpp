// The module checks (checks/preflight_modules.cpp): nouveau, the vGPU manager, lockdown.
#include "checks/preflight_modules.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

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

TEST_CASE("modules.vgpu-firmware: the vGPU manager's GSP firmware is installed", "[preflight]") {
  Fixture fx("preflight-vgpu");
  CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "modules.vgpu-firmware").status ==
        CheckStatus::kSkip);
  const auto none = check(preflightOn(fx, Mode::kVmVgpu), "modules.vgpu-firmware");
  CHECK(none.status == CheckStatus::kWarn);
  CHECK_THAT(none.remedy, Catch::StartsWith("reinstall the NVIDIA vGPU manager"));

  fx.write("sys/module/nvidia/version", "550.90.05\n");
  fx.write("lib/firmware/nvidia/535.54.03/gsp_ga10x.bin", "x");
  const auto missing = check(preflightOn(fx, Mode::kVmVgpu), "modules.vgpu-firmware");
  CHECK(missing.status == CheckStatus::kFail);
  CHECK(missing.detail ==
        "nvidia 550.90.05 is loaded, but /lib/firmware/nvidia/550.90.05/ has no gsp_*.bin: GPUs "
        "that need GSP firmware (Ampere and newer) fail to initialize");

  fx.write("lib/firmware/nvidia/550.90.05/gsp_ga10x.bin", "x");
  fx.write("lib/firmware/nvidia/550.90.05/gsp_tu10x.bin", "x");
  const auto ok = check(preflightOn(fx, Mode::kVmVgpu), "modules.vgpu-firmware");
  CHECK(ok.status == CheckStatus::kPass);
  CHECK(ok.detail ==
        "nvidia 550.90.05: /lib/firmware/nvidia/550.90.05/ has gsp_ga10x.bin, gsp_tu10x.bin");

  SECTION("not loaded: the installed versions, as a fact") {
    std::filesystem::remove(fx.path("sys/module/nvidia/version"));
    const auto info = check(preflightOn(fx, Mode::kVmVgpu), "modules.vgpu-firmware");
    CHECK(info.status == CheckStatus::kInfo);
    CHECK(info.detail ==
          "nvidia is not loaded; GSP firmware installed for 535.54.03, 550.90.05: it must match "
          "the vGPU manager's version");
  }
}
