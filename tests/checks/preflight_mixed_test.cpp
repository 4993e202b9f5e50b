// Preflight on a mixed node (checks/preflight.cpp, checks/preflight_persistence.cpp): each mode's
// checks on that mode's GPUs, the node checks for the union, gpu.mode-mix, and boot.persistence
// of a split.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "checks/preflight.hpp"
#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

DeviceRule byBdf(const char* bdf, Mode m) {
  DeviceRule r;
  r.match.bdf = *parseBdf(bdf);
  r.mode = m;
  return r;
}

const char* kWants = "etc/systemd/system/multi-user.target.wants/hostprep-prepare.service";

}  // namespace

TEST_CASE("a mixed node checks each mode on its own GPUs", "[preflight][mixed]") {
  Fixture fx("preflight-mixed");
  SECTION("a non-viable group on a container GPU does not fail iommu.groups") {
    // The L4 at 0000:a1:00.0 shares its group with a NIC; it stays in container mode.
    auto r =
        preflightWithRules(fx, Mode::kContainer, {byBdf("0000:3b:00.0", Mode::kVmPassthrough)});
    INFO(statuses(r));
    CHECK(r.mixed());
    CHECK(r.modeText() == "mixed (container: 4, vm-passthrough: 1)");
    CHECK_FALSE(r.failed());
    CHECK(check(r, "iommu.groups").status == CheckStatus::kPass);
    CHECK(check(r, "iommu.groups").detail ==
          "vm-passthrough: 0000:3b:00.0: group 30 (2 functions)");
    // Node checks: what the union needs; the detail names the mode that needs it.
    CHECK(check(r, "cpu.virtualization").status == CheckStatus::kPass);
    CHECK(check(r, "cpu.virtualization").detail ==
          "vm-passthrough: vmx (Intel VT-x) present, GenuineIntel");
    CHECK(check(r, "modules.host-driver").status != CheckStatus::kSkip);
    CHECK_THAT(check(r, "modules.host-driver").detail, Catch::StartsWith("container: "));
    CHECK(check(r, "modules.vgpu").status == CheckStatus::kSkip);
    // No mode needs it: one skip naming both.
    CHECK(check(r, "gpu.sriov").detail == "not needed in container or vm-passthrough mode");
    CHECK(check(r, "gpu.bars").detail ==
          "not needed in container mode; vm-passthrough: the selected GPUs have no readable "
          "resource file in sysfs");
    CHECK(check(r, "gpu.present").detail ==
          "container: 4 GPU(s): 0000:86:00.0 (10de:2236 3D controller), 0000:a1:00.0 (10de:27b8 "
          "3D controller), 0000:c1:00.0 (10de:26b9 3D controller), 0000:c2:00.0 (10de:26b9 3D "
          "controller); 1 companion function(s); vm-passthrough: 1 GPU(s): 0000:3b:00.0 "
          "(10de:2236 3D controller); 1 companion function(s)");
    CHECK(check(r, "gpu.mode-mix").status == CheckStatus::kPass);
    CHECK(check(r, "gpu.mode-mix").detail ==
          "container: 0000:86:00.0, 0000:a1:00.0, 0000:c1:00.0, 0000:c2:00.0; vm-passthrough: "
          "0000:3b:00.0: an allowed mix, and no IOMMU group holds GPUs of two modes");
    // One result per id, in the order of a single-mode report.
    auto one = preflightOn(fx, Mode::kContainer);
    REQUIRE(one.checks.size() == r.checks.size());
    for (size_t i = 0; i < r.checks.size(); ++i) CHECK(r.checks[i].id == one.checks[i].id);
  }
  SECTION("a non-viable group on a vm-passthrough GPU fails iommu.groups") {
    auto r =
        preflightWithRules(fx, Mode::kContainer, {byBdf("0000:a1:00.0", Mode::kVmPassthrough)});
    CHECK(r.failed());
    const auto g = check(r, "iommu.groups");
    CHECK(g.status == CheckStatus::kFail);
    CHECK_THAT(g.detail, Catch::StartsWith("vm-passthrough: "));
    CHECK_THAT(g.detail, Catch::Contains("0000:a2:00.0"));
    CHECK_THAT(g.remedy, Catch::StartsWith("move the GPU to a slot whose root port isolates it"));
  }
  SECTION("rules that put every GPU in one mode make a node of that mode") {
    auto r =
        preflightWithRules(fx, Mode::kVmPassthrough, {DeviceRule{DeviceMatch{}, Mode::kContainer}});
    CHECK_FALSE(r.mixed());
    CHECK(r.mode == Mode::kContainer);
    CHECK(r.modeText() == "container");
    CHECK(check(r, "gpu.mode-mix").status == CheckStatus::kSkip);
    CHECK(check(r, "gpu.mode-mix").detail ==
          "not a mixed node: every selected GPU in container mode");
  }
}

