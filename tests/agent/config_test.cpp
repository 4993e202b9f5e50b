#include "agent/config.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("a full config parses into typed values", "[config]") {
  auto c = parseConfig(
      "mode: vm-passthrough\n"
      "selection:\n  gpu-ids: [\"10de:2236\", 10de:2331]\n  devices: 0000:3b:00.0,0000:86:00.0\n"
      "host-driver: nvidia\nhost-driver-provider: operator\nholder-nodes: /dev/nvidia*\n"
      "vgpu:\n  config-file: /etc/hostprep/vgpu.yaml\n  config-name: a10-4q\n"
      "status:\n  path: /run/hostprep/s.json\n  nfd-features: /etc/nfd/features.d/hostprep\n"
      "  prometheus: /var/lib/node-exporter/hostprep.prom\n"
      "reconcile: true\ncc-mode: ppcie\nreset-on-return: false\n",
      "config.yaml");
  REQUIRE(c);
  CHECK(c->ccMode == CcMode::kPpcie);
  CHECK(c->mode == Mode::kVmPassthrough);
  CHECK(c->selection.gpuIds.size() == 2);
  CHECK(c->selection.devices.size() == 2);
  CHECK(c->selection.hostDriverProvider == DriverProvider::kOperator);
  CHECK(c->holderGlob() == "/dev/nvidia*");
  CHECK(c->vgpuConfigName == "a10-4q");
  CHECK(c->statusPath == "/run/hostprep/s.json");
  CHECK(c->reconcile);
  CHECK_FALSE(c->resetOnReturn);
  auto empty = parseConfig("", "config.yaml");
  REQUIRE(empty);
  CHECK_FALSE(empty->mode);
  CHECK(empty->selection.hostDriverProvider == DriverProvider::kHost);
  CHECK(empty->statusPath == "/run/hostprep/status.json");
  CHECK(empty->holderGlob() == "/dev/nvidia*");
  CHECK(empty->resetOnReturn);
}

TEST_CASE("config errors name the file, the key and the fix, with exit 2", "[config]") {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"mode: vm\n",
       "config.yaml: mode: 'vm' is not a mode (choose one of container, vm-passthrough, vm-vgpu)"},
      {"mdoe: container\n",
       "config.yaml: mdoe: unknown key (known keys: cc-mode, devices, holder-nodes, host-driver, "
       "host-driver-provider, mode, reconcile, reset-on-return, selection, status, vgpu)"},
      {"host-driver-provider: gpu-operator\n",
       "config.yaml: host-driver-provider: 'gpu-operator' is not a host driver provider (choose "
       "one of host, operator, auto)"},
      {"cc-mode: yes\n",
       "config.yaml: cc-mode: 'yes' is not a CC mode (choose one of off, on, devtools, ppcie)"},
      {"selection:\n  gpu-ids: [10de:2236, nope]\n",
       "config.yaml: selection.gpu-ids[1]: 'nope' is not a vendor:device id (write VVVV:DDDD in "
       "hex, e.g. 10de:2236)"},
      {"selection:\n  devices: [\"3b:00.0/../x\"]\n",
       "config.yaml: selection.devices[0]: '3b:00.0/../x' is not a PCI address (write "
       "DDDD:BB:DD.F, e.g. 0000:3b:00.0)"},
      {"selection:\n  gpu: x\n",
       "config.yaml: selection.gpu: unknown key (known keys: devices, gpu-ids)"},
      {"host-driver: ../evil\n",
       "config.yaml: host-driver: '../evil' is not a driver name: contains '/' (a driver or module "
       "name has letters, digits, '_' and '-' only, at most 64 characters)"},
      {"vgpu:\n  config-name: -x-\n",
       "config.yaml: vgpu.config-name: '-x-' is not a config name (use a label value: at most 63 "
       "letters, digits, '-', '_' and '.', beginning and ending with a letter or digit)"},
      {"holder-nodes: /dev/nvidia..*\n",
       "config.yaml: holder-nodes: '/dev/nvidia..*' is not a /dev pattern (write a glob under "
       "/dev, e.g. /dev/nvidia*)"},
      {"status:\n  path: run/status.json\n",
       "config.yaml: status.path: 'run/status.json' is not an absolute file path (write a file's "
       "absolute path under --root, without '..', e.g. /run/status.json)"},
      {"status:\n  prometheus: /var/../etc/passwd\n",
       "config.yaml: status.prometheus: '/var/../etc/passwd' is not an absolute file path (write a "
       "file's absolute path under --root, without '..')"},
      {"reconcile: maybe\n",
       "config.yaml: reconcile: 'maybe' is not true or false (write reconcile: true or false)"},
      {"holder-nodes: /proc/*\n",
       "config.yaml: holder-nodes: '/proc/*' is not a /dev pattern (write a glob under /dev, e.g. "
       "/dev/nvidia*)"},
      {"mode: [a, b]\n", "config.yaml: mode: must be a single value (write mode: VALUE)"},
      {"- a\n- b\n",
       "config.yaml: (top level): must be a mapping of keys (see systemd/config.yaml)"},
  };
  for (const auto& c : cases) {
    INFO(c.yaml);
    auto r = parseConfig(c.yaml, "config.yaml");
    REQUIRE_FALSE(r);
    CHECK(r.error().describe() == c.message);
    CHECK(r.error().exit == Exit::kUsage);
  }
  auto syntax = parseConfig("mode: [\n", "config.yaml");
  REQUIRE_FALSE(syntax);
  CHECK_THAT(syntax.error().message, Catch::StartsWith("config.yaml: line "));
}

