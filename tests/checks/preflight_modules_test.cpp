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
