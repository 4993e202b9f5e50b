// The CPU checks (checks/preflight_cpu.cpp): VT-x/AMD-V and KVM.
#include "checks/preflight_cpu.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("VT-x or AMD-V and /dev/kvm pass, naming the vendor and the KVM module", "[preflight]") {
  Fixture intel("preflight-intel");
  auto i = preflightOn(intel, Mode::kVmPassthrough);
  CHECK(check(i, "cpu.virtualization").detail == "vmx (Intel VT-x) present, GenuineIntel");
  CHECK(check(i, "cpu.kvm").detail == "/dev/kvm present (kvm_intel loaded)");
  Fixture amd("preflight-amd");
  auto a = preflightOn(amd, Mode::kVmPassthrough);
  CHECK(check(a, "cpu.virtualization").detail == "svm (AMD-V) present, AuthenticAMD");
  CHECK(check(a, "cpu.kvm").detail == "/dev/kvm present (kvm_amd loaded)");
  // Containers need neither.
  auto c = preflightOn(intel, Mode::kContainer);
  CHECK(check(c, "cpu.virtualization").detail == "not needed in container mode");
  CHECK(check(c, "cpu.kvm").status == CheckStatus::kSkip);
}

TEST_CASE("no /dev/kvm is a FAIL that says whether the KVM module can be loaded", "[preflight]") {
  Fixture fx("preflight-intel");
  std::filesystem::remove(fx.path("dev/kvm"));
  SECTION("kvm_intel not loaded and not installed") {
    fx.write("proc/modules", "nvidia 16384 0 - Live 0x0\n");
    std::filesystem::remove_all(fx.path("sys/module/kvm_intel"));
    fx.write("lib/modules/6.1.0-test-amd64/modules.dep", "kernel/drivers/nvidia.ko:\n");
    const auto k = check(preflightOn(fx, Mode::kVmPassthrough), "cpu.kvm");
    CHECK(k.status == CheckStatus::kFail);
    CHECK(k.detail ==
          "/dev/kvm missing and kvm_intel is not available for kernel 6.1.0-test-amd64");
    CHECK_THAT(k.remedy, Catch::StartsWith("install the kernel's KVM modules"));
  }
  SECTION("kvm_intel loaded but no device node") {
    const auto k = check(preflightOn(fx, Mode::kVmPassthrough), "cpu.kvm");
    CHECK(k.status == CheckStatus::kFail);
    CHECK(k.remedy ==
          "run 'modprobe kvm_intel' and add the line \"kvm_intel\" to "
          "/etc/modules-load.d/kvm.conf so it loads at boot");
  }
}

TEST_CASE("a VM without nested virtualization is told to enable it", "[preflight]") {
  Fixture fx("preflight-guest");
  const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "cpu.virtualization");
  CHECK(c.status == CheckStatus::kFail);
  CHECK_THAT(c.detail, Catch::EndsWith("; this is a virtual machine"));
  CHECK_THAT(c.remedy, Catch::StartsWith("enable nested virtualization on the hypervisor"));
}
