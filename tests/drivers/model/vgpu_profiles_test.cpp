#include "drivers/model/vgpu_profiles.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

TEST_CASE("the embedded vGPU profile table has the per-GPU counts", "[vgpu]") {
  const auto& t = vgpuProfiles();
  CHECK(t.maxInstances("A10-12Q") == std::optional<int>(2));
  CHECK(t.maxInstances("A10-4Q") == std::optional<int>(6));
  CHECK(t.maxInstances("T4-8Q") == std::optional<int>(2));
  CHECK(t.maxInstances("A100-1-5C") == std::optional<int>(7));
  CHECK(t.maxInstances("H200-8C") == std::optional<int>(16));
  CHECK_FALSE(t.maxInstances("A10-5Q"));
  auto a10 = t.defaultsFor({0x10de, 0x2236});
  REQUIRE(a10.size() == 1);
  CHECK(a10[0].type == "A10-12Q");
  CHECK(a10[0].count == 2);
  CHECK(t.defaultsFor({0x10de, 0x25b6}).size() == 2);  // A2 and A16 share an id
  CHECK(t.defaultsFor({0x10de, 0x1eb8})[0].type == "T4-8Q");
}

TEST_CASE("parseVgpuProfiles ignores comments and malformed lines", "[vgpu]") {
  auto t = parseVgpuProfiles(
      "# Q-series: X-1Q=99\n"
      "[X]\n"
      "  Q-series: X-1Q=4, X-2Q=2, broken, X-3Q=\n"
      "  default config ('default' key): device-filter 0x12345678 (thing) -> X-2Q x 2\n"
      "  default config ('default' key): device-filter nothing -> X-2Q x 2\n");
  CHECK(t.maxPerGpu.size() == 2);
  CHECK(t.maxInstances("X-2Q") == std::optional<int>(2));
  REQUIRE(t.defaults.size() == 1);
  CHECK(t.defaults[0].device == PciId{0x5678, 0x1234});
}
