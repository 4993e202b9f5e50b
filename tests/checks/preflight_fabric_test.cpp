// gpu.fabric (checks/preflight_fabric.cpp) on an HGX H100 board: Fabric Manager's FABRIC_MODE
// against the workload mode.
#include "checks/preflight_fabric.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

const std::string kSwitches =
    "4 NVSwitch(es) 0000:c7:00.0, 0000:c8:00.0, 0000:c9:00.0, 0000:ca:00.0; ";

void setFabricMode(const Fixture& fx, const std::string& value) {
  fx.write("usr/share/nvidia/nvswitch/fabricmanager.cfg", "FABRIC_MODE=" + value + "\n");
}

void runFabricManager(const Fixture& fx) {
  fx.write("run/nvidia-fabricmanager/nv-fabricmanager.pid", "4242\n");
  fx.write("proc/4242/comm", "nv-fabricmanage\n");
}

}  // namespace

TEST_CASE("no NVSwitch: gpu.fabric is skipped in every mode", "[preflight][fabric]") {
  Fixture fx("preflight-intel");
  for (Mode m : {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu}) {
    const auto f = check(preflightOn(fx, m), "gpu.fabric");
    CHECK(f.status == CheckStatus::kSkip);
    CHECK(f.detail == "no NVSwitch (NVIDIA, class 0680): no NVLink fabric to manage");
  }
}

TEST_CASE("full passthrough (FABRIC_MODE=0): the NVSwitches go with the GPUs",
          "[preflight][fabric]") {
  Fixture fx("hgx-h100");
  const auto f = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric");
  CHECK(f.status == CheckStatus::kPass);
  CHECK(f.detail == kSwitches +
                        "FABRIC_MODE=0; prepare (--nvswitch auto) passes the NVSwitches through "
                        "with the GPUs");

  SECTION("no fabricmanager.cfg is the default mode 0") {
    std::filesystem::remove(fx.path("usr/share/nvidia/nvswitch/fabricmanager.cfg"));
    CHECK_THAT(check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric").detail,
               Catch::Contains("no /usr/share/nvidia/nvswitch/fabricmanager.cfg (default mode 0)"));
  }
  SECTION("Fabric Manager on the host holds the NVSwitches") {
    runFabricManager(fx);
    const auto w = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric");
    CHECK(w.status == CheckStatus::kWarn);
    CHECK_THAT(w.detail, Catch::Contains("nvidia-fabricmanager runs on the host (pid 4242)"));
    CHECK(w.remedy == "run 'systemctl disable --now nvidia-fabricmanager' on the host");
  }
  SECTION("a value that is no mode") {
    setFabricMode(fx, "3");
    const auto b = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric");
    CHECK(b.status == CheckStatus::kFail);
    CHECK(b.detail == kSwitches + "FABRIC_MODE=3: not 0, 1 or 2");
  }
}

TEST_CASE(
    "shared NVSwitch (FABRIC_MODE=1): NVSwitches on nvidia-nvswitch, Fabric Manager on the host",
    "[preflight][fabric]") {
  Fixture fx("hgx-h100");
  setFabricMode(fx, "1");
  const auto w = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric");
  CHECK(w.status == CheckStatus::kWarn);
  CHECK(w.detail == kSwitches +
                        "FABRIC_MODE=1; nvidia-fabricmanager does not run on the host (no live "
                        "process in /run/nvidia-fabricmanager/nv-fabricmanager.pid): in shared "
                        "NVSwitch mode it activates the VMs' partitions");
  CHECK(w.remedy == "run 'systemctl enable --now nvidia-fabricmanager'");
  runFabricManager(fx);
  CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric").status == CheckStatus::kPass);

  SECTION("an NVSwitch on vfio-pci") {
    std::filesystem::remove(fx.path("sys/devices/pci0000:c8/0000:c8:00.0/driver"));
    fx.symlink("sys/devices/pci0000:c8/0000:c8:00.0/driver", "../../../bus/pci/drivers/vfio-pci");
    const auto f = check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric");
    CHECK(f.status == CheckStatus::kFail);
    CHECK_THAT(
        f.detail,
        Catch::EndsWith("keeps the NVSwitches on nvidia-nvswitch (module nvidia), but 0000:c8:00.0 "
                        "are not"));
    CHECK(f.remedy ==
          "run 'hostprep prepare --mode container --gpu-ids 10de:22a3' to give them back to "
          "nvidia-nvswitch (module nvidia) (prepare --nvswitch auto leaves them there)");
  }
}

TEST_CASE("vm-vgpu on NVSwitch systems needs FABRIC_MODE=2", "[preflight][fabric]") {
  Fixture fx("hgx-h100");
  const auto f = check(preflightOn(fx, Mode::kVmVgpu), "gpu.fabric");
  CHECK(f.status == CheckStatus::kFail);
  CHECK_THAT(f.detail, Catch::Contains("cuInit fails with error 802 in the guest"));
  CHECK(f.remedy ==
        "set FABRIC_MODE=2 in /usr/share/nvidia/nvswitch/fabricmanager.cfg, then run "
        "'systemctl restart nvidia-fabricmanager'");
  setFabricMode(fx, "2");
  CHECK(check(preflightOn(fx, Mode::kVmVgpu), "gpu.fabric").status == CheckStatus::kWarn);
  runFabricManager(fx);
  CHECK(check(preflightOn(fx, Mode::kVmVgpu), "gpu.fabric").status == CheckStatus::kPass);
  // Passthrough cannot use the vGPU mode.
  CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "gpu.fabric").status == CheckStatus::kFail);
  // Bare-metal containers need mode 0.
  CHECK(check(preflightOn(fx, Mode::kContainer), "gpu.fabric").status == CheckStatus::kWarn);
}
