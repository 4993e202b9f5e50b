#include "drivers/vgpu_state.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("the status reader and vGPU creation share one creatable_vgpu_types parser",
          "[vgpu-state]") {
  CHECK(
      parseCreatableVgpuTypes(
          "ID    : vGPU Name\n1428  : NVIDIA H200X-141C\n 1430 :NVIDIA H200X-70C \n\nbad line\n") ==
      std::vector<VgpuTypeId>{{"1428", "NVIDIA H200X-141C"}, {"1430", "NVIDIA H200X-70C"}});
  CHECK(parseCreatableVgpuTypes("").empty());
  CHECK(parseCreatableVgpuTypes("12 :\n").empty());
}

TEST_CASE("mdev UUIDs are validated before use in a path", "[vgpu-state]") {
  CHECK(isValidUuid("5f2a9a5e-1c39-4b8f-9a53-7d0f2c8c1a11"));
  CHECK_FALSE(isValidUuid("../../etc/passwd-aaaaaaaaaaaaaaaaaaaaaaaa"));
  CHECK_FALSE(isValidUuid("5f2a9a5e1c394b8f9a537d0f2c8c1a11"));
}

TEST_CASE("per-VF vGPUs are read from current_vgpu_type", "[vgpu-state]") {
  Fixture fx("status-container");
  const std::string vf = "sys/devices/pci0000:86/0000:86:00.0/nvidia";
  fx.write(vf + "/creatable_vgpu_types", "ID    : vGPU Name\n558 : NVIDIA A10-12Q\n");
  fx.write(vf + "/current_vgpu_type", "558\n");
  const std::string other = "sys/devices/pci0000:3b/0000:3b:00.0/nvidia";
  fx.write(other + "/creatable_vgpu_types", "557 : NVIDIA A10-8Q\n");
  fx.write(other + "/current_vgpu_type", "0\n");
  RootHost host(fx.root());
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  auto st = readVgpuState(host, *snap);
  REQUIRE(st.devices.size() == 1);
  CHECK(st.devices[0].interface == VgpuInterface::kPerVf);
  CHECK(st.devices[0].parent->str() == "0000:86:00.0");
  CHECK(st.devices[0].typeName == "NVIDIA A10-12Q");
  CHECK(st.vgpuCapable.size() == 2);

  SECTION("a type no longer listed as creatable is named from supported_vgpu_types, else its id") {
    fx.write(vf + "/creatable_vgpu_types", "");
    fx.write(vf + "/supported_vgpu_types", "558 : NVIDIA A10-12Q\n");
    CHECK(readVgpuState(host, *snap).devices[0].typeName == "NVIDIA A10-12Q");
    std::filesystem::remove(fx.path(vf + "/supported_vgpu_types"));
    CHECK(readVgpuState(host, *snap).devices[0].typeName == "558");
  }
}