TEST_CASE("devices rules parse in the documented shape", "[config][rules]") {
  auto c = parseConfig(
      "mode: container\n"
      "devices:\n"
      "  - match: {bdf: \"0000:41:00.0\"}\n"
      "    mode: vm-passthrough\n"
      "  - match: {model: \"10de:2330\"}  # every GPU with this id\n"
      "    mode: vm-passthrough\n"
      "  - match: {index: 3, numa: 1}\n"
      "    mode: container\n",
      "config.yaml");
  REQUIRE(c);
  CHECK(c->mode == Mode::kContainer);
  REQUIRE(c->rules.size() == 3);
  CHECK(c->rules[0] == DeviceRule{{parseBdf("0000:41:00.0"), {}, {}, {}}, Mode::kVmPassthrough});
  CHECK(c->rules[1] == DeviceRule{{{}, PciId{0x10de, 0x2330}, {}, {}}, Mode::kVmPassthrough});
  CHECK(c->rules[2] == DeviceRule{{{}, {}, 3, 1}, Mode::kContainer});
  CHECK(c->rules[2].match.describe() == "{index: 3, numa: 1}");
  // selection.devices is another key: the GPUs hostprep manages at all.
  auto both = parseConfig("selection:\n  devices: [0000:41:00.0]\ndevices: []\n", "config.yaml");
  REQUIRE(both);
  CHECK(both->rules.empty());
  CHECK(both->selection.devices.size() == 1);
}

TEST_CASE("a bad devices rule names its key and exits 2", "[config][rules]") {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"devices:\n  - match: {slot: 3}\n    mode: container\n",
       "config.yaml: devices[0].match.slot: unknown key (known keys: bdf, index, model, numa)"},
      {"devices:\n  - match: {bdf: 41:00.0}\n    mode: container\n    why: x\n",
       "config.yaml: devices[0].why: unknown key (known keys: match, mode)"},
      {"devices:\n  - match: {bdf: 41:00.0}\n    mode: container\n"
       "  - match: {bdf: \"41:00\"}\n    mode: container\n",
       "config.yaml: devices[1].match.bdf: '41:00' is not a PCI address (write DDDD:BB:DD.F, e.g. "
       "0000:3b:00.0)"},
      {"devices:\n  - match: {model: nvidia}\n    mode: container\n",
       "config.yaml: devices[0].match.model: 'nvidia' is not a vendor:device id (write VVVV:DDDD "
       "in hex, e.g. 10de:2236)"},
      {"devices:\n  - match: {index: -1}\n    mode: container\n",
       "config.yaml: devices[0].match.index: '-1' is not a whole number >= 0 (write a number such "
       "as 0 or 1)"},
      {"devices:\n  - match: {numa: one}\n    mode: container\n",
       "config.yaml: devices[0].match.numa: 'one' is not a whole number >= 0 (write a number such "
       "as 0 or 1)"},
      {"devices:\n  - match: {index: 0}\n    mode: vm\n",
       "config.yaml: devices[0].mode: 'vm' is not a mode (choose one of container, "
       "vm-passthrough, vm-vgpu)"},
      {"devices:\n  - match: {index: 0}\n",
       "config.yaml: devices[0].mode: is missing (write mode: one of container, vm-passthrough, "
       "vm-vgpu)"},
      {"devices:\n  - mode: container\n",
       "config.yaml: devices[0].match: is missing (write devices: [{match: {bdf: "
       "\"0000:41:00.0\"}, mode: vm-passthrough}])"},
      {"devices:\n  - match: {}\n    mode: container\n",
       "config.yaml: devices[0].match: matches every GPU: name bdf, model, index or numa (to set "
       "every GPU's mode, write the top-level mode:)"},
      {"devices:\n  - match: 0000:41:00.0\n    mode: container\n",
       "config.yaml: devices[0].match: must be a mapping (write match: {bdf: \"0000:41:00.0\"})"},
      {"devices: {bdf: 0000:41:00.0}\n",
       "config.yaml: devices: must be a list of rules (write devices: [{match: {bdf: "
       "\"0000:41:00.0\"}, mode: vm-passthrough}])"},
  };
  for (const auto& c : cases) {
    INFO(c.yaml);
    auto r = parseConfig(c.yaml, "config.yaml");
    REQUIRE_FALSE(r);
    CHECK(r.error().describe() == c.message);
    CHECK(r.error().exit == Exit::kUsage);
  }
}

