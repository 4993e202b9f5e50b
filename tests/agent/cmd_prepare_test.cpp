// hostprep prepare as users see it: exact messages, exit codes, the plan as text and JSON, the
// vm-vgpu plan and its config errors. Only dry runs and refusals run here, always on fixture roots.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using hostprep::test::Fixture;
using hostprep::test::runHostprep;

namespace {
const char* kConfig = R"(version: v1
vgpu-configs:
  default:
    - device-filter: "0x223610DE"
      devices: all
      vgpu-devices:
        "A10-12Q": 2
  A10-4Q:
    - devices: all
      vgpu-devices: {A10-4Q: 6}
  too-many:
    - devices: all
      vgpu-devices: {A10-4Q: 7}
)";
}  // namespace

TEST_CASE("bad option values name the input and the fix", "[cli]") {
  auto r = runHostprep({"prepare", "--mode", "vm"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep prepare: --mode: 'vm' is not a mode (choose one of container, "
        "vm-passthrough, vm-vgpu)\n");
  r = runHostprep({"prepare", "--mode", "container", "--devices", "0000:3b:00.0/../x"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("'0000:3b:00.0/../x' is not a PCI address"));
  r = runHostprep({"prepare", "--mode", "container", "--host-driver", "../evil"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--host-driver: '../evil' is not a driver name"));
  r = runHostprep({"--output", "yaml", "prepare", "--mode", "container"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--output: 'yaml' is not a format"));
  // Without --mode prepare applies the config; a fixture root that has none says so.
  Fixture fx("two-a10");
  r = runHostprep({"--root", fx.root().string(), "prepare"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("no --mode, and /etc/hostprep/config.yaml names no mode"));
}

TEST_CASE("prepare --dry-run on two A10s prints the plan as JSON and touches nothing", "[cli]") {
  Fixture fx("two-a10");
  auto before = fx.deviceState();
  // Global options may follow the command.
  auto r = runHostprep({"prepare", "--mode", "vm-passthrough", "--dry-run", "--root",
                        fx.root().string(), "--output", "json"});
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["mode"] == "vm-passthrough");
  CHECK(j["dry_run"] == true);
  std::vector<std::string> bdfs;
  for (const auto& d : j["devices"]) bdfs.push_back(d["bdf"]);
  CHECK(bdfs ==
        std::vector<std::string>{"0000:3b:00.0", "0000:86:00.0", "0000:3b:00.1", "0000:86:00.1"});
  CHECK(j["devices"][2]["role"] == "companion");
  CHECK(j["devices"][0]["from"]["driver"] == "nvidia");
  CHECK(j["steps"].size() == 19);
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep")));
}

TEST_CASE("prepare refuses a group holding the root disk with exit 3", "[cli]") {
  Fixture fx("nvme-shared-group");
  auto r = runHostprep(
      {"--root", fx.root().string(), "prepare", "--mode", "vm-passthrough", "--dry-run"});
  CHECK(r.exitCode == 3);
  CHECK_THAT(r.err,
             Catch::Contains("refusing to give these IOMMU groups to vfio: IOMMU group 12 of "
                             "GPU 0000:03:00.0 holds the root filesystem's disk"));
  CHECK_THAT(r.err, Catch::Contains("--force"));
}

TEST_CASE("prepare on a host with no matching GPU says what it looked for", "[cli]") {
  Fixture fx("two-a10");
  auto r = runHostprep({"--root", fx.root().string(), "prepare", "--mode", "vm-passthrough",
                        "--dry-run", "--gpu-ids", "1234:11e8"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("no device with the given --gpu-ids found on this host"));
}

TEST_CASE("an already prepared node says so", "[cli]") {
  Fixture fx("passthrough-done");
  auto r = runHostprep(
      {"--root", fx.root().string(), "prepare", "--mode", "vm-passthrough", "--dry-run"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("plan for vm-passthrough: 4 device(s), 0 step(s)"));
  CHECK_THAT(r.out, Catch::Contains("(already there)"));
}
TEST_CASE("prepare --mode vm-vgpu --dry-run prints the vGPU plan and what will be advertised",
          "[cli][vgpu]") {
  Fixture fx("vgpu-two-a10");
  auto before = fx.deviceState();
  auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "prepare", "--mode",
                        "vm-vgpu", "--dry-run"});
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["mode"] == "vm-vgpu");
  CHECK(j["vgpu"]["advertised"] == nlohmann::json{{"nvidia.com/NVIDIA_A10-12Q", 4}});
  REQUIRE(j["vgpu"]["sriov"].size() == 2);
  CHECK(j["vgpu"]["sriov"][0] == nlohmann::json{{"pf", "0000:3b:00.0"}, {"from", 0}, {"to", 16}});
  REQUIRE(j["vgpu"]["devices"].size() == 4);
  CHECK(j["vgpu"]["devices"][1]["parent"] == "0000:3b:00.5");
  CHECK(j["vgpu"]["devices"][1]["interface"] == "auto");
  CHECK(j["vgpu"]["devices"][1]["type_name"] == "NVIDIA A10-12Q");
  CHECK(j["steps"].back()["kind"] == "create-vgpu");
  CHECK(j["steps"].back()["uuid"] == j["vgpu"]["devices"][3]["uuid"]);
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep")));

  fx.write("etc/vgpu.yaml", kConfig);
  const std::string cfg = "/etc/vgpu.yaml";  // a host path, under --root
  auto t = runHostprep({"--root", fx.root().string(), "prepare", "--mode", "vm-vgpu", "--dry-run",
                        "--vgpu-config", cfg, "--vgpu-config-name", "A10-4Q"});
  REQUIRE(t.exitCode == 0);
  CHECK_THAT(t.out, Catch::Contains("advertises nvidia.com/NVIDIA_A10-4Q: 12"));
  CHECK_THAT(t.out, Catch::Contains("vGPU NVIDIA A10-4Q on 0000:86:01.1 (GPU 0000:86:00.0)"));
}

TEST_CASE("vm-vgpu config problems exit 2 and change nothing", "[cli][vgpu]") {
  Fixture fx("vgpu-two-a10");
  auto before = fx.deviceState();
  fx.write("etc/vgpu.yaml", kConfig);
  fx.write("etc/bad.yaml",
           "version: v1\nvgpu-configs:\n  default:\n    - devices: every\n      vgpu-devices: "
           "{A10-4Q: 1}\n");
  const std::string cfg = "/etc/vgpu.yaml";
  const std::string root = fx.root().string();

  auto r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--vgpu-config", cfg,
                        "--vgpu-config-name", "too-many"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep prepare: vgpu-config 'too-many': GPU 0000:3b:00.0 (10de:2236 3D controller) "
        "cannot hold A10-4Q x 7: at most 6 per GPU (lower the count in vgpu-devices, or "
        "choose a smaller profile)\n");
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--dry-run", "--vgpu-config",
                   cfg, "--vgpu-config-name", "nope"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--vgpu-config-name: 'nope' is not a config in " + cfg +
                                    " (it has: default, A10-4Q, too-many)"));
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--dry-run", "--vgpu-config",
                   "/etc/bad.yaml"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(
      r.err,
      Catch::Contains(
          "bad.yaml:4: vgpu-configs.default[0].devices: 'every' is neither 'all' nor a list"));
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--dry-run", "--vgpu-config",
                   "/nonexistent/x.yaml"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--vgpu-config: cannot read /nonexistent/x.yaml under --root " +
                                    root + " (read as " + root +
                                    "/nonexistent/x.yaml): No such file or directory"));
  r = runHostprep({"--root", root, "prepare", "--mode", "container", "--vgpu-config", cfg});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--vgpu-config and --vgpu-config-name need --mode vm-vgpu"));
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--vgpu-config-name", "x/../y"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--vgpu-config-name: 'x/../y' is not a config name"));
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--dry-run",
                   "--vgpu-config-name", "A10-4Q"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("the embedded defaults only have 'default'"));
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep/journal.json")));
}

