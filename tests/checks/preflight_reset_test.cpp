// gpu.reset (checks/preflight_reset.cpp): how each selected GPU and companion can be reset on its
// way back from a VM, and what makes that return risky.
#include "checks/preflight_reset.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

SelectionOptions only(const char* bdf) {
  SelectionOptions sel;
  sel.devices = {*parseBdf(bdf)};
  return sel;
}

DeviceRule byBdf(const char* bdf, Mode m) {
  DeviceMatch match;
  match.bdf = parseBdf(bdf);
  return DeviceRule{match, m};
}

}  // namespace

TEST_CASE("gpu.reset: own methods, a bus reset, and a GPU whose bus carries a NIC",
          "[preflight][reset]") {
  // return-from-vm: 86 has FLR on both functions; 3b (GPU + audio, alone on their bus) has no
  // method but a bridge with reset_subordinate; af shares its bus with a NIC of another group.
  Fixture fx("return-from-vm");
  for (Mode m : {Mode::kVmPassthrough, Mode::kVmVgpu}) {
    INFO(toString(m));
    const auto c = check(preflightOn(fx, m), "gpu.reset");
    CHECK(c.status == CheckStatus::kWarn);
    CHECK(c.title == "Reset on the way back from a VM");
    CHECK_THAT(c.detail,
               Catch::StartsWith(
                   "no way to reset 0000:af:00.0: no reset method, and bus 0000:af also carries "
                   "0000:af:00.1, which a bus reset would reset too: a GPU that a VM leaves in a "
                   "bad state goes back to its host driver unreset, whose probe can then fail "
                   "until the host reboots (gnif/vendor-reset issue 38, lxc/incus issue 30)"));
    CHECK_THAT(c.detail,
               Catch::Contains("; reset on the way back: 0000:3b:00.0, 0000:3b:00.1: bus reset "
                               "through 0000:00:01.0; 0000:86:00.0, 0000:86:00.1: flr"));
    CHECK(c.remedy ==
          "keep bus 0000:af to the GPU's own functions: move 0000:af:00.1 (or the GPU) to another "
          "slot; otherwise plan a reboot of the node whenever it leaves VM mode");
  }
  // Containers get no GPU back from a VM.
  const auto container = check(preflightOn(fx, Mode::kContainer), "gpu.reset");
  CHECK(container.status == CheckStatus::kSkip);
  CHECK(container.detail == "not needed in container mode: no VM hands a GPU back");
}

TEST_CASE("gpu.reset: INFO listing the methods of a GPU that has them", "[preflight][reset]") {
  Fixture fx("return-from-vm");
  const auto c = check(preflightOn(fx, Mode::kVmPassthrough, only("0000:86:00.0")), "gpu.reset");
  CHECK(c.status == CheckStatus::kInfo);
  CHECK(c.detail ==
        "prepare resets each on its way back from a VM: 0000:86:00.0, 0000:86:00.1: flr");
  CHECK(c.remedy.empty());
  // The same on the snapshot prepare reads whole.
  CHECK(check(preflightOnFullSnapshot(fx, Mode::kVmPassthrough, only("0000:86:00.0")), "gpu.reset")
            .detail == c.detail);
}

TEST_CASE("gpu.reset: a bus reset, d3cold_allowed and vfio-pci's disable_idle_d3",
          "[preflight][reset]") {
  // 3b: d3cold_allowed 1, power_state D0, vfio_pci loaded without a parameters directory.
  Fixture fx("return-from-vm");
  const std::string d3 =
      "; d3cold_allowed is 1 on 0000:3b:00.0 and vfio-pci's disable_idle_d3 defaults to N: "
      "vfio-pci puts an idle GPU in a D3 low power state (drivers/vfio/pci/vfio_pci.c, "
      "disable_idle_d3: \"Disable using the PCI D3 low power state for idle, unused devices\"), "
      "D3cold where the platform can cut the slot's power, and a GPU that does not come back from "
      "D3cold reads all ones until the host reboots (\"Unable to change power state from D3cold "
      "to D0, device inaccessible\": bryansteiner/gpu-passthrough-tutorial issue 39, "
      "gnif/vendor-reset issue 76)";
  auto run = [&] {
    return check(preflightOn(fx, Mode::kVmPassthrough, only("0000:3b:00.0")), "gpu.reset");
  };
  const auto c = run();
  CHECK(c.status == CheckStatus::kInfo);
  CHECK(c.detail ==
        "prepare resets each on its way back from a VM: 0000:3b:00.0, 0000:3b:00.1: bus reset "
        "through 0000:00:01.0" +
            d3);

  SECTION("disable_idle_d3=N says so") {
    fx.write("sys/module/vfio_pci/parameters/disable_idle_d3", "N\n");
    CHECK_THAT(run().detail, Catch::Contains("and vfio-pci's disable_idle_d3 is N: "));
  }
  SECTION("disable_idle_d3=Y keeps idle devices in D0: nothing to say") {
    fx.write("sys/module/vfio_pci/parameters/disable_idle_d3", "Y\n");
    const auto r = run();
    CHECK(r.status == CheckStatus::kInfo);
    CHECK_THAT(r.detail, !Catch::Contains("d3cold_allowed"));
  }
  SECTION("a GPU the kernel shows in D3cold is a WARN with the parameter to set") {
    fx.write("sys/devices/pci0000:3b/0000:3b:00.0/power_state", "D3cold\n");
    const auto r = run();
    CHECK(r.status == CheckStatus::kWarn);
    CHECK_THAT(r.detail, Catch::EndsWith("; 0000:3b:00.0 is in D3cold now (power_state)"));
    CHECK(r.remedy ==
          "keep idle GPUs on vfio-pci in D0: 'options vfio-pci disable_idle_d3=1' in "
          "/etc/modprobe.d/ (at once: echo Y > /sys/module/vfio_pci/parameters/disable_idle_d3), "
          "or echo 0 > /sys/bus/pci/devices/<BDF>/d3cold_allowed at every boot");
  }
  SECTION("a bridge without reset_subordinate: the kernel that has it") {
    std::filesystem::remove(fx.path("sys/devices/pci0000:00/0000:00:01.0/reset_subordinate"));
    const auto r = run();
    CHECK(r.status == CheckStatus::kWarn);
    CHECK_THAT(r.detail,
               Catch::StartsWith("no way to reset 0000:3b:00.0, 0000:3b:00.1: no reset method, "
                                 "and the kernel offers no bus reset through 0000:00:01.0 "
                                 "(reset_subordinate: Linux 6.13, 6.12.5, 6.1.120): "));
    CHECK(r.remedy ==
          "run a kernel that offers reset_subordinate (Linux 6.13, 6.12.5, 6.1.120 or later) so "
          "that bus 0000:3b can be reset through 0000:00:01.0; otherwise plan a reboot of the "
          "node whenever it leaves VM mode");
  }
}