TEST_CASE("a config writable by others is refused when running as root", "[config]") {
  CHECK_FALSE(configPermissionProblem(0, 0100644, true));
  CHECK(configPermissionProblem(0, 0100664, true) ==
        std::optional<std::string>("writable by group or others"));
  CHECK(configPermissionProblem(0, 0100646, true) ==
        std::optional<std::string>("writable by group or others"));
  CHECK(configPermissionProblem(1000, 0100644, true) ==
        std::optional<std::string>("owned by uid 1000, not root"));
  CHECK_FALSE(configPermissionProblem(1000, 0100666, false));

  Fixture fx;
  fx.write("etc/hostprep/config.yaml", "mode: container\n");
  RootHost host(fx.root());
  ::chmod(fx.path("etc/hostprep/config.yaml").c_str(), 0666);
  auto c = loadConfig(host, kConfigPath, false);
  if (::geteuid() == 0) {
    REQUIRE_FALSE(c);
    CHECK_THAT(c.error().describe(),
               Catch::Contains(
                   "/etc/hostprep/config.yaml: refusing a config writable by group or others"));
    CHECK_FALSE(configuredMode(host));
  } else {
    CHECK(c);
  }
  ::chmod(fx.path("etc/hostprep/config.yaml").c_str(), 0644);
  CHECK(configuredMode(host) == Mode::kContainer);
}

TEST_CASE("a missing default config is empty, a missing named one is an error", "[config]") {
  Fixture fx;
  RootHost host(fx.root());
  auto c = loadConfig(host, kConfigPath, false);
  REQUIRE(c);
  CHECK_FALSE(c->mode);
  CHECK_FALSE(configuredMode(host));
  auto named = loadConfig(host, "/etc/hostprep/other.yaml", true);
  REQUIRE_FALSE(named);
  CHECK(named.error().describe() ==
        "/etc/hostprep/other.yaml: cannot read the config under --root " + fx.root().string() +
            " (read as " + fx.path("etc/hostprep/other.yaml").string() +
            "): No such file or directory (pass --config with a readable file)");
}

TEST_CASE("the config is read over defaults: each key it names replaces that value", "[config]") {
  AgentConfig defaults;
  defaults.selection.devices = {*parseBdf("0000:86:00.0")};
  defaults.selection.gpuIds = {{0x10de, 0x2236}};
  defaults.selection.hostDriver = "standin";
  auto c = parseConfig("host-driver: nvidia\nselection:\n  gpu-ids: []\n", "config.yaml", defaults);
  REQUIRE(c);
  CHECK(c->selection.devices == defaults.selection.devices);  // not named: kept
  CHECK(c->selection.gpuIds.empty());                         // named empty: replaced
  CHECK(c->selection.hostDriver == "nvidia");
  Fixture fx;
  RootHost host(fx.root());
  auto missing = loadConfig(host, kConfigPath, false, defaults);
  REQUIRE(missing);
  CHECK(missing->selection.hostDriver == "standin");
}

TEST_CASE("the last selection is kept in the config's format and read back", "[config]") {
  SelectionOptions s;
  s.gpuIds = {{0x10de, 0x2236}, {0x10de, 0x1aef}};
  s.devices = {*parseBdf("0000:3b:00.0")};
  s.hostDriver = "nvidia";
  CHECK(formatSelection(s) ==
        "selection:\n  gpu-ids: [\"10de:2236\", \"10de:1aef\"]\n  devices: [\"0000:3b:00.0\"]\n"
        "host-driver: \"nvidia\"\nhost-driver-provider: host\n");
  Fixture fx;
  RootHost host(fx.root());
  auto none = readLastSelection(host);
  REQUIRE(none);
  CHECK_FALSE(*none);
  REQUIRE(writeLastSelection(host, s));
  auto back = readLastSelection(host);
  REQUIRE(back);
  REQUIRE(*back);
  CHECK((*back)->gpuIds == s.gpuIds);
  CHECK((*back)->devices == s.devices);
  CHECK((*back)->hostDriver == s.hostDriver);
  CHECK((*back)->hostDriverProvider == s.hostDriverProvider);
  // The same selection again leaves the file as it is (no rewrite: the same inode); another
  // replaces it.
  const ino_t before = fx.inode("run/hostprep/last-selection");
  REQUIRE(writeLastSelection(host, s));
  CHECK(fx.inode("run/hostprep/last-selection") == before);
  s.hostDriver = "standin";
  REQUIRE(writeLastSelection(host, s));
  CHECK(fx.inode("run/hostprep/last-selection") != before);
  CHECK((*readLastSelection(host))->hostDriver == "standin");
  // A damaged file is an error that names it (status warns and ignores it).
  fx.write("run/hostprep/last-selection", "selection:\n  devices: [nope]\n");
  auto bad = readLastSelection(host);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "/run/hostprep/last-selection: selection.devices[0]: 'nope' is not a PCI address");
}