TEST_CASE("vm-vgpu does not refuse a shared IOMMU group, but a GPU without vGPU support",
          "[cli][vgpu]") {
  Fixture fx("nvme-shared-group");  // an A10 on nvidia without SR-IOV or mdev types
  auto r = runHostprep({"--root", fx.root().string(), "prepare", "--mode", "vm-vgpu", "--dry-run"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err,
             Catch::Contains("GPU 0000:03:00.0 (10de:2236 3D controller): offers no vGPU types "
                             "(no mdev_supported_types, no SR-IOV)"));
  CHECK_THAT(r.err, Catch::Contains("install and load the NVIDIA vGPU manager"));
}

TEST_CASE("prepare without --mode applies the config's mode and devices rules", "[cli][mixed]") {
  Fixture fx("two-a10");
  const auto before = fx.deviceState();
  fx.write("etc/hostprep/config.yaml",
           "mode: container\n"
           "devices:\n"
           "  - match: {bdf: \"0000:86:00.0\"}\n"
           "    mode: vm-passthrough\n"
           "  - match: {model: \"10de:2330\"}\n"
           "    mode: vm-passthrough\n");
  auto r = runHostprep({"--root", fx.root().string(), "prepare", "--dry-run"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out,
             Catch::StartsWith("plan for mixed (container: 1, vm-passthrough: 1): 4 device(s), "));
  CHECK_THAT(r.out, Catch::Contains("0000:3b:00.0 (10de:2236 3D controller) gpu: nvidia -> nvidia "
                                    "(already there)"));
  CHECK_THAT(r.out, Catch::Contains("0000:86:00.0 (10de:2236 3D controller) gpu: nvidia -> "
                                    "vfio-pci\n"));
  CHECK(r.err ==
        "warning: config: devices[1] {model: 10de:2330} matches no selected GPU (or only GPUs an "
        "earlier rule took)\n");
  auto j = runHostprep({"--root", fx.root().string(), "prepare", "--dry-run", "--output", "json"});
  REQUIRE(j.exitCode == 0);
  auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["mode"] == "container");
  CHECK(doc["split"] == nlohmann::json{{"container", 1}, {"vm-passthrough", 1}});
  CHECK(doc["devices"][1]["mode"] == "vm-passthrough");
  // --mode keeps its meaning: every selected GPU to that mode, the rules unused.
  auto m =
      runHostprep({"--root", fx.root().string(), "prepare", "--mode", "container", "--dry-run"});
  CHECK(m.exitCode == 0);
  CHECK_THAT(m.out, Catch::StartsWith("plan for container: 4 device(s), 0 step(s)"));
  CHECK(fx.deviceState() == before);
}

TEST_CASE("prepare with a stray BDF exits 2 and moves nothing", "[cli]") {
  // Taken as a selection by a user, ignored by the parser, it would have moved every GPU.
  Fixture fx("two-a10");
  const auto before = fx.deviceState();
  auto r = runHostprep(
      {"--root", fx.root().string(), "prepare", "--mode", "vm-passthrough", "0000:3b:00.0"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep prepare: unexpected argument '0000:3b:00.0' (to select that GPU, pass --devices "
        "0000:3b:00.0)\n");
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep")));
}

TEST_CASE("prepare without --mode: config errors exit 2 and touch nothing", "[cli][mixed]") {
  Fixture fx("two-a10");
  const auto before = fx.deviceState();
  auto none = runHostprep({"--root", fx.root().string(), "prepare"});
  CHECK(none.exitCode == 2);
  CHECK(none.err ==
        "hostprep prepare: no --mode, and /etc/hostprep/config.yaml names no mode (pass "
        "--mode M, or write mode: M in the config)\n");
  fx.write("etc/hostprep/config.yaml",
           "mode: container\ndevices:\n  - match: {bdf: \"0000:86:00.0\", slot: 2}\n"
           "    mode: vm-passthrough\n");
  auto key = runHostprep({"--root", fx.root().string(), "prepare"});
  CHECK(key.exitCode == 2);
  CHECK_THAT(key.err, Catch::Contains("/etc/hostprep/config.yaml: devices[0].match.slot: unknown "
                                      "key (known keys: bdf, index, model, numa)"));
  fx.write("etc/hostprep/config.yaml",
           "mode: container\ndevices:\n  - match: {index: 1}\n    mode: vm-vgpu\n");
  auto mix = runHostprep({"--root", fx.root().string(), "prepare"});
  CHECK(mix.exitCode == 2);
  CHECK_THAT(mix.err, Catch::Contains("devices: container and vm-vgpu cannot share a node: one "
                                      "nvidia module cannot be both the datacenter driver and the "
                                      "vGPU manager (1 GPU(s) container, 1 GPU(s) vm-vgpu)"));
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep/journal.json")));
}