TEST_CASE("gpu.mode-mix refuses what prepare refuses", "[preflight][mixed]") {
  Fixture fx("preflight-mixed");
  SECTION("container and vm-vgpu on one node") {
    auto r = preflightWithRules(
        fx, Mode::kContainer,
        {byBdf("0000:c1:00.0", Mode::kVmVgpu), byBdf("0000:c2:00.0", Mode::kVmVgpu)});
    CHECK(r.failed());
    const auto m = check(r, "gpu.mode-mix");
    CHECK(m.status == CheckStatus::kFail);
    CHECK(m.detail ==
          "devices: container and vm-vgpu cannot share a node: one nvidia module cannot be both "
          "the datacenter driver and the vGPU manager (3 GPU(s) container, 2 GPU(s) vm-vgpu)");
    CHECK(m.remedy == "mix container with vm-passthrough, or vm-passthrough with vm-vgpu");
    CHECK(check(r, "iommu.groups").detail ==
          "not needed in container mode; not needed in vm-vgpu mode: vGPU devices get their own "
          "groups");
  }
  SECTION("two GPUs of one IOMMU group in different modes") {
    auto r =
        preflightWithRules(fx, Mode::kContainer, {byBdf("0000:c1:00.0", Mode::kVmPassthrough)});
    CHECK(r.failed());
    const auto m = check(r, "gpu.mode-mix");
    CHECK(m.status == CheckStatus::kFail);
    CHECK(m.detail ==
          "refusing to split an IOMMU group between modes: GPU 0000:c1:00.0 (10de:26b9 3D "
          "controller) (vm-passthrough) and GPU 0000:c2:00.0 (10de:26b9 3D controller) "
          "(container) share IOMMU group 80");
    CHECK(m.remedy ==
          "vfio hands a VM the whole group: give both GPUs one mode in the config's devices "
          "rules, or move one to a slot with its own group (ACS)");
  }
  SECTION("vm-passthrough and vm-vgpu, the group whole: allowed") {
    auto r = preflightWithRules(
        fx, Mode::kVmVgpu,
        {byBdf("0000:c1:00.0", Mode::kVmPassthrough), byBdf("0000:c2:00.0", Mode::kVmPassthrough)});
    CHECK(r.modeText() == "mixed (vm-passthrough: 2, vm-vgpu: 3)");
    CHECK(check(r, "gpu.mode-mix").status == CheckStatus::kPass);
  }
  SECTION("a rule that matches nothing is a warning") {
    auto r = preflightWithRules(
        fx, Mode::kContainer,
        {byBdf("0000:3b:00.0", Mode::kVmPassthrough), byBdf("0000:3b:00.0", Mode::kVmVgpu)});
    const auto m = check(r, "gpu.mode-mix");
    CHECK(m.status == CheckStatus::kWarn);
    CHECK_THAT(m.detail,
               Catch::EndsWith("; devices[1] {bdf: 0000:3b:00.0} matches no selected GPU (or "
                               "only GPUs an earlier rule took)"));
    CHECK(m.remedy == "fix or remove the rule in /etc/hostprep/config.yaml");
  }
}

