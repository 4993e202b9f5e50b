// gpu.cc (checks/preflight_cc.cpp): confidential computing on the host and the GPUs.
#include "checks/preflight_cc.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

CheckResult ccCheck(const Fixture& fx, Mode mode, CcMode cc) {
  FakeKernel k(fx.root());
  FakeModules mods(k);
  auto snap = readSnapshot(k);
  REQUIRE(snap);
  const PlatformFacts platform =
      readPlatform(k, snap->kernelRelease, mods, preflightModules("nvidia"));
  const BootConfig boot = readBootConfig(k);
  PreflightRequest req{mode, {}, cc};
  auto r = preflightHost(HostFacts{&*snap, "", platform, boot, snap->cmdlineText}, req);
  REQUIRE(r);
  return check(*r, "gpu.cc");
}

}  // namespace

TEST_CASE("CC-capable GPUs by device id: Hopper and newer", "[preflight][cc]") {
  CHECK(ccCapable(PciId{0x10de, 0x2330}) == CcCapable::kHopper);     // H100 SXM5
  CHECK(ccCapable(PciId{0x10de, 0x2335}) == CcCapable::kHopper);     // H200
  CHECK(ccCapable(PciId{0x10de, 0x2901}) == CcCapable::kBlackwell);  // B200
  CHECK(ccCapable(PciId{0x10de, 0x2236}) == CcCapable::kNo);         // A10
  CHECK(ccCapable(PciId{0x10de, 0x20b5}) == CcCapable::kNo);         // A100 80GB
  CHECK(ccCapable(PciId{0x10de, 0x26b9}) == CcCapable::kNo);         // L40S
  CHECK(ccCapable(PciId{0x1002, 0x2330}) == CcCapable::kNo);         // not NVIDIA
}

TEST_CASE("gpu.cc: skipped unless asked for, then TDX or SEV-SNP and Hopper GPUs",
          "[preflight][cc]") {
  Fixture fx("hgx-h100");
  CHECK(ccCheck(fx, Mode::kVmPassthrough, CcMode::kOff).detail ==
        "confidential computing not asked for (cc-mode off)");
  CHECK(ccCheck(fx, Mode::kContainer, CcMode::kOn).status == CheckStatus::kSkip);

  const auto none = ccCheck(fx, Mode::kVmPassthrough, CcMode::kOn);
  CHECK(none.status == CheckStatus::kFail);
  CHECK(none.detail ==
        "cc-mode on, but the host runs no confidential VMs: neither kvm_intel's tdx nor kvm_amd's "
        "sev_snp parameter exists (module not loaded, or a kernel without them)");
  CHECK_THAT(none.remedy, Catch::StartsWith("enable TDX in the BIOS/UEFI setup"));

  fx.write("sys/module/kvm_intel/parameters/tdx", "N\n");
  CHECK(ccCheck(fx, Mode::kVmPassthrough, CcMode::kOn).detail ==
        "cc-mode on, but the host runs no confidential VMs: kvm_intel tdx=N");

  fx.write("sys/module/kvm_intel/parameters/tdx", "Y\n");
  const auto ok = ccCheck(fx, Mode::kVmPassthrough, CcMode::kPpcie);
  CHECK(ok.status == CheckStatus::kPass);
  CHECK_THAT(ok.detail, Catch::StartsWith("cc-mode ppcie: TDX enabled (kvm_intel tdx=Y); "
                                          "CC-capable: 0000:18:00.0 Hopper, 0000:2a:00.0 Hopper"));
}

TEST_CASE("gpu.cc: an Ampere GPU cannot run in CC mode", "[preflight][cc]") {
  Fixture fx("preflight-amd");
  fx.write("sys/module/kvm_amd/parameters/sev_snp", "Y\n");
  const auto c = ccCheck(fx, Mode::kVmPassthrough, CcMode::kOn);
  CHECK(c.status == CheckStatus::kFail);
  CHECK_THAT(c.detail, Catch::StartsWith("cc-mode on: 0000:"));
  CHECK_THAT(c.detail, Catch::EndsWith("cannot run in CC mode (Hopper and newer)"));
}
