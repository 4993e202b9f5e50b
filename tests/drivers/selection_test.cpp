// Selection (drivers/selection.cpp): NVSwitches go with the GPUs only when asked, and
// --nvswitch auto follows Fabric Manager's FABRIC_MODE.
#include "drivers/selection.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

namespace {

std::string roles(const Selection& sel) {
  std::string s;
  for (const auto& t : sel.targets) s += t.bdf.str() + "=" + std::string(toString(t.role)) + " ";
  return s;
}

}  // namespace

TEST_CASE("NVSwitches are left alone unless they go with the GPUs", "[selection]") {
  Fixture fx("hgx-h100");
  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE(s);
  SelectionOptions opt;
  auto plain = selectDevices(*s, opt);
  REQUIRE(plain);
  CHECK(plain->targets.size() == 8);
  CHECK(plain->find(*parseBdf("0000:c7:00.0")) == nullptr);

  opt.withNvSwitches = true;
  auto with = selectDevices(*s, opt);
  REQUIRE(with);
  INFO(roles(*with));
  CHECK(with->targets.size() == 12);
  const auto* sw = with->find(*parseBdf("0000:ca:00.0"));
  REQUIRE(sw);
  CHECK(sw->role == Role::kNvSwitch);
  CHECK(sw->group == std::optional<int>(203));
  CHECK(with->problems.empty());

  // --devices picks GPUs; the fabric still goes whole.
  opt.devices = {*parseBdf("0000:18:00.0")};
  auto one = selectDevices(*s, opt);
  REQUIRE(one);
  CHECK(one->targets.size() == 5);
  // An NVSwitch named by --gpu-ids is taken once.
  opt.devices.clear();
  opt.gpuIds = {PciId{0x10de, 0x22a3}};
  auto ids = selectDevices(*s, opt);
  REQUIRE(ids);
  CHECK(ids->targets.size() == 4);
}

TEST_CASE("the nvswitch policy: parsing, and auto against FABRIC_MODE", "[selection]") {
  CHECK(parseNvSwitchPolicy("auto") == NvSwitchPolicy::kAuto);
  CHECK(parseNvSwitchPolicy("with-gpus") == NvSwitchPolicy::kWithGpus);
  CHECK(parseNvSwitchPolicy("leave") == NvSwitchPolicy::kLeave);
  CHECK_FALSE(parseNvSwitchPolicy("yes"));
  CHECK(nvSwitchesWithGpus(NvSwitchPolicy::kAuto, FabricMode::kFullPassthrough));
  CHECK_FALSE(nvSwitchesWithGpus(NvSwitchPolicy::kAuto, FabricMode::kSharedNvSwitch));
  CHECK_FALSE(nvSwitchesWithGpus(NvSwitchPolicy::kAuto, FabricMode::kVgpu));
  CHECK(nvSwitchesWithGpus(NvSwitchPolicy::kWithGpus, FabricMode::kVgpu));
  CHECK_FALSE(nvSwitchesWithGpus(NvSwitchPolicy::kLeave, FabricMode::kFullPassthrough));
}
