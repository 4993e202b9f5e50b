// vgpu-device-manager's config format: what parses, and errors that name the file, line and key.
#include "drivers/model/vgpu_config.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

TEST_CASE("a vgpu-device-manager config parses as is", "[vgpu][config]") {
  auto cfg = parseVgpuConfig(R"(version: v1
vgpu-configs:
  default:
    - device-filter: "0x223610DE"
      devices: all
      vgpu-devices:
        "A10-12Q": 2
    - device-filter: ["0x1EB810DE", "0x20B010DE:0x134F10DE"]
      devices: [0, 2]
      vgpu-devices: {T4-4Q: 4, A100X-1-5C: 7}
  A10-4Q:
    - devices: all
      vgpu-devices:
        A10-4Q: 6
)",
                             "vgpu.yaml");
  REQUIRE(cfg);
  CHECK(cfg->names() == std::vector<std::string>{"default", "A10-4Q"});
  const auto& d = *cfg->find("default");
  REQUIRE(d.size() == 2);
  CHECK(d[0].filters == std::vector<VgpuDeviceFilter>{{{0x10de, 0x2236}, std::nullopt}});
  CHECK_FALSE(d[0].devices);
  CHECK(d[0].vgpuDevices == std::vector<std::pair<std::string, int>>{{"A10-12Q", 2}});
  CHECK(d[0].line == 4);
  REQUIRE(d[1].filters.size() == 2);
  CHECK(d[1].filters[1].subsystem == PciId{0x10de, 0x134f});
  CHECK(d[1].devices == std::vector<int>{0, 2});
  CHECK(d[1].vgpuDevices ==
        std::vector<std::pair<std::string, int>>{{"T4-4Q", 4}, {"A100X-1-5C", 7}});
  CHECK(d[0].matches({0x10de, 0x2236}, {0x10de, 0x1482}, 5));
  CHECK_FALSE(d[0].matches({0x10de, 0x2237}, {0x10de, 0x1482}, 0));
  CHECK(d[1].matches({0x10de, 0x1eb8}, {0x10de, 0x12a2}, 2));
  CHECK_FALSE(d[1].matches({0x10de, 0x1eb8}, {0x10de, 0x12a2}, 1));
  CHECK(d[1].matches({0x10de, 0x20b0}, {0x10de, 0x134f}, 0));
  CHECK_FALSE(d[1].matches({0x10de, 0x20b0}, {0x10de, 0x1111}, 0));
  CHECK(cfg->find("A10-4Q")->front().matches({0x1234, 0x11e8}, {0, 0}, 0));
  CHECK_FALSE(cfg->find("nope"));
}

TEST_CASE("config errors name the file, the line and the key", "[vgpu][config]") {
  struct Row {
    const char* yaml;
    const char* message;
  };
  for (const Row& r : {
           Row{"version: v2\nvgpu-configs: {}\n", "c.yaml:1: version: 'v2' is not supported"},
           Row{"vgpu-configs: {}\n", "c.yaml: version: missing"},
           Row{"version: v1\n", "c.yaml: vgpu-configs: missing"},
           Row{"version: v1\nvgpu-config: {}\n", "c.yaml:2: vgpu-config: unknown key"},
           Row{"version: v1\nvgpu-configs: [a]\n",
               "c.yaml:2: vgpu-configs: not a map of named configs"},
           Row{"version: v1\nvgpu-configs:\n  default: {devices: all}\n",
               "c.yaml:3: vgpu-configs.default: not a list of entries"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: all\n      vgpu-devices: "
               "{A10-12Q: two}\n",
               "c.yaml:5: vgpu-configs.default[0].vgpu-devices.A10-12Q: 'two' is not a count"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: all\n      vgpu-devices: "
               "{A10-12Q: -1}\n",
               "c.yaml:5: vgpu-configs.default[0].vgpu-devices.A10-12Q: '-1' is not a count"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: all\n      vgpu-devices: "
               "{\"../x\": 1}\n",
               "c.yaml:5: vgpu-configs.default[0].vgpu-devices: '../x' is not a vGPU type name"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: some\n      vgpu-devices: "
               "{A: 1}\n",
               "c.yaml:4: vgpu-configs.default[0].devices: 'some' is neither 'all' nor a list"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: [0, x]\n      vgpu-devices: "
               "{A: 1}\n",
               "c.yaml:4: vgpu-configs.default[0].devices: 'x' is not a GPU index"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - vgpu-devices: {A: 1}\n",
               "c.yaml:4: vgpu-configs.default[0].devices: missing"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: all\n",
               "c.yaml:4: vgpu-configs.default[0].vgpu-devices: missing"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: all\n      device-filter: "
               "0x2236\n      vgpu-devices: {A: 1}\n",
               "c.yaml:5: vgpu-configs.default[0].device-filter: '0x2236' is not a device id"},
           Row{"version: v1\nvgpu-configs:\n  default:\n    - devices: all\n      mig-devices: "
               "{}\n      vgpu-devices: {A: 1}\n",
               "c.yaml:5: vgpu-configs.default[0].mig-devices: unknown key"},
           Row{"version: v1\nvgpu-configs:\n  default:\n  - devices: all\n    vgpu-devices: {A: 1, "
               "A: 2}\n",
               "c.yaml:5: vgpu-configs.default[0].vgpu-devices.A: listed twice"},
           Row{"version: v1\nvgpu-configs: {default: [\n", "c.yaml:3: not YAML"},
       }) {
    INFO(r.yaml);
    auto cfg = parseVgpuConfig(r.yaml, "c.yaml");
    REQUIRE_FALSE(cfg);
    CHECK_THAT(cfg.error().message, Catch::StartsWith(r.message));
    CHECK(cfg.error().exit == Exit::kUsage);
  }
}

TEST_CASE("device filters are 0xDDDDVVVV with an optional subsystem", "[vgpu][config]") {
  CHECK(parseVgpuDeviceFilter("0x223610DE") == VgpuDeviceFilter{{0x10de, 0x2236}, std::nullopt});
  CHECK(parseVgpuDeviceFilter("0x223610de:0x148210DE") ==
        VgpuDeviceFilter{{0x10de, 0x2236}, PciId{0x10de, 0x1482}});
  CHECK_FALSE(parseVgpuDeviceFilter("10de:2236"));
  CHECK_FALSE(parseVgpuDeviceFilter("0x2236"));
  CHECK_FALSE(parseVgpuDeviceFilter("0x223610DE:"));
  CHECK_FALSE(parseVgpuDeviceFilter("0x223610DE:0x1:0x2"));
  CHECK_FALSE(parseVgpuDeviceFilter("0xZZZZ10DE"));
}