TEST_CASE("boot.persistence on a split says which mechanism applies", "[preflight][mixed]") {
  Fixture fx("preflight-mixed");
  // 0000:3b:00.0 to VMs, its twin 0000:86:00.0 (the same ids) stays on nvidia.
  const std::vector<DeviceRule> shared{byBdf("0000:3b:00.0", Mode::kVmPassthrough)};
  SECTION("an id shared across modes: the unit, enabled") {
    const auto p = check(preflightWithRules(fx, Mode::kContainer, shared), "boot.persistence");
    CHECK(p.status == CheckStatus::kPass);
    CHECK(p.detail ==
          "split: hostprep-prepare.service enabled (etc/systemd/system/multi-user.target.wants/"
          "hostprep-prepare.service) hands the vm-passthrough GPUs to vfio-pci at boot by "
          "driver_override; vfio-pci ids cannot hand out only the vm-passthrough GPUs "
          "(10de:1aef,10de:2236 also belong to container GPUs)");
  }
  SECTION("an id shared across modes: the unit, not enabled") {
    std::filesystem::remove(fx.path(kWants));
    const auto p = check(preflightWithRules(fx, Mode::kContainer, shared), "boot.persistence");
    CHECK(p.status == CheckStatus::kWarn);
    CHECK(p.detail ==
          "split: vfio-pci ids cannot hand out only the vm-passthrough GPUs (10de:1aef,10de:2236 "
          "also belong to container GPUs), and hostprep-prepare.service is not enabled: after a "
          "reboot the split is lost");
    CHECK(p.remedy ==
          "run 'systemctl enable hostprep-prepare.service' (at boot it converges the split: "
          "driver_override for the vm-passthrough GPUs)");
    CHECK(p.remedy.find("vfio-pci.ids") == std::string::npos);
  }
  SECTION("vfio-pci ids that would take the container twin too") {
    fx.write("etc/modprobe.d/hostprep-vfio.conf",
             "options vfio-pci ids=10de:2236,10de:1aef\nsoftdep nvidia pre: vfio-pci\n");
    const auto p = check(preflightWithRules(fx, Mode::kContainer, shared), "boot.persistence");
    CHECK(p.status == CheckStatus::kWarn);
    CHECK(p.detail ==
          "split: the boot configuration hands 10de:1aef,10de:2236 to vfio-pci at boot "
          "(modprobe.d options vfio-pci ids=10de:2236,10de:1aef): vfio-pci would take the "
          "container GPUs with these ids too");
    CHECK(p.remedy ==
          "remove 10de:1aef,10de:2236 from the vfio-pci ids ('hostprep persist' rewrites "
          "/etc/modprobe.d/hostprep-vfio.conf without the ids GPUs of two modes share), run "
          "update-initramfs -u, and 'systemctl enable hostprep-prepare.service' (it binds the "
          "split at boot by driver_override)");
  }
  SECTION("no id shared: vfio-pci ids for the passthrough GPUs") {
    std::filesystem::remove(fx.path(kWants));
    const std::vector<DeviceRule> distinct{byBdf("0000:c1:00.0", Mode::kVmPassthrough),
                                           byBdf("0000:c2:00.0", Mode::kVmPassthrough)};
    auto p = check(preflightWithRules(fx, Mode::kContainer, distinct), "boot.persistence");
    CHECK(p.status == CheckStatus::kWarn);
    CHECK(p.detail ==
          "split, no id shared across modes: nothing hands the GPUs to vfio-pci at boot (no "
          "vfio-pci ids, softdep or hostprep-prepare.service): after a reboot the host driver "
          "takes them again");
    CHECK(p.remedy ==
          "run 'hostprep persist' (writes the vm-passthrough GPUs' ids to "
          "/etc/modprobe.d/hostprep-vfio.conf), or 'systemctl enable hostprep-prepare.service'");
    fx.write("etc/modprobe.d/hostprep-vfio.conf",
             "options vfio-pci ids=10de:26b9\nsoftdep nvidia pre: vfio-pci\n");
    p = check(preflightWithRules(fx, Mode::kContainer, distinct), "boot.persistence");
    CHECK(p.status == CheckStatus::kPass);
    CHECK(p.detail ==
          "split, no id shared across modes: modprobe.d options vfio-pci ids=10de:26b9; softdep "
          "nvidia pre: vfio-pci");
  }
}
