// What the device plugins advertise, counted the way they count (the sandbox plugin's quirks), and
// the vGPU devices as the status lists them.
#include "drivers/published/advertised.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

#include "drivers/model/selection.hpp"
#include "drivers/published/status.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("advertised resources follow the sandbox device plugin's quirks", "[status][naming]") {
  const std::string ids =
      "1234  Other\n\t2236  Not The A10\n10de  NVIDIA\n\t1aef  GA102 High Definition Audio "
      "Controller\n\t2236  GA102GL [A10]\n";
  Fixture fx("status-passthrough-done");
  RootHost host(fx.root());
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  auto sel = selectDevices(*snap, {});
  REQUIRE(sel);
  VgpuHost none;
  SECTION("another vendor's entry with the same device id is not used") {
    CHECK(advertisedResources(*snap, none, *sel, "nvidia", ids) ==
          std::map<std::string, int>{{"nvidia.com/GA102GL_A10", 2}});
  }
  SECTION("no pci.ids, or no entry: the raw device id") {
    CHECK(advertisedResources(*snap, none, *sel, "nvidia", std::nullopt) ==
          std::map<std::string, int>{{"nvidia.com/2236", 2}});
    CHECK(advertisedResources(*snap, none, *sel, "nvidia",
                              std::string("10de  NVIDIA\n\t1aef  Audio\n")) ==
          std::map<std::string, int>{{"nvidia.com/2236", 2}});
  }
  SECTION("a vfio-bound companion whose GPU is not on vfio gets its own resource, upper-cased") {
    std::filesystem::remove(fx.path("sys/devices/pci0000:3b/0000:3b:00.0/driver"));
    fx.symlink("sys/devices/pci0000:3b/0000:3b:00.0/driver", "../../../bus/pci/drivers/nvidia");
    auto s2 = readSnapshot(host);
    CHECK(advertisedResources(*s2, none, *sel, "nvidia", ids) ==
          std::map<std::string, int>{{"nvidia.com/GA102GL_A10", 1},
                                     {"nvidia.com/GA102_HIGH_DEFINITION_AUDIO_CONTROLLER", 1},
                                     {"nvidia.com/gpu", 1}});
  }
  SECTION("a GPU moved back to nouveau is no longer advertised (kubevirt-gpu-device-plugin#91)") {
    std::filesystem::remove(fx.path("sys/devices/pci0000:86/0000:86:00.0/driver"));
    std::filesystem::remove(fx.path("sys/devices/pci0000:86/0000:86:00.1/driver"));
    fx.symlink("sys/devices/pci0000:86/0000:86:00.0/driver", "../../../bus/pci/drivers/nouveau");
    auto s2 = readSnapshot(host);
    CHECK(advertisedResources(*s2, none, *sel, "nvidia", ids) ==
          std::map<std::string, int>{{"nvidia.com/GA102GL_A10", 1}});
    CHECK(actualMode(*s2, none, *sel, "nvidia") == ActualMode::kMixed);
  }
}

TEST_CASE("the status lists mdev devices by UUID on any parent, then per-VF vGPUs by VF",
          "[status][vgpu]") {
  VgpuHost v;
  const Bdf pf = *parseBdf("0000:3b:00.0"), vf1 = *parseBdf("0000:3b:00.4"),
            vf2 = *parseBdf("0000:3b:00.5");
  const std::string u1 = "11111111-1c39-4b8f-9a53-7d0f2c8c1a11";
  const std::string u2 = "22222222-1c39-4b8f-9a53-7d0f2c8c1a11";
  const std::string u3 = "33333333-1c39-4b8f-9a53-7d0f2c8c1a11";
  // In the reader's order: by parent.
  v.devices = {{VgpuInterface::kMdev, pf, u3, "nvidia-222", "GRID T4-4Q", 40},
               {VgpuInterface::kMdev, vf1, u1, "nvidia-558", "NVIDIA A10-12Q", 41},
               {VgpuInterface::kPerVf, vf1, "", "1428", "NVIDIA H200X-141C", 41},
               {VgpuInterface::kPerVf, vf2, "", "1430", "", 42}};
  v.otherMdevs = {{u2, std::nullopt, "mtty-2", "Dual port serial"}};
  CHECK(observedVgpus(v) ==
        std::vector<ObservedVgpu>{
            {VgpuInterface::kMdev, u1, vf1, "nvidia-558", "NVIDIA A10-12Q"},
            {VgpuInterface::kMdev, u2, std::nullopt, "mtty-2", "Dual port serial"},
            {VgpuInterface::kMdev, u3, pf, "nvidia-222", "GRID T4-4Q"},
            {VgpuInterface::kPerVf, "", vf1, "1428", "NVIDIA H200X-141C"},
            {VgpuInterface::kPerVf, "", vf2, "1430", "1430"}});  // no listed name: the id
}