TEST_CASE("gpu.reset: a kernel before 5.15 has reset but no reset_method", "[preflight][reset]") {
  Fixture fx(Fixture::HostYaml{R"(
kernel: 5.10.0-28-amd64
modules: [vfio, vfio_iommu_type1, vfio_pci]
devices:
  - {bdf: "0000:00:01.0", id: "8086:2030", class: "060400", group: 1, secondary_bus: 59}
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", group: 30, reset_methods: "flr", no_reset_method_file: true}
  - {bdf: "0000:3b:00.1", id: "10de:1aef", class: "040300", group: 30}
)"});
  const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.reset");
  CHECK(c.status == CheckStatus::kWarn);
  CHECK_THAT(c.detail,
             Catch::StartsWith("no way to reset 0000:3b:00.1: no reset method, and the kernel "
                               "offers no bus reset through 0000:00:01.0"));
  CHECK_THAT(c.detail, Catch::EndsWith("; reset on the way back: 0000:3b:00.0: reset (no "
                                       "reset_method before Linux 5.15: the kernel picks the "
                                       "method)"));
}

TEST_CASE("gpu.reset: a GPU without a method on a root bus", "[preflight][reset]") {
  Fixture fx(Fixture::HostYaml{R"(
modules: [vfio, vfio_iommu_type1, vfio_pci]
devices:
  - {bdf: "0000:00:02.0", id: "10de:2236", class: "030200", group: 2}
)"});
  const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.reset");
  CHECK(c.status == CheckStatus::kWarn);
  CHECK_THAT(c.detail, Catch::StartsWith("no way to reset 0000:00:02.0: no reset method, and no "
                                         "bridge above bus 0000:00 (a root bus cannot be "
                                         "reset): "));
  CHECK(c.remedy ==
        "put the GPU behind a PCIe root port or switch port that offers reset_subordinate (Linux "
        "6.13, 6.12.5, 6.1.120): sysfs shows no bridge above bus 0000:00; otherwise plan a reboot "
        "of the node whenever it leaves VM mode");
}

TEST_CASE("gpu.reset on a mixed node judges the VM GPUs only", "[preflight][reset][mixed]") {
  Fixture fx("return-from-vm");
  // af (no way to reset) in container mode, the others in vm-passthrough.
  auto r = preflightWithRules(fx, Mode::kVmPassthrough, {byBdf("0000:af:00.0", Mode::kContainer)});
  REQUIRE(r.mixed());
  const auto c = check(r, "gpu.reset");
  CHECK(c.status == CheckStatus::kInfo);
  CHECK_THAT(c.detail, Catch::StartsWith("vm-passthrough: prepare resets each on its way back "
                                         "from a VM: 0000:3b:00.0, 0000:3b:00.1: bus reset"));
  CHECK_THAT(c.detail, !Catch::Contains("0000:af:00.0"));
  // The other way round: the GPU without a reset is the VM GPU.
  auto w = preflightWithRules(fx, Mode::kContainer, {byBdf("0000:af:00.0", Mode::kVmPassthrough)});
  const auto cw = check(w, "gpu.reset");
  CHECK(cw.status == CheckStatus::kWarn);
  CHECK_THAT(cw.detail, Catch::StartsWith("vm-passthrough: no way to reset 0000:af:00.0"));
  CHECK_THAT(cw.detail, !Catch::Contains("0000:86:00.0"));
}

// As the VM suite's edu D (tests/vm/README.md, "Resets"): a GPU whose group, slot and bus hold a
// NIC. prepare refuses the group, and would never reset a bus that carries a device it does not
// move; the kernel lists "bus" for the GPU (function 0), which fails beside the NIC.
TEST_CASE("gpu.reset: a NIC in the GPU's group is not moved with it", "[preflight][reset]") {
  Fixture fx(Fixture::HostYaml{R"(
modules: [ixgbe, vfio, vfio_iommu_type1, vfio_pci]
devices:
  - {bdf: "0000:00:07.0", id: "1b36:000c", class: "060400", group: 6, secondary_bus: 2, reset_subordinate: true}
  - {bdf: "0000:02:00.0", id: "10de:2236", class: "030200", group: 12, reset_methods: "bus"}
  - {bdf: "0000:02:00.1", id: "8086:10d3", class: "020000", driver: ixgbe, group: 12}
)"});
  const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.reset");
  CHECK(c.status == CheckStatus::kWarn);
  CHECK_THAT(c.detail, Catch::StartsWith("no way to reset 0000:02:00.0: no reset method"));
  CHECK_THAT(c.detail, Catch::Contains("bus 0000:02 also carries 0000:02:00.1"));
}
