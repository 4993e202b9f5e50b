// The vGPU part of a plan (drivers/model/vgpu_plan.cpp): requests a GPU cannot hold, or types it
// does not offer, refused before anything changes, on fixture hosts behind the fake kernel.
#include <catch2/catch.hpp>

#include "drivers/model/plan.hpp"
#include "tests/drivers/switch_rig.hpp"

using namespace hostprep;
using namespace hostprep::test::rig;

TEST_CASE("T4 requests the GPU cannot hold are refused before anything changes", "[vgpu]") {
  VRig r("vgpu-two-t4");
  auto p = r.tryPlan(Mode::kVmVgpu, "t4-4q-5");
  REQUIRE_FALSE(p);
  CHECK(p.error().exit == Exit::kUsage);
  CHECK(p.error().message ==
        "vgpu-config 't4-4q-5': GPU 0000:d8:00.0 (10de:1eb8 3D controller) cannot hold T4-4Q x 5: "
        "at most 4 per GPU");
  auto q = r.tryPlan(Mode::kVmVgpu, "t4-3q");
  REQUIRE_FALSE(q);
  CHECK(q.error().message ==
        "vgpu-config 't4-3q': GPU 0000:3b:00.0 (10de:1eb8 3D controller) does not offer vGPU type "
        "T4-3Q (it offers: GRID T4-1Q (nvidia-222), GRID T4-2Q (nvidia-223), GRID T4-4Q "
        "(nvidia-224), GRID T4-8Q (nvidia-225), GRID T4-16Q (nvidia-226))");
  CHECK(r.kernel.writeCount() == 0);
}

TEST_CASE("A10-4Q x 7 is refused before anything changes", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  auto p = r.tryPlan(Mode::kVmVgpu, "too-many");
  REQUIRE_FALSE(p);
  CHECK(
      p.error().describe() ==
      "vgpu-config 'too-many': GPU 0000:3b:00.0 (10de:2236 3D controller) cannot hold A10-4Q x 7: "
      "at most 6 per GPU (lower the count in vgpu-devices, or choose a smaller profile)");
  auto w = r.tryPlan(Mode::kVmVgpu, "wrong-family");
  REQUIRE_FALSE(w);
  CHECK_THAT(w.error().message,
             Catch::Contains("does not offer vGPU type T4-4Q (its profiles are the A10-* types"));
  CHECK(r.kernel.writeCount() == 0);
  CHECK(diff(before, r.fx.deviceState()) == "");
  SECTION("also once the VFs are on and show their types") {
    r.apply(Mode::kVmVgpu);
    auto again = r.tryPlan(Mode::kVmVgpu, "too-many");
    REQUIRE_FALSE(again);
    CHECK_THAT(again.error().message, Catch::EndsWith("cannot hold A10-4Q x 7: at most 6 per GPU"));
    auto w2 = r.tryPlan(Mode::kVmVgpu, "wrong-family");
    REQUIRE_FALSE(w2);
    CHECK_THAT(
        w2.error().message,
        Catch::Contains("does not offer vGPU type T4-4Q (it offers: NVIDIA A10-1Q (nvidia-588)"));
  }
}
